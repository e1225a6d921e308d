/**
 * The outbox's gauges in `GET /metrics`, registered by src/outbox/outbox-component.ts. Named here
 * once because others read them by name: the cluster's merge reports the store-wide ones once
 * (src/cluster/merge-metrics.ts) and the bench's overload probe waits for the backlog
 * (bench/riskgate-backlog.ts); a renamed gauge must not leave a reader counting nothing.
 */
export const OUTBOX_GAUGES = {
  pending: 'riskgate_outbox_pending',
  oldestPendingAgeSeconds: 'riskgate_outbox_oldest_pending_age_seconds',
  dead: 'riskgate_outbox_dead',
  deferred: 'riskgate_outbox_deferred',
} as const;
