import type { ResourceMetrics } from '@opentelemetry/sdk-metrics';
import type { DecisionReader, Label } from '../decision-store/decision-query.ts';
import type { RuleReportReader } from '../decision-store/rule-report.ts';
import type { ListOperations } from '../lists/list-routes.ts';
import type { LockoutOperations } from '../lockouts/lockout-routes.ts';
import type { AuditTrail } from '../operators/audit-trail.ts';
import type { Operator } from '../operators/operator.ts';
import type { OutboxControls } from '../outbox/actions-routes.ts';
import type { InputTable } from '../policy/inputs/input-row.ts';
import type { PolicyVersionOperations } from '../policy-versions/policy-version-operations.ts';
import type { SnoozeOperations } from '../snoozes/snooze-routes.ts';
import type { SessionOptions } from './console-session.ts';

/**
 * What the console reads and changes, as interfaces: the decision store, the rule report and the
 * audit trail (each optional: without one the page says what is missing; changes are recorded
 * through the edge's `recordChange`, the same as the API's), the outbox, the
 * process's health, how a label is recorded and who an operator key belongs to.
 */

export interface ConsoleHealth {
  /** What `GET /healthz` shows beside `status` (each component's details). */
  health(): Record<string, unknown>;
  /** What `GET /readyz` answers. */
  readiness(): { ready: boolean; checks: Record<string, boolean> };
  /** What `GET /metrics` serves, as collected (vendor call latencies and errors, shed decisions). */
  metrics?(): Promise<ResourceMetrics>;
}

export interface ConsoleLabel {
  decisionId: string;
  label: Label;
  note?: string | undefined;
  operator: Operator;
}

export interface ConsoleDeps {
  decisions?: DecisionReader | undefined;
  rules?: RuleReportReader | undefined;
  audit?: AuditTrail | undefined;
  /** The runtime lists' reads and changes (the Lists page), the same as `/lists`'s. */
  lists?: ListOperations | undefined;
  /** The lock-out records and the unlock (the Lock-outs page), the same as `/lockouts`'s. */
  lockouts?: LockoutOperations | undefined;
  /** The rule snoozes' reads and changes (decision and rule pages), the same as `/snoozes`'s. */
  snoozes?: SnoozeOperations | undefined;
  /** The policy versions' reads and changes (the Policies pages), the same as `/policy-versions`'s. */
  policyVersions?: PolicyVersionOperations | undefined;
  outbox: OutboxControls;
  health: ConsoleHealth;
  /**
   * The active policy's input table: the rows a decision page shows. Default: the built-in table
   * (src/policy/inputs/input-table.ts).
   */
  inputs?: (() => InputTable) | undefined;
  /** The active policy's rule ids: a rule filter naming none of them says so. Default: no hint. */
  ruleIds?: (() => readonly string[]) | undefined;
  /**
   * Waits (bounded) until a change just made is what the next page reads: the label in the
   * store, the rule report recomputed. Default: nothing to wait for.
   */
  settleOwnWrite?: (() => Promise<void>) | undefined;
  /** Records a label (the decision log's `feedback` line, src/feedback/record-label.ts). */
  labelDecision(label: ConsoleLabel): Promise<unknown>;
  /** The operator of an operator key, or undefined when it is none. Default the edge's (`operatorOfKey`). */
  resolveOperator?: ((key: string) => Operator | undefined) | undefined;
  session: SessionOptions & {
    /** Mark the cookie Secure even over plain HTTP (TLS ends at a proxy). Default false. */
    secureCookie?: boolean | undefined;
  };
}
