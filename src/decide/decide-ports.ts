import type { AdminDevice, AdminUser } from '../admin/admin-schemas.ts';
import type { CompiledPolicy, PolicySignalName, SignalResponses } from '../policy/policy-types.ts';
import type { CallOptions, UpstreamResult } from '../upstream/upstream-result.ts';
import type { SignalQueries } from './signal-queries.ts';

/**
 * What the decision service needs from the upstream clients and the policy engine, and nothing
 * more. src/main.ts binds them to the real clients; tests bind them to the same real clients
 * against the sandbox.
 */

/** Fetches one Trust Signals signal. Resolves (never rejects) with an `UpstreamResult`. */
export type SignalFetcher = <N extends PolicySignalName>(
  name: N,
  query: SignalQueries[N],
  options: CallOptions,
) => Promise<UpstreamResult<SignalResponses[N]>>;

/** A user's fields that `PUT /users/{id}` can change. */
export interface AdminUserChanges {
  status?: 'enabled' | 'bypass' | 'locked_out' | 'disabled';
  allowed_factors?: string[];
}

export interface OneTimeCode {
  /** Spaced digits, as the vendor sends them. */
  oneTimeCode: string;
  /** Unix seconds. */
  expiration: number;
}

/** The Admin API calls /decide and its actions make. Resolve (never reject) with `UpstreamResult`. */
export interface AdminPort {
  getUser(userId: string, options: CallOptions): Promise<UpstreamResult<AdminUser>>;
  getUserDevices(userId: string, options: CallOptions): Promise<UpstreamResult<AdminDevice[]>>;
  /** `PUT /users/{id}`; a 304 (nothing changed) is success. */
  updateUser(
    userId: string,
    changes: AdminUserChanges,
    options: CallOptions,
  ): Promise<UpstreamResult<unknown>>;
  /** `DELETE /devices/{id}`. */
  archiveDevice(deviceId: string, options: CallOptions): Promise<UpstreamResult<unknown>>;
  createOneTimeCode(
    userId: string,
    params: { length?: number | undefined; validSecs?: number | undefined },
    options: CallOptions,
  ): Promise<UpstreamResult<OneTimeCode>>;
}

/** The active policy; hot reload swaps what `current()` returns. */
export interface PolicySource {
  current(): CompiledPolicy;
}
