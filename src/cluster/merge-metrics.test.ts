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
