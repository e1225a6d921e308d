import { describe, expect, it } from 'vitest';
import { compilePolicy } from '../policy/policy-compiler.ts';
import type { PolicyInput } from '../policy/policy-types.ts';
import { SnoozeSnapshot } from './snooze-snapshot.ts';

/** The evaluator and a snooze: the rule not matched for the entity it covers, and nothing else. */

const POLICY = `
apiVersion: riskgate/v1
kind: Policy
name: snoozes
thresholds: { challenge: 50, deny: 100 }
rules:
  - id: flagged
    description: flagged by the backend
    when: request.context.flagged == true
    verdict: deny
  - id: amount
    description: a large amount (fails without one)
    when: request.context.amount > 1000
    score: 60
    onError: match
`;

const NOW = Date.UTC(2026, 10, 28, 12);
const policy = compilePolicy('p.yaml', POLICY).policy!;
const snoozes = new SnoozeSnapshot([
  { id: 's1', ruleId: 'flagged', entity: 'accountId', value: 'alice', untilMs: NOW + 60_000 },
  { id: 's2', ruleId: 'amount', entity: 'accountId', value: 'alice', untilMs: NOW + 60_000 },
]);
const input = (accountId: string, s: PolicyInput['snoozes']): PolicyInput => ({
  signals: {},
  devices: [],
  request: { accountId, context: { flagged: true } },
  now: new Date(NOW),
  snoozes: s,
});

describe('a snoozed rule in the evaluator', () => {
  it('is not counted for the snoozed account, failing or matching, and is explained', () => {
    const d = policy.evaluate(input('alice', { lookup: snoozes, nowMs: NOW }));
    expect(d.verdict).toBe('allow');
    expect(d.matchedRules).toEqual([]);
    expect(d.degraded).toBeUndefined(); // the failing `amount` is snoozed: no onError, no degradation
    expect(d.snoozed?.map((s) => [s.id, s.snoozeId])).toEqual([
      ['flagged', 's1'],
      ['amount', 's2'],
    ]);
  });

  it('changes nothing for another account', () => {
    const d = policy.evaluate(input('bob', { lookup: snoozes, nowMs: NOW }));
    expect(d.verdict).toBe('deny');
    expect(d.matchedRules.map((r) => r.id)).toEqual(['flagged', 'amount']);
    expect(d.snoozed).toBeUndefined();
  });

  it('counts the rule again at its until', () => {
    expect(policy.evaluate(input('alice', { lookup: snoozes, nowMs: NOW + 60_000 })).verdict).toBe('deny');
  });

  it('counts every rule when the snoozes are unavailable, and says so', () => {
    const d = policy.evaluate(input('alice', { unavailable: 'RG_ERR_SNOOZES_UNAVAILABLE' }));
    expect(d.verdict).toBe('deny');
    expect(d.snoozesUnavailable).toBe('RG_ERR_SNOOZES_UNAVAILABLE');
    expect(d.snoozed).toBeUndefined();
  });
});
