import type { Context } from 'hono';
import { storeChanges } from '../audit/audited-change.ts';
import { DEFAULT_BACKTEST_WINDOW_HOURS } from '../config/settings.ts';
import { operatorNameOf } from '../edge/caller-auth.ts';
import { ErrorCode, InputError, RiskgateError } from '../errors/riskgate-error.ts';
import type { RouteEdge } from '../lifecycle/component.ts';
import type { AuditAction } from '../operators/audit-trail.ts';
import type { InputTable } from '../policy/inputs/input-row.ts';
import { type CompileOptions, compilePolicy } from '../policy/policy-compiler.ts';
import { formatIssue } from '../policy/policy-loader.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import type { EvidenceWindow } from './policy-version-evidence-store.ts';
import type {
  PolicyVersion,
  PolicyVersionStep,
  PolicyVersionStore,
  RolloutRequest,
  ScheduledPolicyActivation,
  ServedPolicyVersions,
  StagedPolicyVersion,
} from './policy-version-store.ts';

/**
 * The policy versions' reads and changes, as the operator API (policy-version-routes.ts and
 * policy-version-rollout-routes.ts), the console's Policies pages and, through the API, the CLI
 * share them: one place where a draft is compiled before it is kept and where every change (a
 * draft, a step, a revert, a stage or a schedule and their undoing) is written to the audit trail
 * once (`edge.recordChange`) before the store makes it.
 * Four eyes and the state checks are the store's (RG_ERR_POLICY_SELF_APPROVAL,
 * RG_ERR_POLICY_VERSION_CONFLICT); a database that does not answer is RG_ERR_DATABASE_UNAVAILABLE.
 */

/** The steps an admin takes by `POST /policy-versions/{id}/{step}`, with their audit actions. */
export const POLICY_VERSION_STEP_ACTIONS = {
  propose: 'policy.propose',
  approve: 'policy.approve',
  reject: 'policy.reject',
  withdraw: 'policy.withdraw',
  activate: 'policy.activate',
} as const satisfies Record<PolicyVersionStep, AuditAction>;

export interface PolicyVersionOperations {
  /** Versions, newest first, before `before` (an id) when given. */
  list(limit: number, before?: string): Promise<PolicyVersion[]>;
  /** One version; RG_ERR_NOT_FOUND when there is none. */
  get(id: string): Promise<PolicyVersion>;
  /** The active, staged and scheduled versions, as the replicas read them. */
  served(): Promise<ServedPolicyVersions>;
  /**
   * The evidence kept for version `id` (attached on proposal: its state, window and findings), as
   * the evidence store holds it; undefined when there is none or no evidence store runs here.
   */
  evidence(id: string): Promise<unknown>;
  /**
   * A draft made by the operator of `c`: compiled first (RG_ERR_INVALID_INPUT, one `yaml` issue
   * per error, when it does not compile: nothing is kept), audited, stored with the active version
   * as its parent.
   */
  create(c: Context, edge: RouteEdge, input: { yaml: string; message: string }): Promise<PolicyVersion>;
  /**
   * One step of the promotion flow by the operator of `c`, audited first. A proposal with an
   * evidence runner asks for its evidence over `window` (computed after the answer).
   */
  step(
    c: Context,
    edge: RouteEdge,
    id: string,
    step: PolicyVersionStep,
    window?: EvidenceWindow,
  ): Promise<PolicyVersion>;
  /** A new active version carrying earlier version `id`'s YAML, by the operator of `c`, audited first. */
  revert(c: Context, edge: RouteEdge, id: string, message: string): Promise<PolicyVersion>;
  /** Approved version `id` staged in shadow or to a percentage of accounts, audited first. */
  stage(c: Context, edge: RouteEdge, id: string, rollout: RolloutRequest): Promise<StagedPolicyVersion>;
  /**
   * The rollout ended, audited first (naming the staged version); given `id`, only when `id` is
   * the version staged (a page that showed it staged may be out of date: 409 otherwise).
   */
  unstage(c: Context, edge: RouteEdge, id?: string): Promise<void>;
  /**
   * Approved version `id` to be activated at `atMs` (epoch ms, wall time) in the name of the
   * operator of `c`, audited first; a time not in the future is RG_ERR_INVALID_INPUT naming `at`.
   */
  schedule(c: Context, edge: RouteEdge, id: string, atMs: number): Promise<ScheduledPolicyActivation>;
  /** The scheduled activation cancelled, audited first; given `id`, only when `id` is the one scheduled. */
  unschedule(c: Context, edge: RouteEdge, id?: string): Promise<void>;
}

/** The policy versions' store, as its 503 and the routes' notes name it. */
export const POLICY_VERSIONS_STORE = 'The policy versions database';

/** A database failure answered 503 RG_ERR_DATABASE_UNAVAILABLE; every change audited first. */
const { answer: fromStore, audited } = storeChanges(ErrorCode.DATABASE_UNAVAILABLE, POLICY_VERSIONS_STORE);

export function policyVersionOperations(o: {
  store: PolicyVersionStore;
  /** The input table a draft is compiled against before it is kept. Default: the built-in one. */
  inputs?: InputTable | undefined;
  /** Where a version's evidence is kept (read by id). Default: none, no version shows evidence. */
  evidence?:
    | {
        get(id: string): Promise<unknown>;
        /** Starts the evidence of a proposed version (PolicyEvidenceRunner). */
        request?(version: PolicyVersion, window: EvidenceWindow, by: string): Promise<boolean>;
      }
    | undefined;
  /**
   * A proposal's backtest window when none is asked for (the console's, an API call without one):
   * the last this many hours (RISKGATE_BACKTEST_WINDOW_HOURS). Default {@link DEFAULT_BACKTEST_WINDOW_HOURS}.
   */
  defaultWindowHours?: number | undefined;
  /** Where that window ends (wall time). Default {@link systemClock}. */
  clock?: Clock | undefined;
}): PolicyVersionOperations {
  const { store } = o;
  const defaultWindow = (): EvidenceWindow => {
    const nowMs = (o.clock ?? systemClock).nowMs();
    return {
      fromMs: nowMs - (o.defaultWindowHours ?? DEFAULT_BACKTEST_WINDOW_HOURS) * 3_600_000,
      toMs: nowMs,
    };
  };
  const compileOptions: CompileOptions = o.inputs === undefined ? {} : { inputs: o.inputs };
  const get = async (id: string) => {
    const version = await fromStore(store.get(id));
    if (version === undefined) throw new RiskgateError(ErrorCode.NOT_FOUND, `No policy version ${id}.`);
    return version;
  };
  return {
    list: (limit, before) => fromStore(store.list(limit, before)),
    get,
    served: () => fromStore(store.served()),
    evidence: async (id) => (o.evidence === undefined ? undefined : fromStore(o.evidence.get(id))),
    async create(c, edge, input) {
      // Kept only if it compiles: a draft nobody could activate is refused here, with why.
      const compiled = compilePolicy('policy-version', input.yaml, compileOptions);
      const errors = compiled.issues.filter((i) => i.severity === 'error');
      if (compiled.policy === undefined || errors.length > 0) {
        const issues = errors.map((e) => ({ field: 'yaml', message: formatIssue(e) }));
        throw new InputError(
          `The policy does not compile: ${errors.map(formatIssue).join('; ')}`,
          issues.length > 0 ? issues : [{ field: 'yaml', message: 'invalid policy' }],
        );
      }
      const { name, revision } = compiled.policy;
      const active = await fromStore(store.active());
      const change = {
        action: 'policy.create',
        target: name,
        detail: { revision, message: input.message },
      } as const;
      return audited(c, edge, change, () =>
        store.create({
          name,
          yaml: input.yaml,
          author: operatorNameOf(c),
          message: input.message,
          parentId: active.version?.id ?? null,
        }),
      );
    },
    async step(c, edge, id, step, window) {
      const target = await get(id);
      const asked = step === 'propose' ? (window ?? defaultWindow()) : undefined;
      const detail = { revision: target.revision, ...(asked && { window: asked }) };
      const change = { action: POLICY_VERSION_STEP_ACTIONS[step], target: target.id, detail };
      const moved = await audited(c, edge, change, () => store.step(target.id, step, operatorNameOf(c)));
      if (asked !== undefined && o.evidence?.request !== undefined)
        await fromStore(o.evidence.request(moved, asked, operatorNameOf(c)));
      return moved;
    },
    async revert(c, edge, id, message) {
      const target = await get(id);
      const change = { action: 'policy.revert', target: target.id, detail: { message } } as const;
      return audited(c, edge, change, () => store.revert(target.id, operatorNameOf(c), message));
    },
    async stage(c, edge, id, rollout) {
      const target = await get(id);
      const change = {
        action: 'policy.stage',
        target: target.id,
        detail: { ...rollout, revision: target.revision },
      } as const;
      return audited(c, edge, change, () => store.stage(target.id, rollout));
    },
    async unstage(c, edge, id) {
      const staged = id ?? (await fromStore(store.served())).staged?.version.id;
      const change = { action: 'policy.unstage', target: staged ?? 'staged', detail: {} } as const;
      await audited(c, edge, change, () => store.unstage(staged));
    },
    async schedule(c, edge, id, atMs) {
      const target = await get(id);
      const at = Number.isFinite(atMs) ? new Date(atMs).toISOString() : String(atMs);
      const change = {
        action: 'policy.schedule',
        target: target.id,
        detail: { at, revision: target.revision },
      } as const;
      try {
        return await audited(c, edge, change, () => store.schedule(target.id, atMs, operatorNameOf(c)));
      } catch (e) {
        // The store's one validation here is the time: named as the field a form or body sent.
        if (e instanceof RiskgateError && e.code === ErrorCode.INVALID_INPUT && !(e instanceof InputError))
          throw new InputError(e.message, [{ field: 'at', message: e.message }]);
        throw e;
      }
    },
    async unschedule(c, edge, id) {
      const scheduled = id ?? (await fromStore(store.served())).scheduled?.versionId;
      const change = { action: 'policy.unschedule', target: scheduled ?? 'scheduled', detail: {} } as const;
      await audited(c, edge, change, () => store.unschedule(scheduled));
    },
  };
}
