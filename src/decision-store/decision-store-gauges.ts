/**
 * The decision store's backlog gauge in `GET /metrics`, registered by
 * src/decision-store/decision-store-component.ts; the bench's overload probe reads it by name
 * (bench/riskgate-backlog.ts).
 */
export const DECISION_STORE_PENDING_GAUGE = 'riskgate_decision_store_pending';
