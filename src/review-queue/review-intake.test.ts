import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../database/database.ts';
import type { DecisionForReview } from '../decide/decide-ports.ts';
import { CONTROL_MIGRATIONS } from '../service/database-migrations.ts';
import { ReviewIntake, reviewReasonOf } from './review-intake.ts';
import { ReviewStore } from './review-store.ts';

/**
 * The review queue's intake: which decisions open a case (a marked rule that counted, a marked
 * verdict, the sample of allowed logins), and that a case it cannot keep is dropped and counted
 * with a log line, never thrown at the decision.
 */

const marks = { rules: new Set(['new-browser']), verdicts: new Set(['deny'] as const) };

function decision(o: Partial<DecisionForReview> = {}): DecisionForReview {
  return {
    decisionId: randomUUID(),
    verdict: 'allow',
    userId: 'u1',
    matchedRules: [{ id: 'impossible-travel' }],
    review: undefined,
    ...o,
  };
}

const never = () => {
  throw new Error('no draw expected');
};

describe('which decisions open a review case', () => {
  it('opens one for a marked rule that counted, or a marked verdict, naming why', () => {
    const rule = decision({
      verdict: 'challenge',
      matchedRules: [{ id: 'a' }, { id: 'new-browser' }],
      review: marks,
    });
    expect(reviewReasonOf(rule, 0, never)).toEqual({
      reason: 'policy',
      detail: 'rules new-browser ask for review',
    });
    expect(reviewReasonOf(decision({ verdict: 'deny', review: marks }), 0, never)).toEqual({
      reason: 'policy',
      detail: 'verdict deny asks for review',
    });
    expect(reviewReasonOf(decision({ verdict: 'challenge', review: marks }), 0, never)).toBeUndefined();
  });

  it('samples allowed logins only, and draws nothing at share 0', () => {
    expect(reviewReasonOf(decision(), 0, never)).toBeUndefined();
    expect(reviewReasonOf(decision(), 0.01, () => 0.005)?.reason).toBe('sample');
    expect(reviewReasonOf(decision(), 0.01, () => 0.5)).toBeUndefined();
    expect(reviewReasonOf(decision({ verdict: 'challenge' }), 1, never)).toBeUndefined();
  });
});

describe('the intake', () => {
  it('writes the cases it is handed, and drops and counts what does not fit', async () => {
    const database = await openDatabase({ kind: 'memory' }, { migrations: CONTROL_MIGRATIONS });
    const store = new ReviewStore(database);
    const intake = new ReviewIntake({ store, slaMs: 1000, sampleShare: 1, maxPending: 1, log: () => {} });
    // The first is being written, the second waits, the third finds the queue full.
    for (let i = 0; i < 3; i++) intake.consider(decision());
    expect(intake.dropped).toBe(1);
    await intake.flush();
    expect(intake.opened).toBe(2);
    expect((await store.stats(Date.now())).open).toBe(2);
    await database.close();
  });

  it('drops and counts a case the database refuses, with a log line naming the decision', async () => {
    const database = await openDatabase({ kind: 'memory' }, { migrations: CONTROL_MIGRATIONS });
    await database.close();
    const lines: Record<string, unknown>[] = [];
    const intake = new ReviewIntake({
      store: new ReviewStore(database),
      slaMs: 1000,
      sampleShare: 1,
      log: (l) => lines.push(l),
    });
    const d = decision();
    expect(() => intake.consider(d)).not.toThrow();
    await intake.flush();
    expect({ opened: intake.opened, dropped: intake.dropped }).toEqual({ opened: 0, dropped: 1 });
    expect(lines).toEqual([
      expect.objectContaining({ level: 'error', decisionId: d.decisionId, reason: 'sample' }),
    ]);
    // Stopped, it takes no more: counted as dropped.
    await intake.stop(0);
    intake.consider(decision());
    expect(intake.dropped).toBe(2);
  });
});
