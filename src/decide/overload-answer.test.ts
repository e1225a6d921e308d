import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import type { DecisionLog } from '../decision-log/decision-log.ts';
import { createMetrics } from '../observability/metrics.ts';
import { compilePolicy } from '../policy/policy-compiler.ts';
import type { DecideDeps } from './decide-deps.ts';
import { overloadAnswer } from './overload-answer.ts';

const KEY = 'overload-caller-key-0123456789';
const POLICY = `apiVersion: riskgate/v1
kind: Policy
name: o
thresholds: { challenge: 40, deny: 80 }
overload: { verdict: challenge }
rules:
  - { id: r, description: r, when: 'request.accountId == "x"', score: 50 }
`;

/** The overload answer as admission calls it for a shed decision: its Response, or 503 without one. */
function appWith(auditRequired: (() => boolean) | undefined) {
  const compiled = compilePolicy('o.yaml', POLICY);
  if (!compiled.policy) throw new Error(compiled.issues.map((i) => i.message).join('\n'));
  const policy = compiled.policy;
  const lines: unknown[] = [];
  const decisionLog: DecisionLog = {
    write: (line) => {
      lines.push(line);
    },
    flush: async () => {},
    close: async () => {},
    dropped: 0,
  };
  const deps = {
    decide: { policies: { current: () => policy, status: () => ({}) } },
    apiKeys: [KEY],
    metrics: createMetrics({ runtime: false }),
    decisionLog,
    auditRequired,
  } as unknown as DecideDeps;
  const answer = overloadAnswer(deps);
  const app = new Hono();
  app.post('/decide', (c) => answer(c, 'in_flight') ?? c.text('refused', 503));
  const shed = () => app.request('/decide', { method: 'POST', headers: { authorization: `Bearer ${KEY}` } });
  return { shed, lines };
}

describe('the overload verdict', () => {
  it('answers a shed decision with the policy’s verdict and logs it', async () => {
    const t = appWith(undefined);
    const res = await t.shed();
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ verdict: 'challenge', degraded: true, reason: 'overloaded' });
    expect(t.lines).toHaveLength(1);
  });

  it('is not answered while the decision log cannot record it under RISKGATE_DECISION_LOG_ON_FAILURE=refuse: the shed is a 503', async () => {
    let writing = false;
    const t = appWith(() => writing);
    expect((await t.shed()).status).toBe(503);
    expect(t.lines).toEqual([]);
    writing = true;
    expect((await t.shed()).status).toBe(200);
  });
});
