import type { VerificationStatus } from '../../signals/identifiers.ts';
import type { Observation } from './observation.ts';

/** Which of an account's observations a request selects (docs/vendor-api.md#identifiers). */
export interface UnitFilter {
  unitId?: string | undefined;
  verificationStatus?: VerificationStatus | undefined;
  interactionId?: string | undefined;
  /** Exact interactionId match (remote access tool); otherwise prefix. */
  interactionExact?: boolean;
  sdkVersionId?: string | undefined;
}

/** True when `o` satisfies `f`: omitted identifiers are unconstrained. */
export function matchesFilter(o: Observation, f: UnitFilter): boolean {
  if (f.unitId !== undefined && o.unitId !== f.unitId) return false;
  if (f.verificationStatus !== undefined && o.verificationStatus !== f.verificationStatus) return false;
  if (f.interactionId !== undefined) {
    if (
      f.interactionExact ? o.interactionId !== f.interactionId : !o.interactionId.startsWith(f.interactionId)
    ) {
      return false;
    }
  }
  if (f.sdkVersionId !== undefined && o.sdkVersionId !== f.sdkVersionId) return false;
  return true;
}

/**
 * Observations indexed by (serviceId, accountId), each account's list sorted by (time, arrival), so
 * a request scans only one account and only its window (binary search for the start).
 */
export class ObservationStore {
  private readonly tenants = new Map<string, Map<string, Observation[]>>();
  private seq = 0;
  private total = 0;

  add(input: Omit<Observation, 'seq'>): Observation {
    const obs: Observation = { ...input, seq: this.seq++ };
    let accounts = this.tenants.get(obs.serviceId);
    if (!accounts) {
      accounts = new Map();
      this.tenants.set(obs.serviceId, accounts);
    }
    let list = accounts.get(obs.accountId);
    if (!list) {
      list = [];
      accounts.set(obs.accountId, list);
    }
    // Usually an append; out-of-order arrivals go after every observation with time <= theirs.
    if (list.length === 0 || list[list.length - 1]!.timeMs <= obs.timeMs) list.push(obs);
    else list.splice(upperBound(list, obs.timeMs), 0, obs);
    this.total++;
    return obs;
  }

  /** Every observation of one account, oldest first (do not mutate). */
  account(serviceId: string, accountId: string): readonly Observation[] {
    return this.tenants.get(serviceId)?.get(accountId) ?? EMPTY;
  }

  /** The account's observations matching `filter` with `fromMs <= time <= toMs`, oldest first. */
  select(
    serviceId: string,
    accountId: string,
    filter: UnitFilter,
    fromMs: number,
    toMs: number,
  ): Observation[] {
    const list = this.account(serviceId, accountId);
    const out: Observation[] = [];
    for (let i = lowerBound(list, fromMs); i < list.length; i++) {
      const o = list[i]!;
      if (o.timeMs > toMs) break;
      if (matchesFilter(o, filter)) out.push(o);
    }
    return out;
  }

  size(): number {
    return this.total;
  }

  clear(): void {
    this.tenants.clear();
    this.total = 0;
  }
}

const EMPTY: readonly Observation[] = Object.freeze([]);

/** First index with time >= t. */
function lowerBound(list: readonly Observation[], t: number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (list[mid]!.timeMs < t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** First index with time > t. */
function upperBound(list: readonly Observation[], t: number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (list[mid]!.timeMs <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
