import { describe, expect, it } from 'vitest';
import { collectingEventSink, type EventSink, type RiskgateEvent } from '../events/riskgate-event.ts';
import type { DecideResponse } from './decide-response.ts';
import { emitDecisionEvent } from './decision-events.ts';
import type { DecisionRun } from './run-decision.ts';

/** A deny or a challenge told after the answer: an allow never, and a failed emit never an error. */

const run = {
  request: { accountId: 'mallory', userId: 'u-9' },
  receivedAt: new Date('2026-11-25T10:00:00.000Z'),
} as unknown as DecisionRun;
const answer = (verdict: 'allow' | 'challenge' | 'deny') =>
  ({
    decisionId: 'd-1',
    verdict,
    reasons: [{ id: 'r1', description: 'x' }],
    degraded: false,
    policy: { name: 'p', revision: 'rev' },
  }) as unknown as DecideResponse;

describe('decision events', () => {
  it('emits a deny and a challenge with ids and rules, and nothing for an allow', () => {
    const emitted: RiskgateEvent[] = [];
    const sink = collectingEventSink(emitted);
    for (const verdict of ['deny', 'challenge', 'allow'] as const)
      emitDecisionEvent(sink, run, answer(verdict));
    expect(emitted).toEqual([
      {
        id: 'd-1:decision.denied',
        type: 'decision.denied',
        at: '2026-11-25T10:00:00.000Z',
        data: {
          decisionId: 'd-1',
          verdict: 'deny',
          accountId: 'mallory',
          userId: 'u-9',
          rules: ['r1'],
          degraded: false,
          policyRevision: 'rev',
        },
      },
      expect.objectContaining({ id: 'd-1:decision.challenged', type: 'decision.challenged' }),
    ]);
  });

  it('swallows an emit the outbox refused (the sink counts it; an unhandled rejection would fail this test)', async () => {
    let calls = 0;
    const sink: EventSink = {
      emit: async () => {
        calls++;
        throw new Error('outbox down');
      },
      wants: () => true,
    };
    expect(() => emitDecisionEvent(sink, run, answer('deny'))).not.toThrow();
    await new Promise((r) => setImmediate(r));
    expect(calls).toBe(1);
  });

  it('builds none for a type no receiver asked for', () => {
    const asked: string[] = [];
    let emitted = 0;
    const sink: EventSink = {
      emit: async () => void emitted++,
      wants: (type) => {
        asked.push(type);
        return false;
      },
    };
    emitDecisionEvent(sink, run, answer('deny'));
    emitDecisionEvent(sink, run, answer('allow'));
    expect(asked).toEqual(['decision.denied']);
    expect(emitted).toBe(0);
  });
});
