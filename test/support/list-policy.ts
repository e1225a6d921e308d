import { patientShippedPolicy } from './patient-policy.ts';

/** A policy with a deny list of networks and an allow-ish list of accounts, for the list tests. */
export const LIST_POLICY = `
apiVersion: riskgate/v1
kind: Policy
name: lists
thresholds: { challenge: 50, deny: 100 }
lists:
  blockedNetworks: { key: ip, ttl: 24h, description: Networks attacking us }
  trustedAccounts: { key: accountId }
rules:
  - id: blocked-network
    description: The login comes from a network an operator blocked.
    when: lists.blockedNetworks.contains(request.ip)
    verdict: deny
  - id: trusted-account
    description: An account the help desk vouched for.
    when: lists.trustedAccounts.contains(request.accountId)
    score: -10
`;

/**
 * The shipped policy (policies/login.yaml: mallory's remote-controlled login is denied and locked
 * out; it declares blockedNetworks and vouchedAccounts) with patient timeouts (run it under
 * PATIENT_DEADLINE_MS) and a third list, trustedAccounts, that no rule reads, for the console's
 * tests of its Lists page.
 */
export function shippedPolicyWithLists(): string {
  const shipped = patientShippedPolicy();
  if (!/^lists:\n/m.test(shipped)) throw new Error('policies/login.yaml declares no lists: section');
  return shipped.replace(/^lists:\n/m, 'lists:\n  trustedAccounts: { key: accountId }\n');
}
