import type { ActionDispatcher } from '../actions/action-dispatcher.ts';
import type { ActionJob, ActionSpec } from '../actions/admin-actions.ts';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import type { EventSink, RiskgateEvent, RiskgateEventType } from '../events/riskgate-event.ts';

/**
 * The event sink behind signed webhooks: `emit` writes one outbox entry per receiver
 * (`<eventId>:webhook:<receiverKey>`, so emitting an event again is a no-op) and resolves once
 * the outbox holds them durably (`entries` gives those entries to a caller that writes them in its
 * own transaction); the outbox delivers them (src/webhooks/webhook-delivery.ts). The
 * body is serialized here, once: every attempt sends the same bytes.
 */

export interface WebhookSinkOptions {
  /** The outbox. */
  actions: Pick<ActionDispatcher, 'submit'>;
  /** The receivers' keys (`receiverKey(url)`). */
  receivers: readonly string[];
  /** The event types sent; others are dropped by `emit`. */
  events: readonly RiskgateEventType[];
  /** Longest wait for the outbox to hold an event, milliseconds. Default: the outbox's own. */
  submitTimeoutMs?: number;
}

export interface WebhookSink extends EventSink<ActionSpec> {
  /** Emits that did not get their event held by the outbox (the emit rejected). */
  readonly failures: number;
}

/** The sink over the outbox. */
export function webhookSink(o: WebhookSinkOptions): WebhookSink {
  const wanted = new Set<string>(o.events);
  let failures = 0;
  return {
    get failures() {
      return failures;
    },
    wants: (type) => wanted.has(type),
    // Written in the caller's transaction (a lock-out's, an unlock's): the same entries emit writes.
    entries: (event) => (wanted.has(event.type) ? webhookJobs(event, o.receivers).map((j) => j.spec) : []),
    async emit(event) {
      if (!wanted.has(event.type)) return;
      const jobs = webhookJobs(event, o.receivers);
      let results: string[];
      try {
        results = await o.actions.submit(jobs, { timeoutMs: o.submitTimeoutMs });
      } catch (error) {
        failures++;
        throw error;
      }
      // Deferred: held by this process, not yet durable; emitting again is safe (same ids).
      if (results.some((r) => r === 'refused' || r === 'deferred')) {
        failures++;
        throw new RiskgateError(
          ErrorCode.OUTBOX_UNAVAILABLE,
          `event ${event.id} (${event.type}) was not queued for its webhooks: the outbox did not hold it`,
        );
      }
    },
  };
}

/**
 * The outbox jobs of `event`, one per receiver. One receiver's events about one user (or one
 * list) keep their order (`orderingKey`); others go out side by side.
 */
export function webhookJobs(event: RiskgateEvent, receivers: readonly string[]): ActionJob[] {
  const body = JSON.stringify(event);
  const { data } = event;
  const decisionId =
    typeof data.decisionId === 'string' && data.decisionId !== '' ? data.decisionId : event.id;
  const subject =
    typeof data.userId === 'string' && data.userId !== ''
      ? `user:${data.userId}`
      : typeof data.list === 'string' && data.list !== ''
        ? `list:${data.list}`
        : `event:${event.id}`;
  return receivers.map((receiver) => {
    const id = `${event.id}:webhook:${receiver}`;
    const target = `${event.type}@${receiver}`;
    return {
      key: id,
      decisionId,
      type: 'deliver_webhook',
      target,
      spec: {
        id,
        decisionId,
        type: 'deliver_webhook',
        target,
        orderingKey: `webhook:${receiver}:${subject}`,
        call: { method: 'postWebhook', receiver, webhookId: event.id, body },
      },
    };
  });
}
