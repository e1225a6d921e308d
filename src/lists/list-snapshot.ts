import { type IpWords, parseCidr, parseIp } from '../net/ip-cidr.ts';
import type { ListLookup } from '../policy/policy-types.ts';
import { networkOf } from './list-values.ts';

/**
 * The runtime lists as one process holds them in memory: what a decision reads, never waiting on
 * the database. Exact entries (ids) are a map from value to expiry; an IP list's CIDRs are kept
 * per prefix length, each a map from the network to its expiry, so a lookup is one map read per
 * prefix length the list uses (a handful), whatever the list's size. Expiry is checked at lookup:
 * an entry stops matching at its expiry, not at the next refresh.
 */

/** One entry as the snapshot is built from it (src/lists/list-store.ts). */
export interface SnapshotEntry {
  list: string;
  /** Canonical (src/lists/list-values.ts). */
  value: string;
  kind: string;
  /** Epoch milliseconds; null: never expires. */
  expiresMs: number | null;
}

/** One list's entries. */
class ListIndex {
  /** value → expiry (Infinity: never). */
  readonly exact = new Map<string, number>();
  /** prefix length (0-128, IPv4 offset by 96) → network key → expiry. */
  readonly networks = new Map<number, Map<string, number>>();
  /** The prefix lengths in `networks`, longest first. */
  prefixLengths: number[] = [];

  add(e: SnapshotEntry): void {
    const expiresMs = e.expiresMs ?? Number.POSITIVE_INFINITY;
    if (e.kind !== 'ip') {
      this.exact.set(e.value, Math.max(expiresMs, this.exact.get(e.value) ?? 0));
      return;
    }
    const cidr = parseCidr(
      e.value.includes('/') ? e.value : `${e.value}/${e.value.includes(':') ? 128 : 32}`,
    );
    if (cidr === null) return; // stored canonical: only a hand-edited row gets here
    let byNetwork = this.networks.get(cidr.bits);
    if (byNetwork === undefined) {
      byNetwork = new Map();
      this.networks.set(cidr.bits, byNetwork);
      this.prefixLengths = [...this.networks.keys()].sort((a, b) => b - a);
    }
    const key = networkKey(cidr.words, cidr.bits);
    byNetwork.set(key, Math.max(expiresMs, byNetwork.get(key) ?? 0));
  }

  contains(value: string, nowMs: number): boolean {
    const exact = this.exact.get(value);
    if (exact !== undefined && exact > nowMs) return true;
    if (this.prefixLengths.length === 0) return false;
    const words = parseIp(value);
    if (words === null) return false;
    for (const bits of this.prefixLengths) {
      const expiresMs = this.networks.get(bits)!.get(networkKey(words, bits));
      if (expiresMs !== undefined && expiresMs > nowMs) return true;
    }
    return false;
  }

  get size(): number {
    let n = this.exact.size;
    for (const m of this.networks.values()) n += m.size;
    return n;
  }
}

function networkKey(words: IpWords, bits: number): string {
  const n = networkOf(words, bits);
  return `${n[0]}.${n[1]}.${n[2]}.${n[3]}`;
}

/** An immutable snapshot of every list's entries (a refresh builds a new one). */
export class ListSnapshot implements ListLookup {
  readonly #lists = new Map<string, ListIndex>();

  constructor(entries: Iterable<SnapshotEntry>) {
    for (const e of entries) {
      let index = this.#lists.get(e.list);
      if (index === undefined) {
        index = new ListIndex();
        this.#lists.set(e.list, index);
      }
      index.add(e);
    }
  }

  contains(name: string, value: string, nowMs: number): boolean {
    return this.#lists.get(name)?.contains(value, nowMs) ?? false;
  }

  /** Entries held for `name` (expired ones included until the next refresh). */
  size(name: string): number {
    return this.#lists.get(name)?.size ?? 0;
  }
}

export const EMPTY_SNAPSHOT = new ListSnapshot([]);
