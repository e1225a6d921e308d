/**
 * The login policy of the policy-version tests (and bench/policy-backtest.ts): one rule giving
 * every browser login `verdict`, so a version's effect shows in the verdict served (and a draft
 * differs from the active by one word).
 */
export const browserPolicy = (verdict: string) => `apiVersion: riskgate/v1
kind: Policy
name: login
thresholds: { challenge: 50, deny: 100 }
rules:
  - id: browser
    description: every browser login
    when: request.platform == "browser"
    verdict: ${verdict}
`;
