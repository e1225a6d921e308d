import type { ResourceMetrics } from '@opentelemetry/sdk-metrics';
import { declareRoute } from '../edge/route-declaration.ts';
import type { Component, RouteMount } from '../lifecycle/component.ts';
import { createMetrics, PROMETHEUS_CONTENT_TYPE, type RiskgateMetrics, serializeMetrics } from './metrics.ts';
import type { DecisionTracing } from './tracing.ts';

export const METRICS_ROUTE = declareRoute({
  method: 'get',
  path: '/metrics',
  surface: 'operator',
  operationId: 'metrics',
  summary: 'Prometheus metrics',
  responses: {
    200: {
      description: 'Prometheus text exposition (every worker’s, gathered, with RISKGATE_WORKERS above 1).',
      contentType: PROMETHEUS_CONTENT_TYPE,
      schema: { type: 'string' },
    },
  },
});

/** `GET /metrics`: the Prometheus text of what `gather` collects (an operator endpoint). */
export function metricsRoute(gather: () => Promise<ResourceMetrics>): RouteMount {
  return {
    surface: 'operator',
    routes: [METRICS_ROUTE],
    mount(app, edge) {
      METRICS_ROUTE.mount(app, edge.operatorAuth, async (c) =>
        c.body(serializeMetrics(await gather()), 200, { 'content-type': PROMETHEUS_CONTENT_TYPE }),
      );
    },
  };
}

/**
 * The metrics registry as a component, started first and shut down last (its runtime monitors
 * run until then); mounts `GET /metrics`, serving what `gather` collects (default this process's
 * metrics; a cluster worker gathers every worker's).
 */
export function metricsComponent(
  gather?: (() => Promise<ResourceMetrics>) | undefined,
): Component<RiskgateMetrics> {
  return {
    name: 'metrics',
    start() {
      const metrics = createMetrics();
      return {
        handle: metrics,
        stop: () => metrics.shutdown(),
        routes: [metricsRoute(gather ?? metrics.collect)],
      };
    },
  };
}

/** Opt-in tracing (opened by the caller): flushed and shut down on stop. */
export function tracingComponent(
  tracing: DecisionTracing | undefined,
): Component<DecisionTracing | undefined> {
  return {
    name: 'tracing',
    start: () => ({ handle: tracing, stop: () => tracing?.shutdown() }),
  };
}
