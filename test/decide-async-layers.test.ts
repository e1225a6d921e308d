import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type PromiseCounts, startPromiseCount } from '../bench/promise-counter.ts';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { type Harness, startHarness } from './decide-harness.ts';
import { PATIENT_DEADLINE_MS, patientShippedPolicy } from './support/patient-policy.ts';

/**
 * The async layers of a decision (issue 32): every async function riskgate's edge and decision
 * path enters is a promise, an await and a resume more per decision, and at 200/s that machinery
 * was ~3.5 % of the main thread. Counted, never timed (bench/promise-counter.ts): the async
 * functions entered and the awaits run, per allowed decision over real HTTP, by the file that made
 * them, for riskgate's files on the way of a decision and for hono's dispatch of one of its
 * middlewares. The sandbox runs in the same process and is left out.
 */

/** Where a decision goes on the main thread, answer and after it (src/sandbox and src/dev are not riskgate's). */
const DECISION_PATH =
  /^src\/(http|edge|admission|decide|features|upstream|signals|admin|auth|policy|policy-input|decision-log|subject|timing)\//;
const DECISIONS = 20;

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ policy: { yaml: patientShippedPolicy() }, deadlineMs: PATIENT_DEADLINE_MS });
});
afterAll(() => h?.stop());

/** Per decision: the async functions entered and the awaits run, by riskgate file (hono's dispatch under its caller). */
function asyncLayers(counts: PromiseCounts): Record<string, number> {
  const layers: Record<string, number> = {};
  for (const kind of ['promise: async function', 'promise: await']) {
    for (const [where, n] of counts.byFile.get(kind) ?? []) {
      const [first = '', caller = ''] = where.split(' < ');
      const key = DECISION_PATH.test(first)
        ? first
        : first === 'node_modules/hono' && DECISION_PATH.test(caller)
          ? `hono < ${caller}`
          : undefined;
      if (key === undefined) continue;
      const name = `${kind.slice('promise: '.length)}: ${key}`;
      layers[name] = (layers[name] ?? 0) + n / DECISIONS;
    }
  }
  return layers;
}

const sum = (xs: Record<string, number>) => Object.values(xs).reduce((a, b) => a + b, 0);

describe('the async layers of a decision', () => {
  it('an allowed login enters at most 8 async functions and runs at most 9 awaits of riskgate per decision', async () => {
    const login = demoRequest('alice', undefined);
    // Warm: the first decisions load modules, fill caches and open connections.
    for (let i = 0; i < 10; i++) expect((await h.decide(login)).status).toBe(200);
    const counting = startPromiseCount();
    const verdicts: unknown[] = [];
    for (let i = 0; i < DECISIONS; i++) verdicts.push((await h.decide(login)).body.verdict);
    const layers = asyncLayers(counting.stop());
    expect(new Set(verdicts)).toEqual(new Set(['allow']));
    const entered = Object.fromEntries(
      Object.entries(layers).filter(([k]) => k.startsWith('async function')),
    );
    const awaited = Object.fromEntries(Object.entries(layers).filter(([k]) => k.startsWith('await')));
    // On main before session 11 (issue 32): 18 and 18 per decision.
    expect(sum(entered), JSON.stringify(layers, null, 1)).toBeLessThanOrEqual(8);
    expect(sum(awaited), JSON.stringify(layers, null, 1)).toBeLessThanOrEqual(9);
  });
});
