import type { AdminPort } from '../decide/decide-ports.ts';
import type { PolicyAction } from '../policy/policy-types.ts';
import type { ActionJob } from './action-queue.ts';

/**
 * What each policy action means as Admin API calls. `planActions` turns a decision's actions into
 * queue jobs (one per target), or says why an action cannot run for this request.
 */

export interface ActionPlan {
  action: PolicyAction;
  /** Jobs to enqueue; empty when `skipped` is set. */
  jobs: ActionJob[];
  /** Why nothing can be done (a required id is missing from the request). */
  skipped?: string;
}

export interface ActionTargets {
  decisionId: string;
  userId: string | undefined;
  deviceId: string | undefined;
  /** The decision's trace, when tracing is on: each attempt's client span is its child. */
  traceparent?: string | undefined;
}

/** Plans the after-answer actions of a decision (the one-time code is fetched before answering). */
export function planActions(
  actions: readonly PolicyAction[],
  t: ActionTargets,
  admin: AdminPort,
): ActionPlan[] {
  const plans: ActionPlan[] = [];
  for (const action of actions) {
    switch (action.type) {
      case 'one_time_code':
        break;
      case 'lock_out_user':
        plans.push(
          t.userId === undefined
            ? { action, jobs: [], skipped: 'no_user_id' }
            : {
                action,
                jobs: [
                  job(t, action, t.userId, (o) => admin.updateUser(t.userId!, { status: 'locked_out' }, o)),
                ],
              },
        );
        break;
      case 'restrict_factors': {
        const factors = action.allowedFactors ?? [];
        plans.push(
          t.userId === undefined
            ? { action, jobs: [], skipped: 'no_user_id' }
            : {
                action,
                jobs: [
                  job(t, action, t.userId, (o) =>
                    admin.updateUser(t.userId!, { allowed_factors: factors }, o),
                  ),
                ],
              },
        );
        break;
      }
      case 'archive_device': {
        const ids = action.deviceIds ?? (t.deviceId === undefined ? [] : [t.deviceId]);
        plans.push(
          ids.length === 0
            ? { action, jobs: [], skipped: 'no_device_id' }
            : {
                action,
                jobs: ids.map((id) => job(t, action, id, (o) => admin.deleteDevice(id, o))),
              },
        );
        break;
      }
    }
  }
  return plans;
}

function job(
  t: ActionTargets,
  action: PolicyAction,
  target: string,
  attempt: ActionJob['attempt'],
): ActionJob {
  return {
    key: `${t.decisionId}:${action.type}:${target}`,
    decisionId: t.decisionId,
    type: action.type,
    target,
    attempt:
      t.traceparent === undefined
        ? attempt
        : (options) => attempt({ ...options, traceparent: t.traceparent }),
  };
}
