import { existsSync } from 'node:fs';
import type { BenchMode } from './bench-options.ts';

/** Scenario 6: the policy engine's own evaluation bench (bench/policy-eval.ts, owned by the policy work). */
export interface PolicyEvalFigures {
  available: boolean;
  /** Why the figures are missing, when they are. */
  reason?: string;
  /** What bench/policy-eval.ts reported, as it reported it. */
  figures?: unknown;
}

export async function runPolicyEval(mode: BenchMode): Promise<PolicyEvalFigures> {
  void mode;
  if (!existsSync(new URL('./policy-eval.ts', import.meta.url))) {
    return { available: false, reason: 'bench/policy-eval.ts does not exist yet' };
  }
  return { available: false, reason: 'bench/policy-eval.ts exists but the harness does not call it yet' };
}
