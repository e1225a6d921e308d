import { declareRoute } from '../edge/route-declaration.ts';
import type { Component, MetricsRegistry, RouteMount } from './component.ts';
import type { Readiness } from './lifecycle.ts';

/**
 * `GET /healthz` and `GET /readyz`, open on every surface. Liveness: the process answers; the
 * vendor's state is detail, never a reason to restart. Readiness: this process answers /decide as
 * well as any replica could (every component's checks: a policy is loaded, not shutting down, the
 * inputs the active policy reads warm: the token held, the event history read, the lists loaded).
 * The vendor failing is not a check: every replica shares it, and failing them all at once would
 * turn a degraded service (outage mode, onUnavailable) into no service (docs/operations.md,
 * "Readiness").
 */
export const HEALTH_ROUTE = declareRoute({
  method: 'get',
  path: '/healthz',
  surface: 'probe',
  operationId: 'health',
  summary: 'Liveness: the process answers',
  description:
    'Always 200 while the process runs; the vendor token, open circuit breakers and the decision log are details, never a reason to restart.',
  responses: { 200: { description: 'Alive.', schema: 'Health' } },
});

export const READY_ROUTE = declareRoute({
  method: 'get',
  path: '/readyz',
  surface: 'probe',
  operationId: 'readiness',
  summary: 'Readiness: this process can answer /decide as well as any replica',
  description:
    'Ready once a policy is loaded and the inputs it reads are warm (the token held, the event history within its lag, the lists loaded); `inputs` says which one holds it back and why. The vendor failing is never a reason: every replica shares it, and failing them all would turn a degraded service into none.',
  responses: {
    200: { description: 'Ready: a policy is loaded and the inputs it reads are warm.', schema: 'Readiness' },
    503: {
      description:
        'Not ready: an input the policy reads not warm yet after the start, or behind for longer than RISKGATE_READY_GRACE_MS (`checks.<input>` false, `inputs.<input>` says why), shutting down (`checks.draining`), or the decision log failing with RISKGATE_DECISION_LOG_ON_FAILURE=refuse (`checks.decisionLog`). The body is the readiness report, not a problem.',
      schema: 'Readiness',
    },
  },
});

export function healthRoutes(o: {
  health: () => Record<string, unknown>;
  readiness: () => Readiness;
}): RouteMount {
  return {
    surface: 'every',
    routes: [HEALTH_ROUTE, READY_ROUTE],
    mount(app) {
      // An alarm (control state unavailable) says so in `status`, still 200: a restart would not fix it.
      HEALTH_ROUTE.mount(app, (c) => {
        const details = o.health();
        const alarmed = Array.isArray(details.alarms) && details.alarms.length > 0;
        return c.json({ status: alarmed ? 'alarm' : 'ok', ...details });
      });
      READY_ROUTE.mount(app, (c) => {
        const readiness = o.readiness();
        return c.json(readiness, readiness.ready ? 200 : 503);
      });
    },
  };
}

/**
 * The probes as a component, with the `riskgate_ready` gauge (what `/readyz` answers) and any
 * other routes that have no lifecycle of their own (`extra`: the API document, callbacks).
 */
export function probesComponent(o: {
  health: () => Record<string, unknown>;
  readiness: () => Readiness;
  extra?: readonly RouteMount[];
}): Component<void, MetricsRegistry> {
  return {
    name: 'probes and routes',
    start: () => ({
      handle: undefined,
      routes: [...(o.extra ?? []), healthRoutes(o)],
      observe(metrics) {
        metrics.observeGauge(
          'riskgate_ready',
          '1 while /readyz answers 200 (a policy loaded, the inputs it reads warm, not shutting down, the decision log writing when RISKGATE_DECISION_LOG_ON_FAILURE=refuse), else 0',
          () => (o.readiness().ready ? 1 : 0),
        );
      },
    }),
  };
}
