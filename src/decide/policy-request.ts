import type { PolicyInput } from '../policy/policy-types.ts';
import type { DecideRequest } from './decide-request.ts';

/** The policy's view of a /decide request (`request.*` in CEL). Shared by decisions and replay. */
export function toPolicyRequest(r: DecideRequest): PolicyInput['request'] {
  return {
    accountId: r.accountId,
    userId: r.userId,
    deviceId: r.deviceId,
    platform: r.platform,
    unitId: r.unitId,
    verificationStatus: r.verificationStatus,
    interactionId: r.interactionId,
    sdkVersionId: r.sdkVersionId,
    ip: r.ip,
    userAgent: r.userAgent,
    firstFactor: r.firstFactor,
    context: r.context ?? {},
  };
}
