import { afterEach, describe, expect, it } from 'vitest';
import { eventually } from '../../test/support/eventually.ts';
import { openDatabaseOutbox } from '../../test/support/outbox-database.ts';
import {
  loadRecipe,
  startWebhookReceiver,
  type WebhookReceiver,
} from '../../test/support/webhook-receiver.ts';
import type { ActionOutcome } from '../actions/action-dispatcher.ts';
import type { ActionAdmin } from '../actions/admin-actions.ts';
import type { WebhookConfig } from '../config/riskgate-config.ts';
import { ErrorCode } from '../errors/riskgate-error.ts';
import type { RiskgateEvent } from '../events/riskgate-event.ts';
import { Outbox } from '../outbox/outbox.ts';
import { WebhookDelivery } from './webhook-delivery.ts';
import { receiverKey } from './webhook-signature.ts';
import { webhookSink } from './webhook-sink.ts';

/**
 * Webhook delivery through a real outbox (SQLite) to a receiver on port 0: what arrives is what
 * was signed, byte for byte; what is retried and what is dead-lettered; no redirect followed; the
 * attempt's timeout; no URL or secret in what the outbox keeps or tells.
 */

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const PASSWORD = 'hunter2-receiver-password';

const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

let seq = 0;
function lockoutEvent(userId = 'u-1'): RiskgateEvent {
  seq++;
  return {
    id: `evt-${seq}-${Date.now()}`,
    type: 'lockout.created',
    at: new Date().toISOString(),
    data: { decisionId: `dec-${seq}`, userId, rule: 'rat-confirmed', note: 'ünïcode ✓' },
  };
}

async function receiver(): Promise<WebhookReceiver> {
  const r = await startWebhookReceiver();
  cleanup.push(() => r.close());
  return r;
}

async function setUp(urls: string[], config: Partial<WebhookConfig> = {}) {
  const store = await openDatabaseOutbox();
  const delivery = new WebhookDelivery({
    urls,
    secrets: [SECRET],
    events: ['lockout.created', 'lockout.ended'],
    timeoutMs: 2000,
    ...config,
  });
  const outcomes: ActionOutcome[] = [];
  const outbox = new Outbox({
    store,
    admin: {} as ActionAdmin,
    webhooks: delivery,
    onOutcome: (o) => outcomes.push(o),
    baseDelayMs: 20,
    maxDelayMs: 100,
    pollMs: 50,
  });
  outbox.start();
  cleanup.push(async () => {
    await outbox.drain(0);
    await delivery.close();
    await store.close();
  });
  const sink = webhookSink({ actions: outbox, receivers: delivery.receivers, events: ['lockout.created'] });
  const outcomeOf = (event: RiskgateEvent) =>
    eventually(() => outcomes.find((o) => o.key.startsWith(`${event.id}:`)), { what: 'the outcome' });
  return { store, delivery, outbox, outcomes, sink, outcomeOf };
}

describe('webhook delivery through the outbox', () => {
  it('delivers an event exactly as signed: the same bytes, its id, a signature the recipe verifies', async () => {
    const r = await receiver();
    const { sink, outcomeOf } = await setUp([r.url()]);
    const verify = await loadRecipe();
    const event = lockoutEvent();
    await sink.emit(event);
    const outcome = await outcomeOf(event);
    expect(outcome).toMatchObject({
      status: 'done',
      type: 'deliver_webhook',
      decisionId: event.data.decisionId,
    });
    expect(r.received).toHaveLength(1);
    const [got] = r.received;
    expect(got!.body.equals(Buffer.from(JSON.stringify(event)))).toBe(true);
    expect(got!.headers['content-type']).toBe('application/json');
    expect(verify(SECRET, got!.headers, got!.body, new Set())).toEqual(event);
  });

  it('sends only the configured event types, and an event emitted twice once', async () => {
    const r = await receiver();
    const { sink, outcomeOf, outcomes } = await setUp([r.url()]);
    await sink.emit({ ...lockoutEvent(), type: 'decision.denied' });
    const event = lockoutEvent();
    await sink.emit(event);
    await sink.emit(event);
    await outcomeOf(event);
    expect(outcomes).toHaveLength(1);
    expect(r.received.map((d) => d.headers['webhook-id'])).toEqual([event.id]);
  });

  it('retries a 503, a 408 and a 429 with the same id and body, each attempt signed anew', async () => {
    const r = await receiver();
    const statuses = [503, 408, 429, 200];
    r.answer = (res) => {
      res.statusCode = statuses.shift() ?? 200;
      res.end();
    };
    const { sink, outcomeOf } = await setUp([r.url()]);
    const verify = await loadRecipe();
    const event = lockoutEvent();
    await sink.emit(event);
    expect(await outcomeOf(event)).toMatchObject({ status: 'done', attempts: 4 });
    expect(r.received).toHaveLength(4);
    for (const d of r.received) {
      expect(d.headers['webhook-id']).toBe(event.id);
      expect(d.body.equals(r.received[0]!.body)).toBe(true);
      expect(verify(SECRET, d.headers, d.body, new Set())).toEqual(event);
    }
  });

  it.each([
    [400, ErrorCode.UPSTREAM_BAD_REQUEST],
    [404, ErrorCode.UPSTREAM_NOT_FOUND],
    [422, ErrorCode.UPSTREAM_UNEXPECTED_STATUS],
  ])('dead-letters a %i at once, with its code', async (status, code) => {
    const r = await receiver();
    r.answer = (res) => {
      res.statusCode = status;
      res.end('{"error":"no"}');
    };
    const { sink, outcomeOf, store } = await setUp([r.url()]);
    const event = lockoutEvent();
    await sink.emit(event);
    expect(await outcomeOf(event)).toMatchObject({ status: 'failed', attempts: 1, reason: code });
    expect(r.received).toHaveLength(1);
    expect((await store.list({ status: 'dead' })).map((e) => e.spec.id)).toEqual([
      `${event.id}:webhook:${receiverKey(r.url())}`,
    ]);
  });

  it('never follows a redirect: a 3xx is dead, its target never called', async () => {
    const elsewhere = await receiver();
    const r = await receiver();
    r.answer = (res) => {
      res.writeHead(307, { location: elsewhere.url() });
      res.end();
    };
    const { sink, outcomeOf } = await setUp([r.url()]);
    const event = lockoutEvent();
    await sink.emit(event);
    expect(await outcomeOf(event)).toMatchObject({
      status: 'failed',
      attempts: 1,
      reason: ErrorCode.UPSTREAM_UNEXPECTED_STATUS,
    });
    expect(elsewhere.received).toHaveLength(0);
  });

  it('times an attempt out, then retries it', async () => {
    const r = await receiver();
    let hang = true;
    r.answer = (res) => {
      if (hang) {
        hang = false;
        return; // never answers: the attempt's timeout ends it
      }
      res.statusCode = 200;
      res.end();
    };
    const { sink, outcomeOf, delivery } = await setUp([r.url()], { timeoutMs: 300 });
    const event = lockoutEvent();
    await sink.emit(event);
    expect(await outcomeOf(event)).toMatchObject({ status: 'done', attempts: 2 });
    // The failure it retried: a timeout of its own.
    hang = true;
    const started = performance.now();
    const result = await delivery.post(
      { method: 'postWebhook', receiver: delivery.receivers[0]!, webhookId: 'x', body: '{}' },
      {},
    );
    expect(result.ok ? 'ok' : result.error.code).toBe(ErrorCode.UPSTREAM_TIMEOUT);
    expect(performance.now() - started).toBeGreaterThanOrEqual(290);
  });

  it('keeps trying a receiver that is down, and delivers once it is back', async () => {
    const r = await receiver();
    await r.close();
    const { sink, outcomeOf, outbox } = await setUp([r.url()]);
    const event = lockoutEvent();
    await sink.emit(event);
    await eventually(() => outbox.attemptsStarted >= 3, { what: 'attempts on a closed port' });
    await r.open();
    expect(await outcomeOf(event)).toMatchObject({ status: 'done' });
    expect(r.received.map((d) => d.headers['webhook-id'])).toEqual([event.id]);
  });

  it('sends a URL’s credentials as basic auth, and keeps them and the secret out of the outbox and its outcomes', async () => {
    const r = await receiver();
    const url = r.url().replace('http://', `http://riskgate:${PASSWORD}@`);
    const { sink, outcomeOf, store, outcomes } = await setUp([url]);
    const event = lockoutEvent();
    await sink.emit(event);
    await outcomeOf(event);
    expect(r.received[0]!.headers.authorization).toBe(
      `Basic ${Buffer.from(`riskgate:${PASSWORD}`).toString('base64')}`,
    );
    const kept = JSON.stringify([await store.list({}), outcomes]);
    for (const secret of [PASSWORD, SECRET, SECRET.slice(6), `127.0.0.1:${r.port}`])
      expect(kept).not.toContain(secret);
  });

  it('dead-letters at once an event whose id no header can carry, never as unreachable, and its stream goes on', async () => {
    const r = await receiver();
    const { sink, outcomeOf, store, outbox } = await setUp([r.url()]);
    // One user's events share a stream: the later one waits for the earlier one's end.
    const unsendable = { ...lockoutEvent('u-stream'), id: `evt-\u202e-${Date.now()}` };
    const next = lockoutEvent('u-stream');
    await sink.emit(unsendable);
    await sink.emit(next);
    expect(await outcomeOf(unsendable)).toMatchObject({
      status: 'failed',
      attempts: 1,
      reason: ErrorCode.UNSENDABLE_REQUEST,
    });
    expect(await outcomeOf(next)).toMatchObject({ status: 'done', attempts: 1 });
    expect(r.received.map((d) => d.headers['webhook-id'])).toEqual([next.id]);
    expect((await store.list({ status: 'dead' })).map((e) => e.lastError ?? e.reason)).toEqual([
      ErrorCode.UNSENDABLE_REQUEST,
    ]);
    expect(outbox.attemptsStarted).toBe(2);
  });

  it('gives one event the receiver keeps refusing its retry budget, then dead-letters it and sends the next of its stream', async () => {
    const r = await receiver();
    const refused = lockoutEvent('u-budget');
    r.answer = (res, delivery) => {
      res.statusCode = delivery.headers['webhook-id'] === refused.id ? 503 : 200;
      res.end();
    };
    const { sink, outcomeOf } = await setUp([r.url()], { retryHorizonMs: 400 });
    const next = lockoutEvent('u-budget');
    const emittedAt = performance.now();
    await sink.emit(refused);
    await sink.emit(next);
    const dead = await outcomeOf(refused);
    expect(dead).toMatchObject({
      status: 'failed',
      reason: `horizon_exhausted:${ErrorCode.UPSTREAM_SERVER_ERROR}`,
    });
    expect(dead.attempts).toBeGreaterThan(1);
    expect(await outcomeOf(next)).toMatchObject({ status: 'done', attempts: 1 });
    // Held behind it for its budget (400 ms), not the outbox's 24 h horizon.
    expect(performance.now() - emittedAt).toBeGreaterThanOrEqual(300);
    const delivered = r.received.filter((d) => d.headers['webhook-id'] === next.id);
    expect(delivered).toHaveLength(1);
    const lastRefusal = r.received.map((d) => d.headers['webhook-id']).lastIndexOf(refused.id);
    expect(r.received.indexOf(delivered[0]!)).toBeGreaterThan(lastRefusal);
  });

  it('dead-letters a delivery whose receiver is no longer configured', async () => {
    const r = await receiver();
    const { outbox, outcomes } = await setUp([r.url()]);
    const stale = webhookSink({
      actions: outbox,
      receivers: ['0123456789abcdef'],
      events: ['lockout.created'],
    });
    const event = lockoutEvent();
    await stale.emit(event);
    await eventually(() => outcomes.length === 1);
    expect(outcomes[0]).toMatchObject({ status: 'failed', reason: ErrorCode.INVALID_CONFIG });
    expect(r.received).toHaveLength(0);
  });
});
