import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, OPS_KEY, startHarness } from './decide-harness.ts';
import { eventually } from './support/eventually.ts';
import { LIST_POLICY } from './support/list-policy.ts';
import { loadRecipe, startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver.ts';

/**
 * Issue 30: list changes told to a receiver through a running riskgate. A value with a character
 * no header carries (U+202E) once made its `webhook-id` unsendable and held every later event of
 * its list for a day; now the id is derived (a hash of the value), and one event the receiver
 * keeps refusing is dead-lettered after its retry budget (RISKGATE_WEBHOOK_RETRY_HORIZON_SECONDS)
 * so the list's later events go out.
 */

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const PRINTABLE_ASCII = /^[\x20-\x7e]+$/;

let h: Harness;
let receiver: WebhookReceiver;
beforeAll(async () => {
  receiver = await startWebhookReceiver();
  h = await startHarness({
    policy: { yaml: LIST_POLICY },
    env: {
      RISKGATE_OPS_KEYS: `adam:admin:${OPS_KEY}`,
      RISKGATE_WEBHOOK_URLS: receiver.url(),
      RISKGATE_WEBHOOK_SECRET: SECRET,
      RISKGATE_WEBHOOK_EVENTS: 'list.entry_added,list.entry_removed',
      RISKGATE_WEBHOOK_RETRY_HORIZON_SECONDS: '1',
    },
  });
});
afterAll(async () => {
  await h?.stop();
  await receiver?.close();
});

const add = (value: string) =>
  fetch(`${h.url}/lists/trustedAccounts/entries`, {
    method: 'POST',
    headers: { authorization: `Bearer ${OPS_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ value, reason: 'vouched' }),
  });

/** The deliveries whose event is about `value`, verified with the recipe. */
async function deliveriesOf(value: string) {
  const verify = await loadRecipe();
  return receiver.received
    .map((d) => {
      const event = verify(SECRET, d.headers, d.body, new Set());
      // Every delivery verifies: a null is a signature the recipe refused.
      expect(event).not.toBeNull();
      return { delivery: d, event: event! };
    })
    .filter(({ event }) => (event.data as { value?: string }).value === value);
}

describe('list change events', () => {
  it('tells an entry whose value holds U+202E under an ASCII id, the value itself in its data', async () => {
    const value = 'acct-\u202egnp.exe';
    expect((await add(value)).status).toBe(201);
    const [got] = await eventually(
      async () => {
        const found = await deliveriesOf(value);
        return found.length > 0 ? found : undefined;
      },
      { what: 'the event delivered' },
    );
    const id = got!.delivery.headers['webhook-id'] as string;
    expect(id).toMatch(PRINTABLE_ASCII);
    expect(id).toMatch(/^list\.entry_added:trustedAccounts:[0-9a-f]{16}:\d+$/);
    expect(got!.event).toMatchObject({
      id,
      type: 'list.entry_added',
      data: { list: 'trustedAccounts', value },
    });
  });

  it('sends the list’s next event once one the receiver keeps refusing has spent its budget', async () => {
    receiver.answer = (res, delivery) => {
      res.statusCode = delivery.body.toString().includes('acct-refused') ? 503 : 204;
      res.end();
    };
    const addedAt = performance.now();
    expect((await add('acct-refused')).status).toBe(201);
    expect((await add('acct-after')).status).toBe(201);
    const after = await eventually(
      async () => {
        const found = await deliveriesOf('acct-after');
        return found.length > 0 ? found : undefined;
      },
      { timeoutMs: 20_000, what: 'the next event delivered' },
    );
    expect(after).toHaveLength(1);
    // It waited behind the refused one (in order), for about the budget (1 s), not a day.
    expect(performance.now() - addedAt).toBeGreaterThanOrEqual(900);
    const refusals = await deliveriesOf('acct-refused');
    expect(refusals.length).toBeGreaterThan(1);
    expect(receiver.received.indexOf(after[0]!.delivery)).toBeGreaterThan(
      receiver.received.indexOf(refusals.at(-1)!.delivery),
    );
    const dead = (await (await h.ops('/actions?status=dead')).json()) as {
      actions: { id: string; reason?: string }[];
    };
    expect(dead.actions).toContainEqual(
      expect.objectContaining({ reason: 'horizon_exhausted:RG_ERR_UPSTREAM_SERVER_ERROR' }),
    );
  });
});
