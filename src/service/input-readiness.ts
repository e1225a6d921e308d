import type { CompiledPolicy } from '../policy/policy-types.ts';

/**
 * Which of a decision's inputs `/readyz` waits for, read off the active policy (the inputs it
 * reads, src/decide/decision-inputs.ts): `token` when it reads a Trust Signals signal (each call
 * carries the token), `history` and `lists` when it reads them. The Admin reads are signed per
 * call and velocity is counted in the feature store: nothing of theirs warms up, so neither is a
 * check. A check is named by its input (the components' `ready` use the same names).
 */
export function readsInput(policy: () => CompiledPolicy): (input: string) => boolean {
  return (input) => {
    const needs = policy().requirements;
    switch (input) {
      case 'token':
        return needs.signals.size > 0;
      case 'history':
        return needs.history;
      case 'lists':
        return needs.lists === true;
      default:
        return false;
    }
  };
}
