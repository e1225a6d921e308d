import { parseArgs } from 'node:util';
import { compilePolicy } from '../src/policy/policy-compiler.ts';
import type { PolicyInput } from '../src/policy/policy-types.ts';
import { type SnoozeRow, SnoozeSnapshot } from '../src/snoozes/snooze-snapshot.ts';
import { SNOOZE_POLICY } from '../test/support/snooze-policy.ts';
import { median } from './bench-median.ts';

/**
 * What rule snoozes cost a decision. A decision reads them from this process's in-memory snapshot
 * (src/snoozes/snooze-snapshot.ts) and only for a rule that matched, so the cost is one map read
 * per matched rule, then the entity checks of that rule's snoozes. Timed as one evaluation of a
 * policy whose two rules both match (the worst case: a lookup each), with no snoozes wired, with an
 * empty snapshot, with `--snoozes` active snoozes none of which covers the login (half on accounts,
 * a quarter on users, a quarter on CIDRs, on both rules), and with the same plus one that covers
 * it (the rule snoozed). The four are timed in turn inside each run, so their ratios come from the
 * same moments of this noisy machine; each figure is the median of `--runs` runs.
 *
 *   npx tsx bench/snooze-lookup.ts [--snoozes 1000] [--evaluations 200000] [--runs 5] [--json]
 */

function rowsOf(n: number, untilMs: number): SnoozeRow[] {
  const rules = ['backend-flagged', 'new-region'];
  return Array.from({ length: n }, (_, i): SnoozeRow => {
    const ruleId = rules[i % 2]!;
    const kind = i % 4;
    if (kind === 3)
      return { id: `s${i}`, ruleId, entity: 'ip', value: `10.${(i >> 8) & 255}.${i & 255}.0/24`, untilMs };
    if (kind === 2) return { id: `s${i}`, ruleId, entity: 'userId', value: `user-${i}`, untilMs };
    return { id: `s${i}`, ruleId, entity: 'accountId', value: `snoozed-${i}`, untilMs };
  });
}

const args = parseArgs({
  options: {
    snoozes: { type: 'string', default: '1000' },
    evaluations: { type: 'string', default: '200000' },
    runs: { type: 'string', default: '5' },
    json: { type: 'boolean', default: false },
  },
}).values;
const n = Number(args.snoozes);
const evaluations = Number(args.evaluations);
const runs = Number(args.runs);

const policy = compilePolicy('p.yaml', SNOOZE_POLICY).policy!;
const nowMs = Date.now();
const untilMs = nowMs + 3_600_000;
const buildT = performance.now();
const many = new SnoozeSnapshot(rowsOf(n, untilMs));
const buildMs = performance.now() - buildT;
const covering = new SnoozeSnapshot([
  ...rowsOf(n, untilMs),
  { id: 'hit', ruleId: 'backend-flagged', entity: 'accountId', value: 'acct-0', untilMs },
]);
const empty = new SnoozeSnapshot([]);

const inputs = (snoozes: PolicyInput['snoozes']): PolicyInput[] =>
  Array.from({ length: 1024 }, (_, i) => ({
    signals: {},
    devices: [],
    request: {
      accountId: `acct-${i % 7 === 0 ? 0 : i}`,
      userId: `u-${i}`,
      ip: `192.0.2.${i & 255}`,
      context: { flagged: true, newRegion: true },
    },
    now: new Date(nowMs),
    ...(snoozes !== undefined && { snoozes }),
  }));
const cases = {
  'no snoozes wired': inputs(undefined),
  'empty snapshot': inputs({ lookup: empty, nowMs }),
  [`${n} snoozes, none covering`]: inputs({ lookup: many, nowMs }),
  [`${n} snoozes, 1 in 7 logins snoozed`]: inputs({ lookup: covering, nowMs }),
};
// The last case snoozes acct-0's backend-flagged: check it does (a bench of a broken path is no figure).
const checked = policy.evaluate(cases[`${n} snoozes, 1 in 7 logins snoozed`]![0]!);
if (checked.snoozed?.[0]?.snoozeId !== 'hit') throw new Error('the covering snooze did not apply');
if (policy.evaluate(cases[`${n} snoozes, none covering`]![0]!).snoozed !== undefined)
  throw new Error('a snooze applied that covers nothing');

const time = (xs: PolicyInput[]) => {
  for (let i = 0; i < 20_000; i++) policy.evaluate(xs[i & 1023]!);
  const t = process.hrtime.bigint();
  for (let i = 0; i < evaluations; i++) policy.evaluate(xs[i & 1023]!);
  return Number(process.hrtime.bigint() - t) / evaluations;
};
const perRun: Record<string, number[]> = Object.fromEntries(Object.keys(cases).map((k) => [k, []]));
const ratios: Record<string, number[]> = Object.fromEntries(Object.keys(cases).map((k) => [k, []]));
for (let r = 0; r < runs; r++) {
  const base = time(cases['no snoozes wired']);
  for (const [name, xs] of Object.entries(cases)) {
    const ns = name === 'no snoozes wired' ? base : time(xs);
    perRun[name]!.push(ns);
    ratios[name]!.push(ns / base);
  }
}
const result = {
  snoozes: n,
  buildSnapshotMs: Math.round(buildMs * 100) / 100,
  evaluationNs: Object.fromEntries(Object.entries(perRun).map(([k, v]) => [k, Math.round(median(v))])),
  ratioToNone: Object.fromEntries(
    Object.entries(ratios).map(([k, v]) => [k, Math.round(median(v) * 100) / 100]),
  ),
};
if (args.json) console.log(JSON.stringify(result));
else {
  console.log(`snapshot of ${n} snoozes built in ${result.buildSnapshotMs} ms`);
  for (const name of Object.keys(cases))
    console.log(
      `${name.padEnd(36)} ${String(result.evaluationNs[name]).padStart(6)} ns  ×${result.ratioToNone[name]}`,
    );
}
