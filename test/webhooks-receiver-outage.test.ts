import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import type { Harness } from './decide-harness.ts';
import { startDecisionWebhooks } from './support/decision-webhooks.ts';
import { eventually } from './support/eventually.ts';
import { loadRecipe, startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver.ts';

/**
 * A webhook receiver down for a whole minute (issue 26): the events emitted meanwhile wait in the
 * (SQLite) outbox, retried with the harness's short backoff, none given up; once the receiver is
 * back each arrives, at least once, with its own webhook-id, the bytes that were signed and a
 * signature made at that attempt (a timestamp within any receiver's tolerance).
 */

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const OUTAGE_MS = 60_000;

let h: Harness;
let receiver: WebhookReceiver;
beforeAll(async () => {
  receiver = await startWebhookReceiver();
  await receiver.close();
  h = await startDecisionWebhooks(receiver, SECRET);
});
afterAll(async () => {
  await h?.stop();
  await receiver?.close();
});

interface ActionsPage {
  pending: number;
  actions: { id: string; type: string; status: string; lastError?: string }[];
}
const pendingActions = async () => (await (await h.ops('/actions?status=pending')).json()) as ActionsPage;

describe('a webhook receiver down for a minute', () => {
  it('gets every event emitted meanwhile once it is back, each as signed', async () => {
    const downSince = performance.now();
    const answers = [
      await h.decide(demoRequest('mallory', 'u-mallory')),
      await h.decide(demoRequest('mallory', 'u-mallory')),
      await h.decide(demoRequest('bob', 'u-bob')),
      await h.decide(demoRequest('mallory', undefined)),
    ];
    expect(answers.map((a) => a.body.verdict)).toEqual(['deny', 'deny', 'challenge', 'deny']);
    const ids = answers.map(
      (a) => `${a.body.decisionId}:decision.${a.body.verdict === 'deny' ? 'denied' : 'challenged'}`,
    );

    // Down: all four held, tried and failing, none given up.
    await eventually(async () => {
      const page = await pendingActions();
      return (
        page.actions.length === 4 && page.actions.some((a) => a.lastError === 'RG_ERR_UPSTREAM_UNREACHABLE')
      );
    });
    await new Promise((r) => setTimeout(r, Math.max(0, OUTAGE_MS - (performance.now() - downSince))));
    expect((await pendingActions()).actions.map((a) => a.type)).toEqual(Array(4).fill('deliver_webhook'));
    expect(h.lines.filter((l) => l.kind === 'action')).toEqual([]);
    expect(receiver.received).toEqual([]);

    const backAtSec = Math.floor(Date.now() / 1000);
    await receiver.open();
    await eventually(() => new Set(receiver.received.map((d) => d.headers['webhook-id'])).size === 4, {
      timeoutMs: 20_000,
      what: 'every event delivered',
    });
    const verify = await loadRecipe();
    for (const d of receiver.received) {
      // Signed at the attempt, not when the event was queued a minute ago.
      expect(Number(d.headers['webhook-timestamp'])).toBeGreaterThanOrEqual(backAtSec);
      const event = verify(SECRET, d.headers, d.body, new Set());
      expect(d.body.toString('utf8')).toBe(JSON.stringify(event));
    }
    expect([...new Set(receiver.received.map((d) => d.headers['webhook-id']))].sort()).toEqual(
      [...ids].sort(),
    );

    await eventually(() => h.lines.filter((l) => l.kind === 'action').length === 4);
    const outcomes = h.lines.filter((l) => l.kind === 'action');
    expect(outcomes.every((l) => l.status === 'done' && l.type === 'deliver_webhook')).toBe(true);
    expect((await pendingActions()).pending).toBe(0);
  }, 150_000);
});
