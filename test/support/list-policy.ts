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
