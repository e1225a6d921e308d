import { compilePolicy } from '../../src/policy/policy-compiler.ts';
import type { CompiledPolicy } from '../../src/policy/policy-types.ts';

/** A policy of one rule adding 40 when `when` holds: what a test needs to see what a policy reads. */
export function oneRulePolicy(when: string): CompiledPolicy {
  // JSON is YAML: no quoting of `when` to get right.
  const text = JSON.stringify({
    apiVersion: 'riskgate/v1',
    kind: 'Policy',
    name: 'login',
    thresholds: { challenge: 40, deny: 80 },
    rules: [{ id: 'r', description: 'a rule', when, score: 40 }],
  });
  const { policy, issues } = compilePolicy('login.yaml', text);
  const errors = issues.filter((i) => i.severity === 'error');
  if (policy === undefined || errors.length > 0) throw new Error(`not compiled: ${JSON.stringify(errors)}`);
  return policy;
}
