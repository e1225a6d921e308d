import type { Component, LifecycleLog } from '../lifecycle/component.ts';
import type { InputTable } from './inputs/input-row.ts';
import { policyRoutes } from './policy-routes.ts';
import { createPolicyStore, type PolicyStore } from './policy-store.ts';
import { RuleStats } from './rule-stats.ts';
import { openShadowPolicy, type ShadowPolicy } from './shadow-policy.ts';

export interface PolicyComponentOptions {
  /** The active policy (RISKGATE_POLICY_PATH). */
  path: string;
  /** The shadow candidate (RISKGATE_SHADOW_POLICY_PATH); none by default. */
  shadowPath?: string | undefined;
  /** Quiet period before a reload, milliseconds. */
  debounceMs: number;
  log: LifecycleLog;
  /** Told of each reload of either policy, successful or not (the reload metric). */
  onReload: (result: 'ok' | 'error') => void;
  /** The input table both policies compile against; default the built-in one. */
  inputs?: InputTable | undefined;
}

export interface Policies {
  store: PolicyStore;
  shadow: ShadowPolicy | undefined;
  ruleStats: RuleStats;
}

/**
 * The active policy store and the shadow candidate, each watching its file; their rule statistics.
 * An active policy that does not load fails the start; a shadow that does not load is reported and
 * retried, never fatal. Mounts `GET /policies` and `GET /policies/stats` for operators.
 */
export function policyComponent(o: PolicyComponentOptions): Component<Policies> {
  return {
    name: 'policies',
    async start() {
      const compileOptions = o.inputs === undefined ? undefined : { inputs: o.inputs };
      const store = await createPolicyStore({
        path: o.path,
        debounceMs: o.debounceMs,
        log: o.log,
        onReload: () => o.onReload('ok'),
        onError: () => o.onReload('error'),
        compile: compileOptions,
      });
      const shadow =
        o.shadowPath === undefined
          ? undefined
          : openShadowPolicy(o.shadowPath, o.debounceMs, o.log, o.onReload, compileOptions);
      await shadow?.ready;
      const ruleStats = new RuleStats();
      return {
        handle: { store, shadow, ruleStats },
        stop: () => {
          store.close();
          shadow?.close();
        },
        ready: () => ({ policy: store.current() !== undefined }),
        routes: [policyRoutes({ policies: store, shadowStatus: shadow?.status, ruleStats })],
      };
    },
  };
}
