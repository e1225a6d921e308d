import { describe, expect, it } from 'vitest';
import { mergeWorkerMetrics } from './merge-metrics.ts';

describe('mergeWorkerMetrics', () => {
  it('labels each sample with its worker and writes each family once, samples together', () => {
    const one = [
      '# HELP riskgate_decisions_total Decisions',
      '# TYPE riskgate_decisions_total counter',
      'riskgate_decisions_total{verdict="allow"} 3',
      '# HELP riskgate_decisions_in_flight In flight',
      '# TYPE riskgate_decisions_in_flight gauge',
      'riskgate_decisions_in_flight 1',
      '',
    ].join('\n');
    const two = one.replace(' 3', ' 5').replace('in_flight 1', 'in_flight 0');
    expect(
      mergeWorkerMetrics([
        { worker: 1, text: one },
        { worker: 2, text: two },
      ]),
    ).toBe(
      [
        '# HELP riskgate_decisions_total Decisions',
        '# TYPE riskgate_decisions_total counter',
        'riskgate_decisions_total{worker="1",verdict="allow"} 3',
        'riskgate_decisions_total{worker="2",verdict="allow"} 5',
        '# HELP riskgate_decisions_in_flight In flight',
        '# TYPE riskgate_decisions_in_flight gauge',
        'riskgate_decisions_in_flight{worker="1"} 1',
        'riskgate_decisions_in_flight{worker="2"} 0',
        '',
      ].join('\n'),
    );
  });
});

describe('mergeWorkerMetrics: store-wide gauges', () => {
  it('reports a gauge every worker reads from the shared store once, unlabelled, so a sum is the store’s figure', () => {
    const text = (pending: number, inFlight: number) =>
      [
        '# HELP riskgate_outbox_pending Pending',
        '# TYPE riskgate_outbox_pending gauge',
        `riskgate_outbox_pending ${pending}`,
        '# HELP riskgate_decisions_in_flight In flight',
        '# TYPE riskgate_decisions_in_flight gauge',
        `riskgate_decisions_in_flight ${inFlight}`,
        '',
      ].join('\n');
    // Worker 2 answered first: the figure is still worker 1's, whichever order they came in.
    const merged = mergeWorkerMetrics([
      { worker: 2, text: text(7, 2) },
      { worker: 1, text: text(6, 1) },
    ]);
    expect(merged.match(/^riskgate_outbox_pending.*$/gm)).toEqual(['riskgate_outbox_pending 6']);
    expect(merged.match(/^riskgate_decisions_in_flight.*$/gm)).toEqual([
      'riskgate_decisions_in_flight{worker="1"} 1',
      'riskgate_decisions_in_flight{worker="2"} 2',
    ]);
    // Worker 1 restarting (not in this gather): the next worker speaks for the store.
    expect(mergeWorkerMetrics([{ worker: 2, text: text(7, 2) }])).toMatch(/^riskgate_outbox_pending 7$/m);
  });
});
