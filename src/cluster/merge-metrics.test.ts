import { afterEach, describe, expect, it } from 'vitest';
import { createMetrics, type RiskgateMetrics, serializeMetrics } from '../observability/metrics.ts';
import { mergeWorkerMetrics, plainMetrics } from './merge-metrics.ts';

/** Each worker's registry, as the worker would have it; collected and sent over IPC (JSON). */
const registries: RiskgateMetrics[] = [];
function worker(pending: number, inFlight: number, allows: number): RiskgateMetrics {
  const metrics = createMetrics({ runtime: false });
  registries.push(metrics);
  metrics.observeGauge('riskgate_outbox_pending', 'Pending', () => pending);
  metrics.observeGauge('riskgate_test_in_flight', 'In flight', () => inFlight);
  for (let i = 0; i < allows; i++) metrics.recordDecision('allow', false, 5);
  return metrics;
}
const overIpc = async (m: RiskgateMetrics) =>
  JSON.parse(JSON.stringify(plainMetrics(await m.collect()))) as ReturnType<typeof plainMetrics>;

afterEach(async () => {
  await Promise.all(registries.splice(0).map((m) => m.shutdown()));
});

describe('mergeWorkerMetrics', () => {
  it('labels each sample with its worker, first, and writes each family once, samples together', async () => {
    const text = serializeMetrics(
      mergeWorkerMetrics([
        { worker: 2, metrics: await overIpc(worker(7, 0, 5)) },
        { worker: 1, metrics: await overIpc(worker(7, 1, 3)) },
      ]),
    );
    expect(text.match(/^riskgate_decisions_total.*$/gm)).toEqual([
      'riskgate_decisions_total{worker="1",verdict="allow",degraded="false"} 3',
      'riskgate_decisions_total{worker="2",verdict="allow",degraded="false"} 5',
    ]);
    expect(text.match(/^riskgate_test_in_flight.*$/gm)).toEqual([
      'riskgate_test_in_flight{worker="1"} 1',
      'riskgate_test_in_flight{worker="2"} 0',
    ]);
    expect(text.match(/^# TYPE riskgate_decisions_total .*$/gm)).toHaveLength(1);
    expect(text.match(/^# HELP riskgate_test_in_flight .*$/gm)).toHaveLength(1);
  });
});

describe('mergeWorkerMetrics: store-wide gauges', () => {
  it('reports a gauge every worker reads from the shared store once, unlabelled, so a sum is the store’s figure', async () => {
    // Worker 2 answered first: the figure is still worker 1's, whichever order they came in.
    const two = await overIpc(worker(7, 2, 0));
    const merged = serializeMetrics(
      mergeWorkerMetrics([
        { worker: 2, metrics: two },
        { worker: 1, metrics: await overIpc(worker(6, 1, 0)) },
      ]),
    );
    expect(merged.match(/^riskgate_outbox_pending.*$/gm)).toEqual(['riskgate_outbox_pending 6']);
    // Worker 1 restarting (not in this gather): the next worker speaks for the store.
    expect(serializeMetrics(mergeWorkerMetrics([{ worker: 2, metrics: two }]))).toMatch(
      /^riskgate_outbox_pending 7$/m,
    );
  });
});
