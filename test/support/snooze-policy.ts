export interface SnoozePolicyOptions {
  /** `new-region` also opens a review case (`review: true`). Default false. */
  reviewNewRegion?: boolean;
  /** More rules after the two: YAML list items indented as theirs (two spaces). Default none. */
  moreRules?: string;
}

/**
 * A policy whose rules fire on what the test sends (the request's context), for the rule snooze
 * tests: `backend-flagged` denies, `new-region` adds 60 (a challenge on its own).
 */
export function snoozePolicy(o: SnoozePolicyOptions = {}): string {
  return `
apiVersion: riskgate/v1
kind: Policy
name: snoozes
thresholds: { challenge: 50, deny: 100 }
rules:
  - id: backend-flagged
    description: The login backend flagged the login.
    when: '"flagged" in request.context && request.context.flagged == true'
    verdict: deny
  - id: new-region
    description: The login comes from a region the account never used.
    when: '"newRegion" in request.context && request.context.newRegion == true'
    score: 60
${o.reviewNewRegion === true ? '    review: true\n' : ''}${o.moreRules ?? ''}`;
}

export const SNOOZE_POLICY = snoozePolicy();
