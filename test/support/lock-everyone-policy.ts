/**
 * A policy that denies every login and locks its account out: every decision promises an action,
 * which is what the outbox tests need (a test of the action path, not of risk).
 */
export const LOCK_EVERYONE_POLICY = `apiVersion: riskgate/v1
kind: Policy
name: lock-everyone
description: every login is denied and its account locked (a test of the outbox, not of risk)
thresholds: { challenge: 40, deny: 80 }
rules:
  - { id: always, description: every login, when: 'true', verdict: deny }
actions:
  lockOut: { type: lock_out_user }
verdictActions:
  deny: [lockOut]
`;

/** The six accounts of the sandbox's default scenario. */
export const SANDBOX_USERS = ['alice', 'bob', 'mallory', 'trudy', 'carol', 'dave'] as const;
