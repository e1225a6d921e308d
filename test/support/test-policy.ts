import { type CompileOptions, compilePolicy } from '../../src/policy/policy-compiler.ts';
import type { CompiledPolicy, SignalOutcome } from '../../src/policy/policy-types.ts';

/**
 * A policy written in a test and the signal answers it is evaluated on, for the tests of the
 * policy language (test/policy-evaluation.test.ts, test/policy-degraded.test.ts, ...).
 */

/** `body` under the header every policy file carries, compiled; throws naming each issue if it does not compile. */
export function compileTestPolicy(body: string, options: CompileOptions = {}): CompiledPolicy {
  const r = compilePolicy('t.yaml', `apiVersion: riskgate/v1\nkind: Policy\nname: t\n${body}`, options);
  if (!r.policy) throw new Error(r.issues.map((e) => `${e.line}:${e.col} ${e.message}`).join('\n'));
  return r.policy;
}

/** The remote access tool detector's answer. */
export const rat = (anomaly: boolean, anomalyConfidence: number): SignalOutcome<'remoteAccessTool'> => ({
  status: 'ok',
  response: { signalType: 'remote_access_tool', success: true, result: { anomaly, anomalyConfidence } },
});

/** The new-browser signal's answer. */
export const newBrowser = (known: boolean): SignalOutcome<'newBrowser'> => ({
  status: 'ok',
  response: { signalType: 'new_browser', success: true, result: { known } },
});

/** A signal riskgate could not gather, and why. */
export const down = (reason: string) => ({ status: 'unavailable', reason }) as const;
