import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { DEFAULT_REDACTION, parseRedaction } from '../src/config/redaction-rules.ts';
import { lineJson, takeLineJson } from '../src/decision-log/line-json.ts';
import { createRedactor } from '../src/decision-log/log-redaction.ts';
import { median } from './bench-median.ts';

/**
 * Issue 32: the decision line serialised for the decision log (redacted) and for the decision
 * store (as is). Before: two `JSON.stringify`; after: as src/decision-log/line-json.ts
 * has them, the second free when redaction left the record whole. Real lines
 * (bench/fixtures/decision-lines.jsonl, ~3.7 KB), fresh copies per record as in production, with
 * the default redaction over an Admin user and devices carrying display names (it copies them), and
 * with `RISKGATE_DECISION_LOG_REDACT=none`; main-thread CPU per record (redaction included), median.
 *
 *   npx tsx bench/line-json.ts [records per run, 20000] [runs, 5]
 */

const records = Number(process.argv[2] ?? 20_000);
const runs = Number(process.argv[3] ?? 5);
const rules = parseRedaction(DEFAULT_REDACTION);
if (typeof rules === 'string') throw new Error(rules);
const redactors: Record<string, (r: object) => object> = {
  'default redaction, display names': createRedactor(rules, undefined),
  'redaction none': createRedactor([], undefined),
};
let redact = redactors['redaction none']!;
const fixtures = readFileSync(new URL('./fixtures/decision-lines.jsonl', import.meta.url), 'utf8')
  .split('\n')
  .filter((l) => l.includes('"kind":"decision"'))
  .map((l) => {
    const r = JSON.parse(l) as { inputs: Record<string, unknown> };
    r.inputs.user = { ...(r.inputs.user as object), display_name: 'Alice Example' };
    r.inputs.devices = [{ id: 'dev-1', display_name: 'Work laptop', platform: 'browser' }];
    return r;
  });

function cpuUs(serialise: (raw: object, redacted: object) => void): number {
  const batch = Array.from({ length: records }, (_, i) => structuredClone(fixtures[i % fixtures.length]!));
  const t0 = process.threadCpuUsage();
  // The log's line first (the redacted copy), then the store's (the record as is).
  for (const raw of batch) serialise(raw, redact(raw));
  const t = process.threadCpuUsage(t0);
  return (t.user + t.system) / records;
}

const f = (xs: number[]) => `${median(xs).toFixed(1)} µs (runs ${xs.map((x) => x.toFixed(1)).join(', ')})`;
const before: number[] = [];
const after: number[] = [];
let sink = 0;
const stringify = (raw: object, redacted: object) => {
  sink += JSON.stringify(redacted).length + JSON.stringify(raw).length;
};
const shared = (raw: object, redacted: object) => {
  sink +=
    (redacted === raw ? lineJson(redacted) : JSON.stringify(redacted)).length + takeLineJson(raw).length;
};
for (const [name, r] of Object.entries(redactors)) {
  redact = r;
  before.length = 0;
  after.length = 0;
  cpuUs(stringify);
  cpuUs(shared);
  const load0 = loadavg()[0]!;
  for (let k = 0; k < runs; k++) {
    // Alternating order: a drift in the machine's load falls on both.
    if (k % 2 === 0) {
      before.push(cpuUs(stringify));
      after.push(cpuUs(shared));
    } else {
      after.push(cpuUs(shared));
      before.push(cpuUs(stringify));
    }
  }
  console.log(
    `${name}: per record, redaction + the log's line + the store's line: JSON.stringify twice ${f(before)}; as the log and the store do now ${f(after)}; ` +
      `line ${JSON.stringify(fixtures[0]).length} B; load average ${load0.toFixed(2)} -> ${loadavg()[0]!.toFixed(2)} (${sink > 0 ? 'ok' : ''})`,
  );
}
