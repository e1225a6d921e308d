/**
 * Replay throughput (issue 16): `npx tsx bench/replay-throughput.ts [--decisions 1000000]`.
 * Writes a decision log of N lines made from real ones (bench/fixtures/decision-lines.jsonl: lines a
 * running riskgate wrote for the sandbox's demo accounts with the shipped policy; each copy gets its
 * own decisionId), then times `replayDecisions` over it with the shipped policy, as
 * `riskgate replay --policy policies/ <log>` runs it. Prints decisions/s, elapsed seconds and peak RSS.
 */
import { randomUUID } from 'node:crypto';
import { createWriteStream, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { loadPolicy } from '../src/policy/policy-loader.ts';
import { replayDecisions } from '../src/replay/replay-run.ts';

const { values } = parseArgs({ options: { decisions: { type: 'string', default: '1000000' } } });
const n = Number(values.decisions);
const root = resolve(import.meta.dirname, '..');
const templates = readFileSync(join(root, 'bench/fixtures/decision-lines.jsonl'), 'utf8').trim().split('\n');
const dir = mkdtempSync(join(tmpdir(), 'riskgate-replay-bench-'));
const log = join(dir, 'decisions.jsonl');

const writeStartedAt = performance.now();
const out = createWriteStream(log, { highWaterMark: 1 << 20 });
for (let i = 0; i < n; i++) {
  const line = templates[i % templates.length]!.replace(
    /"decisionId":"[^"]+"/,
    `"decisionId":"${randomUUID()}"`,
  );
  if (!out.write(`${line}\n`)) await new Promise<void>((r) => out.once('drain', () => r()));
}
await new Promise<void>((r) => out.end(r));
const bytes = statSync(log).size;
console.log(
  `wrote ${n} decisions, ${(bytes / 1e9).toFixed(2)} GB, in ${((performance.now() - writeStartedAt) / 1000).toFixed(1)} s`,
);

let peakRss = 0;
const sampler = setInterval(() => {
  peakRss = Math.max(peakRss, process.memoryUsage().rss);
}, 200);
const policy = await loadPolicy(join(root, 'policies'));
const startedAt = performance.now();
const report = await replayDecisions(policy, [log]);
const elapsedS = (performance.now() - startedAt) / 1000;
clearInterval(sampler);
console.log(
  `replayed ${report.decisions} decisions in ${elapsedS.toFixed(1)} s: ${Math.round(report.decisions / elapsedS)} decisions/s, ` +
    `${(bytes / 1e6 / elapsedS).toFixed(0)} MB/s, ${report.changed} changed, peak RSS ${(peakRss / 1e6).toFixed(0)} MB`,
);
rmSync(dir, { recursive: true, force: true });
