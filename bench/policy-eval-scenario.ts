import type { BenchMode } from './bench-options.ts';
import type { PolicyEvalResult } from './policy-eval.ts';

/**
 * Scenario 6: the policy engine's own evaluation bench (bench/policy-eval.ts, owned by the policy
 * work), run in the harness process once the servers have stopped, so it has a quiet core.
 */
export type PolicyEvalFigures =
  | { available: true; iterations: number; runs: number; result: PolicyEvalResult }
  | { available: false; reason: string };

/** Iterations per mode: the policy bench's own defaults for the full run, far fewer otherwise. */
const SIZES: Record<BenchMode, { iterations: number; jreIterations: number; runs: number }> = {
  full: { iterations: 200_000, jreIterations: 20_000, runs: 3 },
  quick: { iterations: 50_000, jreIterations: 5_000, runs: 1 },
  smoke: { iterations: 2_000, jreIterations: 200, runs: 1 },
};

export async function runPolicyEval(mode: BenchMode): Promise<PolicyEvalFigures> {
  const size = SIZES[mode];
  try {
    const { runPolicyEvalBench } = await import('./policy-eval.ts');
    const result = await runPolicyEvalBench(size);
    return { available: true, iterations: size.iterations, runs: size.runs, result };
  } catch (error) {
    return { available: false, reason: error instanceof Error ? error.message : String(error) };
  }
}
