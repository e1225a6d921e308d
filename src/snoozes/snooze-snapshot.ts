import { v6Key } from '../lists/list-snapshot.ts';
import { type IpWords, parseCidr, parseIpShared } from '../net/ip-cidr.ts';
import type { PolicyRequest } from '../policy-input/policy-request.ts';
import type { SnoozedRule, SnoozeEntity, SnoozeLookup } from '../policy-input/rule-snooze.ts';

/**
 * The active rule snoozes as one process holds them: what a decision reads, never waiting on the
 * database. By rule first, so a rule nobody snoozed costs one map read; then ids exactly (account,
 * user, unit: a map read each) and IP snoozes as networks by prefix length (a map read per length
 * present, as the lists do), whatever the number of snoozes.
 * Expiry is checked at lookup: a snooze stops at its `until`, not at the next refresh.
 */

/** One active snooze as the snapshot is built from it (src/snoozes/snooze-store.ts). */
export interface SnoozeRow {
  id: string;
  ruleId: string;
  entity: SnoozeEntity;
  /** Canonical (src/lists/list-values.ts): a CIDR for `ip`. */
  value: string;
  untilMs: number;
}

interface Held {
  untilMs: number;
  match: SnoozedRule;
}

class RuleSnoozes {
  /** entity → value → its snoozes (several: the latest `until` answers). */
  readonly exact = new Map<SnoozeEntity, Map<string, Held[]>>();
  /** IP snoozes by prefix length: network key → its snoozes; a lookup is one read per length. */
  readonly networks = new Map<number, Map<string, Held[]>>();
  lengths: number[] = [];

  /** Adds `row`; false when its value cannot be used (an `ip` snooze that is not an address or CIDR). */
  add(row: SnoozeRow): boolean {
    const held: Held = {
      untilMs: row.untilMs,
      match: Object.freeze({
        id: row.ruleId,
        snoozeId: row.id,
        entity: row.entity,
        value: row.value,
        until: new Date(row.untilMs).toISOString(),
      }),
    };
    if (row.entity === 'ip') {
      const cidr = parseCidr(
        row.value.includes('/') ? row.value : `${row.value}/${row.value.includes(':') ? 128 : 32}`,
      );
      // Stored canonical: only a hand-edited row gets here. Counted, never silently gone.
      if (cidr === null) return false;
      let byKey = this.networks.get(cidr.bits);
      if (byKey === undefined) {
        byKey = new Map();
        this.networks.set(cidr.bits, byKey);
        this.lengths = [...this.networks.keys()];
      }
      push(byKey, v6Key(cidr.words, cidr.bits), held);
      return true;
    }
    let byValue = this.exact.get(row.entity);
    if (byValue === undefined) {
      byValue = new Map();
      this.exact.set(row.entity, byValue);
    }
    push(byValue, row.value, held);
    return true;
  }

  match(request: PolicyRequest, nowMs: number): SnoozedRule | undefined {
    let best: Held | undefined;
    if (this.exact.size > 0) {
      best = latest(best, this.exact.get('accountId')?.get(request.accountId), nowMs);
      if (request.userId !== undefined)
        best = latest(best, this.exact.get('userId')?.get(request.userId), nowMs);
      if (request.unitId !== undefined)
        best = latest(best, this.exact.get('unitId')?.get(request.unitId), nowMs);
    }
    if (this.lengths.length > 0 && request.ip !== undefined) {
      const ip: IpWords | null = parseIpShared(request.ip);
      if (ip !== null) {
        for (const bits of this.lengths)
          best = latest(best, this.networks.get(bits)!.get(v6Key(ip, bits)), nowMs);
      }
    }
    return best?.match;
  }
}

/** The one of `best` and `list`'s snoozes active at `nowMs` that ends last. */
function latest(best: Held | undefined, list: Held[] | undefined, nowMs: number): Held | undefined {
  if (list === undefined) return best;
  for (const held of list) {
    if (held.untilMs > nowMs && (best === undefined || held.untilMs > best.untilMs)) best = held;
  }
  return best;
}

function push<K>(map: Map<K, Held[]>, key: K, held: Held): void {
  const list = map.get(key);
  if (list === undefined) map.set(key, [held]);
  else list.push(held);
}

/** An immutable snapshot of the active snoozes (a refresh builds a new one). */
export class SnoozeSnapshot implements SnoozeLookup {
  readonly #rules = new Map<string, RuleSnoozes>();
  /** Snoozes held (expired ones included until the next refresh). */
  readonly size: number;
  /** Snooze ids whose rows could not be used: see `PolledSnapshot`'s unreadable rows. */
  readonly unreadable: readonly string[];

  constructor(rows: Iterable<SnoozeRow>) {
    let size = 0;
    const unreadable: string[] = [];
    for (const row of rows) {
      let rule = this.#rules.get(row.ruleId);
      if (rule === undefined) {
        rule = new RuleSnoozes();
        this.#rules.set(row.ruleId, rule);
      }
      if (rule.add(row)) size++;
      else unreadable.push(row.id);
    }
    this.size = size;
    this.unreadable = unreadable;
  }

  match(ruleId: string, request: PolicyRequest, nowMs: number): SnoozedRule | undefined {
    return this.#rules.get(ruleId)?.match(request, nowMs);
  }
}
