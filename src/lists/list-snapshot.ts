import { type IpWords, parseCidr, parseIpShared } from '../net/ip-cidr.ts';
import type { ListLookup } from '../policy/policy-types.ts';

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

/** `word` with the bits past the first `take` (0-32) cleared. */
function maskWord(word: number, take: number): number {
  if (take <= 0) return 0;
  if (take >= 32) return word >>> 0;
  return (word & (~(0xffffffff >>> take) >>> 0)) >>> 0;
}

/** Whether the words are an IPv4-mapped address (`::ffff:a.b.c.d`), how IPv4 is held. */
function isV4Mapped(w: IpWords): boolean {
  return w[0] === 0 && w[1] === 0 && w[2] === 0xffff;
}

/**
 * Networks by prefix length: each a map from the network to its expiry. IPv4 networks (in the
 * mapped space, prefix 96 and longer) are keyed by their last word, a number; the others by their
 * words as text. A lookup is one map read per prefix length present, with no allocation for IPv4.
 */
class Networks {
  readonly v4 = new Map<number, Map<number, number>>();
  readonly v6 = new Map<number, Map<string, number>>();
  v4Lengths: number[] = [];
  v6Lengths: number[] = [];
  /** An IPv6 network holds IPv4-mapped addresses (`::/0`, `::ffff:0:0/96` and the like). */
  v6CoversMapped = false;

  add(words: IpWords, bits: number, expiresMs: number): void {
    if (bits >= 96 && isV4Mapped(words)) {
      let m = this.v4.get(bits);
      if (m === undefined) {
        m = new Map();
        this.v4.set(bits, m);
        this.v4Lengths = [...this.v4.keys()].sort((a, b) => b - a);
      }
      const key = maskWord(words[3]!, bits - 96);
      m.set(key, Math.max(expiresMs, m.get(key) ?? 0));
      return;
    }
    let m = this.v6.get(bits);
    if (m === undefined) {
      m = new Map();
      this.v6.set(bits, m);
      this.v6Lengths = [...this.v6.keys()].sort((a, b) => b - a);
    }
    const key = v6Key(words, bits);
    m.set(key, Math.max(expiresMs, m.get(key) ?? 0));
    if (v6Key(MAPPED_ANY, bits) === key) this.v6CoversMapped = true;
  }

  contains(words: IpWords, nowMs: number): boolean {
    const mapped = isV4Mapped(words);
    if (mapped) {
      const last = words[3]!;
      for (const bits of this.v4Lengths) {
        const expiresMs = this.v4.get(bits)!.get(maskWord(last, bits - 96));
        if (expiresMs !== undefined && expiresMs > nowMs) return true;
      }
      if (!this.v6CoversMapped) return false;
    }
    for (const bits of this.v6Lengths) {
      const expiresMs = this.v6.get(bits)!.get(v6Key(words, bits));
      if (expiresMs !== undefined && expiresMs > nowMs) return true;
    }
    return false;
  }

  get size(): number {
    let n = 0;
    for (const m of this.v4.values()) n += m.size;
    for (const m of this.v6.values()) n += m.size;
    return n;
  }
}

/** `::ffff:0.0.0.0`: a network holding it (at 96 bits or shorter) holds every mapped address. */
const MAPPED_ANY = new Uint32Array([0, 0, 0xffff, 0]);

/** A network's key: its words masked to `bits` (0-128), as text (the rule snoozes index by it too). */
export function v6Key(w: IpWords, bits: number): string {
  return `${maskWord(w[0]!, bits)}.${maskWord(w[1]!, bits - 32)}.${maskWord(w[2]!, bits - 64)}.${maskWord(w[3]!, bits - 96)}`;
}

/** One list's entries. */
class ListIndex {
  /** value → expiry (Infinity: never). */
  readonly exact = new Map<string, number>();
  readonly networks = new Networks();

  /** Adds `e`; false when its value cannot be used (an `ip` row that is not an address or CIDR). */
  add(e: SnapshotEntry): boolean {
    const expiresMs = e.expiresMs ?? Number.POSITIVE_INFINITY;
    if (e.kind !== 'ip') {
      this.exact.set(e.value, Math.max(expiresMs, this.exact.get(e.value) ?? 0));
      return true;
    }
    const cidr = parseCidr(
      e.value.includes('/') ? e.value : `${e.value}/${e.value.includes(':') ? 128 : 32}`,
    );
    // Stored canonical: only a hand-edited row gets here. Counted, never silently gone.
    if (cidr === null) return false;
    this.networks.add(cidr.words, cidr.bits, expiresMs);
    return true;
  }

  contains(value: string, nowMs: number): boolean {
    const exact = this.exact.get(value);
    if (exact !== undefined && exact > nowMs) return true;
    if (this.networks.size === 0) return false;
    const words = parseIpShared(value);
    return words !== null && this.networks.contains(words, nowMs);
  }

  get size(): number {
    return this.exact.size + this.networks.size;
  }
}

/** An immutable snapshot of every list's entries (a refresh builds a new one). */
export class ListSnapshot implements ListLookup {
  readonly #lists = new Map<string, ListIndex>();

  /** Rows that could not be used (`<list>:<value>`): see `PolledSnapshot`'s unreadable rows. */
  readonly unreadable: readonly string[];

  constructor(entries: Iterable<SnapshotEntry>) {
    const unreadable: string[] = [];
    for (const e of entries) {
      let index = this.#lists.get(e.list);
      if (index === undefined) {
        index = new ListIndex();
        this.#lists.set(e.list, index);
      }
      if (!index.add(e)) unreadable.push(`${e.list}:${e.value.slice(0, 64)}`);
    }
    this.unreadable = unreadable;
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
