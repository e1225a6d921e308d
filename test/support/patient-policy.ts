import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isMap, isScalar, parseDocument, visit } from 'yaml';

/**
 * Policies with patient timeouts, for the tests of what a verdict is (a deny and its lock-out, an
 * allow, "not degraded"), not of how fast an input answers. The shipped policy gives each input
 * 150-250 ms (velocity and history 50 ms) inside a 300 ms deadline: right for production, but on
 * CI's two shared cores, or beside `stress-ng --cpu 2`, a healthy sandbox call can take longer,
 * and a signal past its timeout is unavailable, so mallory's deny reads as a degraded challenge
 * (correct, and not what those tests are about). The tests of timeouts, outages and the shipped
 * file itself keep the shipped policy.
 */

/** The shipped policy file. */
export const SHIPPED_POLICY_FILE = join(import.meta.dirname, '..', '..', 'policies', 'login.yaml');

/** Every input's timeout in a patient policy, milliseconds. */
export const PATIENT_TIMEOUT_MS = 2000;

/**
 * The decision deadline (RISKGATE_DEADLINE_MS, or the harness's `deadlineMs`) to run a patient
 * policy under, milliseconds: above its timeouts, so the inputs' own timeouts are what bounds them.
 */
export const PATIENT_DEADLINE_MS = 5000;

/**
 * `yaml` (a policy's text) with every `timeoutMs` it sets, and the default one, at
 * {@link PATIENT_TIMEOUT_MS}: signals, Admin reads, velocity and history alike. Everything else
 * (rules, thresholds, onUnavailable, actions) is the policy's own, comments included.
 */
export function patientTimeouts(yaml: string): string {
  const doc = parseDocument(yaml);
  if (doc.errors.length > 0) throw new Error(`not a policy's YAML: ${doc.errors[0]?.message}`);
  visit(doc, {
    Pair(_, pair) {
      if (isScalar(pair.key) && pair.key.value === 'timeoutMs' && isScalar(pair.value)) {
        pair.value.value = PATIENT_TIMEOUT_MS;
      }
    },
  });
  doc.setIn(['defaults', 'timeoutMs'], PATIENT_TIMEOUT_MS);
  // Velocity and history fall back to 50 ms, not to the default, when their section sets none.
  for (const section of ['velocity', 'history']) {
    if (isMap(doc.get(section))) doc.setIn([section, 'timeoutMs'], PATIENT_TIMEOUT_MS);
  }
  return doc.toString({ lineWidth: 0 });
}

/**
 * The shipped policy (policies/login.yaml, read now: a change to it is in the copy) with patient
 * timeouts; run it under {@link PATIENT_DEADLINE_MS}. Its revision is its own (a content hash):
 * a test comparing revisions reads it from this text, not from policies/.
 */
export function patientShippedPolicy(): string {
  const shipped = readFileSync(SHIPPED_POLICY_FILE, 'utf8');
  if (!/\btimeoutMs:/.test(shipped)) throw new Error(`${SHIPPED_POLICY_FILE} sets no timeoutMs any more`);
  return patientTimeouts(shipped);
}

/**
 * The environment of a riskgate process (RISKGATE_*) that runs {@link patientShippedPolicy}: the copy
 * written as login.yaml into a fresh directory under `parent`, and {@link PATIENT_DEADLINE_MS}.
 */
export function patientPolicyEnv(parent = tmpdir()): {
  RISKGATE_POLICY_PATH: string;
  RISKGATE_DEADLINE_MS: string;
} {
  const dir = mkdtempSync(join(parent, 'riskgate-patient-policy-'));
  writeFileSync(join(dir, 'login.yaml'), patientShippedPolicy());
  return { RISKGATE_POLICY_PATH: dir, RISKGATE_DEADLINE_MS: String(PATIENT_DEADLINE_MS) };
}
