import { type Harness, startHarness } from '../decide-harness.ts';
import type { WebhookReceiver } from './webhook-receiver.ts';

/** mallory is denied, bob challenged, everyone else allowed. */
const POLICY = `apiVersion: riskgate/v1
kind: Policy
name: webhook-decisions
description: a deny and a challenge by name (a test of the events, not of risk)
thresholds: { challenge: 40, deny: 80 }
rules:
  - { id: deny-mallory, description: d, when: 'request.accountId == "mallory"', verdict: deny }
  - { id: challenge-bob, description: c, when: 'request.accountId == "bob"', verdict: challenge }
`;

/**
 * A running riskgate over the sandbox that denies mallory and challenges bob, and tells `receiver`
 * each deny and challenge (RISKGATE_WEBHOOK_EVENTS opts in to decision.denied and
 * decision.challenged), signed with `secret`.
 */
export function startDecisionWebhooks(receiver: WebhookReceiver, secret: string): Promise<Harness> {
  return startHarness({
    policy: { yaml: POLICY },
    env: {
      RISKGATE_WEBHOOK_URLS: receiver.url(),
      RISKGATE_WEBHOOK_SECRET: secret,
      RISKGATE_WEBHOOK_EVENTS: 'decision.denied,decision.challenged',
    },
  });
}
