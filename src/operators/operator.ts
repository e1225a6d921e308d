/**
 * Operators: the people behind the operator keys. Each key (RISKGATE_OPS_KEYS) has a name and a
 * role, so the audit trail says who did what and the console shows each person what they may do.
 * Roles are ordered: each may do what the one before it may.
 *
 * - `viewer`: reads decisions, rules, actions, health, the audit trail.
 * - `analyst`: also labels decisions (fraud / legit).
 * - `admin`: also retries and drops actions, reloads policies, changes lists, undoes lock-outs.
 */

export const OPERATOR_ROLES = ['viewer', 'analyst', 'admin'] as const;
export type OperatorRole = (typeof OPERATOR_ROLES)[number];

/** An authenticated operator: a name people read, a role, and the key's id (never the key). */
export interface Operator {
  /** Letters, digits, `.`, `_`, `-` and `@` (an email from an SSO proxy), 1-64 characters. */
  name: string;
  role: OperatorRole;
  /** `key-` and 12 hex digits of the key's SHA-256 (src/edge/caller-auth.ts), or `sso` for a proxy's identity. */
  keyId: string;
}

/** Whether `role` may do what `needed` may. */
export function roleAllows(role: OperatorRole, needed: OperatorRole): boolean {
  return OPERATOR_ROLES.indexOf(role) >= OPERATOR_ROLES.indexOf(needed);
}
