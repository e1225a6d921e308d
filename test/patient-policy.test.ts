import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { compilePolicy } from '../src/policy/policy-compiler.ts';
import {
  PATIENT_DEADLINE_MS,
  PATIENT_TIMEOUT_MS,
  patientShippedPolicy,
  patientTimeouts,
  SHIPPED_POLICY_FILE,
} from './support/patient-policy.ts';

/**
 * The patient copy of the shipped policy (test/support/patient-policy.ts), which the tests of
 * verdicts run: the shipped policy to the letter but for its timeouts, every one of them patient,
 * and inside the deadline it runs under.
 */

/** `value` with every `timeoutMs` key's value set to `ms`, at any depth. */
function withTimeouts(value: unknown, ms: number): unknown {
  if (Array.isArray(value)) return value.map((v) => withTimeouts(v, ms));
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [k, k === 'timeoutMs' ? ms : withTimeouts(v, ms)]),
  );
}

describe('the patient copy of the shipped policy', () => {
  const shipped = readFileSync(SHIPPED_POLICY_FILE, 'utf8');
  const copy = patientShippedPolicy();

  it('is the shipped policy but for its timeouts', () => {
    expect(parse(copy)).toEqual(withTimeouts(parse(shipped), PATIENT_TIMEOUT_MS));
  });

  it('compiles, and gives every input it reads the patient timeout, inside the deadline', () => {
    const { policy, issues } = compilePolicy('login.yaml', copy);
    expect(issues.filter((i) => i.severity === 'error')).toEqual([]);
    const shippedPolicy = compilePolicy('login.yaml', shipped).policy!;
    expect(policy!.ruleIds).toEqual(shippedPolicy.ruleIds);
    expect(policy!.revision).not.toBe(shippedPolicy.revision);
    const timeouts = [
      ...Object.values(policy!.signalSettings).map((s) => s?.timeoutMs),
      ...Object.values(policy!.adminSettings ?? {}).map((s) => s?.timeoutMs),
      ...Object.values(policy!.featureSettings ?? {}).map((s) => s?.timeoutMs),
    ];
    expect(timeouts.length).toBeGreaterThanOrEqual(8);
    expect(new Set(timeouts)).toEqual(new Set([PATIENT_TIMEOUT_MS]));
    expect(PATIENT_TIMEOUT_MS).toBeLessThan(PATIENT_DEADLINE_MS);
  });
});

describe('patient timeouts of another policy', () => {
  it('set the default and the velocity and history reads that set none, and nothing else', () => {
    const yaml = `apiVersion: riskgate/v1
kind: Policy
name: bare
thresholds: { challenge: 40, deny: 80 }
signals:
  newBrowser: { timeoutMs: 150 }
velocity:
  counters:
    accountsPerIp: { description: d, key: [ip], count: distinct, of: accountId, window: 10m }
rules:
  - { id: nb, description: d, when: 'signals.newBrowser.success && !signals.newBrowser.known', score: 40 }
  - { id: rat, description: d, when: 'signals.remoteAccessTool.success', score: 40 }
  - { id: many, description: d, when: 'velocity.accountsPerIp >= 20', verdict: challenge }
`;
    const { policy } = compilePolicy('bare.yaml', patientTimeouts(yaml));
    expect(policy!.signalSettings.newBrowser?.timeoutMs).toBe(PATIENT_TIMEOUT_MS);
    expect(policy!.signalSettings.remoteAccessTool?.timeoutMs).toBe(PATIENT_TIMEOUT_MS);
    expect(policy!.featureSettings?.velocity?.timeoutMs).toBe(PATIENT_TIMEOUT_MS);
    const { defaults, velocity, ...rest } = parse(patientTimeouts(yaml)) as Record<string, unknown>;
    const { velocity: originalVelocity, ...original } = parse(yaml) as Record<string, unknown>;
    expect(defaults).toEqual({ timeoutMs: PATIENT_TIMEOUT_MS });
    expect(velocity).toEqual({ ...(originalVelocity as object), timeoutMs: PATIENT_TIMEOUT_MS });
    expect(rest).toEqual(withTimeouts(original, PATIENT_TIMEOUT_MS));
  });
});
