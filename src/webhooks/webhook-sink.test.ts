import { describe, expect, it } from 'vitest';
import type { EnqueueResult } from '../actions/action-dispatcher.ts';
import type { ActionJob } from '../actions/admin-actions.ts';
import { ErrorCode } from '../errors/riskgate-error.ts';
import type { RiskgateEvent } from '../events/riskgate-event.ts';
import { webhookJobs, webhookSink } from './webhook-sink.ts';

/** The sink's promise: resolved once the outbox holds the event, rejected (and counted) otherwise. */

const event = (data: Record<string, unknown> = {}): RiskgateEvent => ({
  id: 'evt-1',
  type: 'lockout.created',
  at: '2026-11-25T10:00:00.000Z',
  data,
});

function outboxAnswering(result: EnqueueResult) {
  const submitted: ActionJob[][] = [];
  return {
    submitted,
    submit: async (jobs: readonly ActionJob[]) => {
      submitted.push([...jobs]);
      return jobs.map(() => result);
    },
  };
}

describe('the webhook sink', () => {
  it('resolves once the outbox holds one entry per receiver', async () => {
    const outbox = outboxAnswering('queued');
    const sink = webhookSink({ actions: outbox, receivers: ['r1', 'r2'], events: ['lockout.created'] });
    await sink.emit(event({ userId: 'u-1', decisionId: 'd-1' }));
    expect(outbox.submitted[0]!.map((j) => j.spec)).toEqual(
      ['r1', 'r2'].map((r) => ({
        id: `evt-1:webhook:${r}`,
        decisionId: 'd-1',
        type: 'deliver_webhook',
        target: `lockout.created@${r}`,
        orderingKey: `webhook:${r}:user:u-1`,
        call: {
          method: 'postWebhook',
          receiver: r,
          webhookId: 'evt-1',
          body: JSON.stringify(event({ userId: 'u-1', decisionId: 'd-1' })),
        },
      })),
    );
    expect(sink.failures).toBe(0);
  });

  it.each(['refused', 'deferred'] as const)(
    'rejects and counts an event the outbox answered %s',
    async (answer) => {
      const sink = webhookSink({
        actions: outboxAnswering(answer),
        receivers: ['r1'],
        events: ['lockout.created'],
      });
      await expect(sink.emit(event())).rejects.toMatchObject({ code: ErrorCode.OUTBOX_UNAVAILABLE });
      expect(sink.failures).toBe(1);
    },
  );

  it('writes nothing for an event type not configured', async () => {
    const outbox = outboxAnswering('queued');
    const sink = webhookSink({ actions: outbox, receivers: ['r1'], events: ['lockout.ended'] });
    await sink.emit(event());
    expect(outbox.submitted).toEqual([]);
  });

  it('orders a list’s events together, and an event about nobody apart', () => {
    expect(webhookJobs(event({ list: 'blockedNetworks' }), ['r'])[0]!.spec.orderingKey).toBe(
      'webhook:r:list:blockedNetworks',
    );
    expect(webhookJobs(event(), ['r'])[0]!.spec).toMatchObject({
      orderingKey: 'webhook:r:event:evt-1',
      decisionId: 'evt-1',
    });
  });
});
