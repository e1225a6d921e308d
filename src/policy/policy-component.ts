import type { Component, LifecycleLog } from '../lifecycle/component.ts';
import type { InputTable } from './inputs/input-row.ts';
import { policyRoutes } from './policy-routes.ts';
import { createPolicyStore, type PolicyStore, type PolicyStoreStatus } from './policy-store.ts';
import type { CompiledPolicy } from './policy-types.ts';
import { RuleStats } from './rule-stats.ts';
import { openShadowPolicy, type ShadowPolicy } from './shadow-policy.ts';

/**
 * The control database's policy versions as a replica serves them (src/policy-versions/
 * policy-version-sync.ts): declared here, where the served policy is chosen, so src/policy/ does
 * not import the versions that are built on it.
 */
export interface PolicyVersionSource {
  start(): Promise<void>;
  stop(): Promise<void>;
  /** The active version this replica compiled, if any. */
  active():
    | { policy: CompiledPolicy /** When this replica began serving it (epoch ms). */; sinceMs: number }
    | undefined;
  /** What `GET /policies` says of the versions. */
  status(): object;
}

export interface PolicyComponentOptions<V extends PolicyVersionSource = PolicyVersionSource> {
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
  /**
   * The policy versions of the control database, kept current (started and stopped here). Once
   * the database has an active version it is served and the file is a draft source only; with
   * none, the file serves (docs/policy-versions.md, "Which wins").
   */
  versions?: ((compile: { inputs: InputTable } | undefined) => V) | undefined;
}

export interface Policies<V extends PolicyVersionSource = PolicyVersionSource> {
  /** What decisions are served: the database's active version, else the file's policy. */
  store: PolicyStore;
  /** The file-based shadow (RISKGATE_SHADOW_POLICY_PATH); a staged database version takes its place. */
  shadow: ShadowPolicy | undefined;
  ruleStats: RuleStats;
  /** The database's versions as this replica serves them; undefined without a control database. */
  versions: V | undefined;
}

/** `GET /policies`'s status of the served policy: the file's, or the database version's over it. */
export interface ServedPolicyStatus extends PolicyStoreStatus {
  /** Where the served policy comes from: the control database's active version, or the file. */
  source: 'database' | 'file';
  version?: object;
}

/**
 * The served policy: the database's active version when there is one this replica compiled, else
 * the watched file's. Both are read per call (a field read), so an activation or a file reload is
 * one reference swap.
 */
export function servedPolicy(file: PolicyStore, versions: PolicyVersionSource | undefined): PolicyStore {
  const current = (): CompiledPolicy => versions?.active()?.policy ?? file.current();
  return {
    current,
    status: (): ServedPolicyStatus => {
      const fileStatus = file.status();
      const active = versions?.active();
      if (versions === undefined) return { ...fileStatus, source: 'file' };
      if (active === undefined) return { ...fileStatus, source: 'file', version: versions.status() };
      const p = active.policy;
      return {
        ...fileStatus,
        name: p.name,
        revision: p.revision,
        loadedAt: new Date(active.sinceMs).toISOString(),
        warnings: p.warnings ?? [],
        source: 'database',
        version: versions.status(),
      };
    },
    reload: () => file.reload(),
    close: () => file.close(),
  };
}

/**
 * The active policy store and the shadow candidate, each watching its file; the database's
 * versions over them; their rule statistics. An active policy file that does not load fails the
 * start; a shadow that does not load is reported and retried, never fatal. Mounts
 * `GET /policies` and `GET /policies/stats` for operators.
 */
export function policyComponent<V extends PolicyVersionSource>(
  o: PolicyComponentOptions<V>,
): Component<Policies<V>> {
  return {
    name: 'policies',
    async start() {
      const compileOptions = o.inputs === undefined ? undefined : { inputs: o.inputs };
      const file = await createPolicyStore({
        path: o.path,
        debounceMs: o.debounceMs,
        log: o.log,
        onReload: () => o.onReload('ok'),
        onError: () => o.onReload('error'),
        compile: compileOptions,
      });
      const versions = o.versions?.(compileOptions);
      try {
        await versions?.start();
      } catch (error) {
        file.close();
        throw error;
      }
      const store = servedPolicy(file, versions);
      const shadow =
        o.shadowPath === undefined
          ? undefined
          : openShadowPolicy(o.shadowPath, o.debounceMs, o.log, o.onReload, compileOptions);
      await shadow?.ready;
      const ruleStats = new RuleStats();
      return {
        handle: { store, shadow, ruleStats, versions },
        stop: async () => {
          await versions?.stop();
          store.close();
          shadow?.close();
        },
        ready: () => ({ policy: store.current() !== undefined }),
        routes: [policyRoutes({ policies: store, shadowStatus: shadow?.status, ruleStats })],
      };
    },
  };
}
