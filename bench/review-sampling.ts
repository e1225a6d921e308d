import { parseArgs } from 'node:util';
import { openDatabase } from '../src/database/database.ts';
import type { DecisionForReview } from '../src/decide/decide-ports.ts';
import { ReviewIntake } from '../src/review-queue/review-intake.ts';
import { ReviewStore } from '../src/review-queue/review-store.ts';
import { CONTROL_MIGRATIONS } from '../src/service/database-migrations.ts';
import { median } from './bench-median.ts';

/**
 * What the review queue's intake costs a decision (src/review-queue/review-intake.ts). After its
 * answer each decision is handed to `intake.consider`: the policy's `review` marks are checked
 * against its matched rules and verdict, and an allowed login is drawn for the sample
 * (RISKGATE_REVIEW_SAMPLE_SHARE). Timed per decision, over allowed decisions with three matched
 * rules: no intake wired (the `deps.review?.consider` of a riskgate without one), share 0 and no
 * marks (the default), share 0.001 (one case in a thousand queued), and a policy marking one rule
 * none of the decisions matched. The four are timed in turn inside each run, so their ratios come
 * from the same moments of this noisy machine; each figure is the median of `--runs` runs. The
 * write of a queued case (one insert in the control database, off the request path) is timed
 * apart, per case, on an in-memory SQLite.
 *
 *   npx tsx bench/review-sampling.ts [--decisions 200000] [--runs 5] [--json]
 */

const args = parseArgs({
  options: {
    decisions: { type: 'string', default: '200000' },
    runs: { type: 'string', default: '5' },
    json: { type: 'boolean', default: false },
  },
}).values;
const decisions = Number(args.decisions);
const runs = Number(args.runs);

const database = await openDatabase({ kind: 'memory' }, { migrations: CONTROL_MIGRATIONS });
const store = new ReviewStore(database);
const log = () => {};
const intakes = {
  default: new ReviewIntake({ store, slaMs: 86_400_000, log }),
  sampled: new ReviewIntake({ store, slaMs: 86_400_000, sampleShare: 0.001, log, maxPending: decisions }),
  marked: new ReviewIntake({ store, slaMs: 86_400_000, log }),
};
const matchedRules = [{ id: 'new-browser' }, { id: 'impossible-travel' }, { id: 'device-app-outdated' }];
const marks = { rules: new Set(['rat-confirmed']), verdicts: new Set(['deny'] as const) };
const inputs: DecisionForReview[] = Array.from({ length: 1024 }, (_, i) => ({
  decisionId: crypto.randomUUID(),
  verdict: 'allow',
  userId: `user-${i}`,
  matchedRules,
  review: undefined,
}));
const markedInputs = inputs.map((d) => ({ ...d, review: marks }));

type Deps = { review?: { consider(d: DecisionForReview): void } | undefined };
function time(deps: Deps, list: readonly DecisionForReview[]): number {
  const t = performance.now();
  for (let i = 0; i < decisions; i++) deps.review?.consider(list[i & 1023]!);
  return ((performance.now() - t) * 1000) / decisions;
}

const figures: Record<string, number[]> = { none: [], default: [], sampled: [], marked: [], writeUs: [] };
for (let r = 0; r < runs; r++) {
  figures.none!.push(time({}, inputs));
  figures.default!.push(time({ review: intakes.default }, inputs));
  const queuedBefore = intakes.sampled.pending;
  figures.sampled!.push(time({ review: intakes.sampled }, inputs));
  const queued = intakes.sampled.pending - queuedBefore;
  figures.marked!.push(time({ review: intakes.marked }, markedInputs));
  const t = performance.now();
  await intakes.sampled.flush();
  if (queued > 0) figures.writeUs!.push(((performance.now() - t) * 1000) / queued);
}
const result = {
  decisions,
  runs,
  perDecisionUs: {
    noIntake: median(figures.none!),
    share0: median(figures.default!),
    share0001: median(figures.sampled!),
    policyMarksNoMatch: median(figures.marked!),
  },
  casesOpened: intakes.sampled.opened,
  writePerCaseUs: figures.writeUs!.length > 0 ? median(figures.writeUs!) : undefined,
};
await database.close();
if (args.json) console.log(JSON.stringify(result));
else console.log(result);
