import type { AdminDevice, AdminUser } from '../../admin/admin-schemas.ts';
import { DEVICE_FIELDS, DeviceView, USER_FIELDS, UserView } from '../cel-environment.ts';
import { fillDevices, fillUser } from '../policy-activation.ts';
import { type InputRow, inputRow, shortText, unavailableReport } from './input-row.ts';
import { MISSING, MISSING_IDENTIFIERS } from './unavailable-reason.ts';

/**
 * The Admin API rows: the user (`user` in CEL) and their devices (`devices`), read through the
 * client's shared cache, which bounds a caller by the deadline signal alone (their own timeout is
 * `gather`'s). Unavailable, each keeps its reason in the policy input's `adminUnavailable`.
 */

/**
 * The Admin user. With subject binding it is read even when no policy uses it: riskgate must know
 * whose account it would act on.
 */
export const ADMIN_USER_ROW: InputRow<unknown, 'adminUser'> = inputRow<AdminUser, 'adminUser'>({
  name: 'adminUser',
  callName: 'admin-user',
  cel: {
    variable: 'user',
    type: 'User',
    types: [{ name: 'User', ctor: UserView, fields: USER_FIELDS }],
    description: 'The Admin API user.',
    availability: true,
  },
  readBy: (policy) => policy.requirements.adminUser,
  needed: (ctx) =>
    ctx.policy.requirements.adminUser ||
    ctx.shadow?.requirements.adminUser === true ||
    (ctx.bindsSubject && ctx.request.userId !== undefined),
  applies: (ctx) => (ctx.request.userId === undefined ? MISSING_IDENTIFIERS : 'ok'),
  timeoutMs: (ctx) => ctx.policy.adminSettings?.user?.timeoutMs ?? ctx.budgetMs,
  fetch: (ctx, call) => ctx.ports.admin.getUserCached(ctx.request.userId!, call),
  land: (draft, outcome) => {
    if (outcome.status === 'ok') draft.values.user = outcome.value;
    else {
      draft.values.adminUnavailable ??= {};
      draft.values.adminUnavailable.user = outcome.reason;
    }
  },
  reason: (values) => (values.user === undefined ? (values.adminUnavailable?.user ?? MISSING) : undefined),
  fill: (act, input) => fillUser(act, input.user, input.adminUnavailable?.user),
  report: (values, treatment) => {
    const user = values.user;
    const reason = values.adminUnavailable?.user;
    if (reason !== undefined || user === undefined) return unavailableReport(reason ?? MISSING, treatment);
    return {
      status: 'ok',
      result: { status: user.status, failed_attempts: user.failed_attempts, max_attempts: user.max_attempts },
    };
  },
  describe: (values) => {
    const label = 'Admin user';
    const user = values.user;
    if (user !== undefined)
      return {
        label,
        facts: [
          ['status', shortText(user.status)],
          ['username', shortText(user.username)],
        ],
      };
    const reason = values.adminUnavailable?.user;
    return reason === undefined ? { label, note: 'not read' } : { label, unavailable: reason };
  },
});

/** The user's devices. */
export const ADMIN_DEVICES_ROW: InputRow<unknown, 'adminDevices'> = inputRow<
  { devices: AdminDevice[] },
  'adminDevices'
>({
  name: 'adminDevices',
  callName: 'admin-devices',
  cel: {
    variable: 'devices',
    type: 'list<Device>',
    types: [{ name: 'Device', ctor: DeviceView, fields: DEVICE_FIELDS }],
    description: "The user's Admin API devices.",
    availability: false,
  },
  readBy: (policy) => policy.requirements.adminDevices,
  needed: (ctx) => ctx.policy.requirements.adminDevices || ctx.shadow?.requirements.adminDevices === true,
  applies: (ctx) => (ctx.request.userId === undefined ? MISSING_IDENTIFIERS : 'ok'),
  timeoutMs: (ctx) => ctx.policy.adminSettings?.devices?.timeoutMs ?? ctx.budgetMs,
  fetch: (ctx, call) => ctx.ports.admin.getUserDevicesCached(ctx.request.userId!, undefined, call),
  land: (draft, outcome) => {
    if (outcome.status === 'ok') draft.values.devices = outcome.value.devices;
    else {
      draft.values.adminUnavailable ??= {};
      draft.values.adminUnavailable.devices = outcome.reason;
    }
  },
  reason: (values) => values.adminUnavailable?.devices,
  fill: (act, input) => fillDevices(act, input.devices, input.adminUnavailable?.devices),
  report: (values, treatment) => {
    const reason = values.adminUnavailable?.devices;
    return reason === undefined
      ? { status: 'ok', result: { count: values.devices.length } }
      : unavailableReport(reason, treatment);
  },
  describe: (values) => {
    const label = 'Admin devices';
    const reason = values.adminUnavailable?.devices;
    return reason === undefined
      ? { label, note: `${values.devices.length} device(s)` }
      : { label, unavailable: reason };
  },
});
