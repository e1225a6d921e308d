import type { ActionDispatcher } from '../actions/action-dispatcher.ts';
import type { ActionSpec } from '../actions/admin-actions.ts';
import type { RiskgateConfig } from '../config/riskgate-config.ts';
import { type EventSink, NO_EVENTS } from '../events/riskgate-event.ts';
import type { Component, MetricsRegistry } from '../lifecycle/component.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import { WebhookDelivery } from './webhook-delivery.ts';
import { webhookSink } from './webhook-sink.ts';

/**
 * Signed webhooks as two components around the outbox: the delivery (its receivers' connections)
 * starts before the outbox, which carries out the deliveries with it, and stops after it has
 * drained; the sink starts after the outbox, into which it writes the events. Neither does
 * anything without RISKGATE_WEBHOOK_URLS: the delivery is undefined, the sink `NO_EVENTS`.
 */

/** The receivers' connections, for the outbox's `postWebhook` attempts. */
export function webhookDeliveryComponent(
  config: Pick<RiskgateConfig, 'webhooks'>,
  clock: Clock = systemClock,
): Component<WebhookDelivery | undefined> {
  return {
    name: 'webhook delivery',
    start() {
      if (config.webhooks === undefined) return { handle: undefined };
      const delivery = new WebhookDelivery(config.webhooks, { clock });
      return {
        handle: delivery,
        stop: () => delivery.close(),
      };
    },
  };
}

/**
 * The event sink (src/events/riskgate-event.ts) the features emit into: `NO_EVENTS` without
 * receivers. Counts the events the outbox did not hold (`riskgate_webhook_emit_failures_total`);
 * deliveries are counted as actions (`riskgate_action_outcomes_total{type="deliver_webhook"}`).
 */
export function webhooksComponent(o: {
  config: Pick<RiskgateConfig, 'webhooks'>;
  delivery: WebhookDelivery | undefined;
  actions: Pick<ActionDispatcher, 'submit'>;
}): Component<EventSink<ActionSpec>, MetricsRegistry> {
  return {
    name: 'webhooks',
    start() {
      const { webhooks } = o.config;
      if (webhooks === undefined || o.delivery === undefined) return { handle: NO_EVENTS };
      const sink = webhookSink({
        actions: o.actions,
        receivers: o.delivery.receivers,
        events: webhooks.events,
      });
      return {
        handle: sink,
        observe: (metrics) =>
          metrics.observeCounter(
            'riskgate_webhook_emit_failures',
            'Events the outbox did not hold for their webhooks (the emit failed; a decision event is then not sent)',
            () => sink.failures,
          ),
      };
    },
  };
}
