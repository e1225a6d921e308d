import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import type { Harness } from './decide-harness.ts';
import { startDecisionWebhooks } from './support/decision-webhooks.ts';
import { eventually } from './support/eventually.ts';
import { loadRecipe, startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver.ts';

/**
 * Decisions told to a webhook receiver (RISKGATE_WEBHOOK_EVENTS opts in to decision.denied and
 * decision.challenged): a running riskgate over the sandbox, a receiver on port 0, every delivery
 * verified with the recipe of docs/webhooks.md.
 */

const SECRET = 'an-end-to-end-webhook-secret-of-40-chars';

let h: Harness;
let receiver: WebhookReceiver;
beforeAll(async () => {
  receiver = await startWebhookReceiver();
  h = await startDecisionWebhooks(receiver, SECRET);
});
afterAll(async () => {
  await h?.stop();
  await receiver?.close();
});

describe('decision events as signed webhooks', () => {
  it('tells a deny and a challenge, each once, as signed, and never an allow', async () => {
    const verify = await loadRecipe();
    const denied = await h.decide(demoRequest('mallory', 'u-mallory'));
    const challenged = await h.decide(demoRequest('bob', undefined));
    const allowed = await h.decide(demoRequest('alice', undefined));
    expect([denied.body.verdict, challenged.body.verdict, allowed.body.verdict]).toEqual([
      'deny',
      'challenge',
      'allow',
    ]);
    await eventually(() => receiver.received.length >= 2, { what: 'two deliveries' });
    const seen = new Set<string>();
    const events = receiver.received.map((d) => verify(SECRET, d.headers, d.body, seen));
    expect(events).toEqual([
      {
        id: `${denied.body.decisionId}:decision.denied`,
        type: 'decision.denied',
        at: expect.any(String),
        data: {
          decisionId: denied.body.decisionId,
          verdict: 'deny',
          accountId: 'mallory',
          userId: 'u-mallory',
          rules: ['deny-mallory'],
          degraded: false,
          policyRevision: expect.any(String),
        },
      },
      expect.objectContaining({
        type: 'decision.challenged',
        data: expect.objectContaining({ decisionId: challenged.body.decisionId, rules: ['challenge-bob'] }),
      }),
    ]);
    // Each delivery is an action of the outbox, with its outcome line.
    await eventually(() => h.lines.filter((l) => l.kind === 'action' && l.status === 'done').length >= 2);
    const actions = h.lines.filter((l) => l.kind === 'action');
    expect(actions.map((l) => [l.type, l.decisionId])).toEqual([
      ['deliver_webhook', denied.body.decisionId],
      ['deliver_webhook', challenged.body.decisionId],
    ]);
    const metrics = await (await h.ops('/metrics')).text();
    expect(metrics).toMatch(/^riskgate_action_outcomes_total\{type="deliver_webhook",status="done"\} 2$/m);
    // The answer does not mention the events (a webhook is not promised to the caller).
    expect(denied.body.actions).toEqual([]);
  });
});
