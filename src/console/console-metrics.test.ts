import { describe, expect, it } from 'vitest';
import { createMetrics } from '../observability/metrics.ts';
import { summarizeMetrics } from './console-metrics.ts';

describe('the Health page’s reading of the collected metrics', () => {
  it('sums each vendor route’s calls, latency and errors, and the shed decisions', async () => {
    const metrics = createMetrics({ runtime: false });
    try {
      for (const ms of [20, 40, 60, 80]) metrics.recordUpstreamCall('signals', 'new-browser', ms);
      metrics.recordUpstreamCall('signals', 'new-browser', 0, 'RG_ERR_UPSTREAM_TIMEOUT');
      metrics.recordUpstreamCall('signals', 'new-browser', 0, 'RG_ERR_CIRCUIT_OPEN');
      metrics.recordUpstreamCall('signals', 'new-browser', 0, 'RG_ERR_CIRCUIT_OPEN');
      for (let i = 0; i < 90; i++) metrics.recordDecision('allow', false, 5);
      for (let i = 0; i < 10; i++) metrics.recordDecision('deny', true, 5);
      for (let i = 0; i < 5; i++) metrics.recordShed('in_flight', 'refused');
      const summary = summarizeMetrics(await metrics.collect());
      expect(summary).toEqual({
        vendor: [
          { upstream: 'signals', operation: 'new-browser', calls: 7, meanMs: expect.any(Number), errors: 3 },
        ],
        decisions: 100,
        shed: 5,
      });
      expect(summary.vendor[0]!.meanMs).toBeCloseTo(200 / 7, 6);
    } finally {
      await metrics.shutdown();
    }
  });
});
