import type { PolicyRequest } from './policy-request.ts';

/**
 * Rule snoozes as the policy engine reads them (src/snoozes/ keeps them): one rule silenced for
 * one entity of a login until a time. Below the engine and the snoozes room, which both read them.
 */

/** What a snooze is for: the request's account, user, unit, or its IP (an address or a CIDR). */
export const SNOOZE_ENTITIES = ['accountId', 'userId', 'unitId', 'ip'] as const;
export type SnoozeEntity = (typeof SNOOZE_ENTITIES)[number];

/** A snooze that applies to a rule for a login: the explanation's `snoozed` entry. */
export interface SnoozedRule {
  /** The rule's id. */
  id: string;
  /** The snooze's id (`DELETE /snoozes/{id}` ends it). */
  snoozeId: string;
  entity: SnoozeEntity;
  /** The snooze's value (canonical; a CIDR for an IP snooze). */
  value: string;
  /** When the rule comes back for this entity (RFC 3339). */
  until: string;
}

/** The in-memory snoozes a decision reads (never the database). */
export interface SnoozeLookup {
  /** The active snooze of `ruleId` that covers `request` at `nowMs`; undefined when none. */
  match(ruleId: string, request: PolicyRequest, nowMs: number): SnoozedRule | undefined;
}

/**
 * The snoozes one decision evaluates against: the snapshot and the time it is read at (the
 * service's clock), or why there is none (`RG_ERR_SNOOZES_UNAVAILABLE`: every rule then counts).
 */
export type DecisionSnoozes = { lookup: SnoozeLookup; nowMs: number } | { unavailable: string };
