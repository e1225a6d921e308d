import type { AuditEntry } from '../../src/operators/audit-trail.ts';
import { type Harness, type HarnessOptions, startHarness } from '../decide-harness.ts';
import { type ConsoleClient, consoleSignIn } from './console-client.ts';

/**
 * A riskgate with named operators for the tests of four-eyes changes (policy versions): two admins,
 * alice and bob (one proposes, the other approves), and a viewer, vera, who may read but change
 * nothing. The harness's plain operator key is not among them.
 */

/** Each operator's key. */
export const OPERATOR_KEYS = {
  alice: 'alice-admin-key-0123456789',
  bob: 'bob-admin-key-0123456789abc',
  vera: 'vera-viewer-key-0123456789',
} as const;

export type Operator = keyof typeof OPERATOR_KEYS;

/** RISKGATE_OPS_KEYS naming them: `alice:admin:…,bob:admin:…,vera:viewer:…`. */
export const OPERATORS = [
  `alice:admin:${OPERATOR_KEYS.alice}`,
  `bob:admin:${OPERATOR_KEYS.bob}`,
  `vera:viewer:${OPERATOR_KEYS.vera}`,
].join(',');

export interface OperatorsHarness extends Harness {
  /** A call to riskgate as `who` (their key): a JSON body in, the status and JSON body out. */
  as(
    who: Operator,
    method: string,
    path: string,
    body?: unknown,
  ): Promise<{ status: number; body: Record<string, unknown> }>;
  /** A console session of `who`. */
  signIn(who: Operator): Promise<ConsoleClient>;
  /** The audit trail of `target` as `who` reads it, newest first: each entry's action, actor and outcome. */
  auditSteps(who: Operator, target: string): Promise<AuditStep[]>;
}

/** An audit entry's action, actor and outcome status (undefined while pending). */
export type AuditStep = [action: string, actor: string, status: string | undefined];

/** A call to riskgate at `url` with operator `key`: a JSON body in, the status and JSON body out. */
export async function operatorCall(
  url: string,
  key: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body !== undefined && { 'content-type': 'application/json' }),
    },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: (text ? JSON.parse(text) : {}) as Record<string, unknown> };
}

/**
 * `startHarness(options)` with the operators (their RISKGATE_OPS_KEYS before `options.env`'s) and
 * policy versions polled every 100 ms, so that an activation is served within a test's patience.
 */
export async function startOperatorsHarness(options: HarnessOptions = {}): Promise<OperatorsHarness> {
  const h = await startHarness({
    ...options,
    env: { RISKGATE_OPS_KEYS: OPERATORS, RISKGATE_POLICY_VERSION_POLL_MS: '100', ...options.env },
  });
  return {
    ...h,
    as: (who, method, path, body) => operatorCall(h.url, OPERATOR_KEYS[who], method, path, body),
    signIn: (who) => consoleSignIn(h.url, OPERATOR_KEYS[who]),
    async auditSteps(who, target) {
      const audit = await operatorCall(h.url, OPERATOR_KEYS[who], 'GET', `/audit?target=${target}`);
      return (audit.body.entries as AuditEntry[]).map((e) => [e.action, e.actor, e.outcome?.status]);
    },
  };
}
