import { type Cidr, type IpWords, parseCidr, parseIp } from '../net/ip-cidr.ts';
import type { DeclaredList } from '../policy/policy-types.ts';
import { unstorableReason } from '../text/storable-text.ts';

/**
 * A list entry's value, checked against its list's key kind and written one way: an `ip` entry is
 * an address or a CIDR, kept as its network (`203.0.113.7/24` is `203.0.113.0/24`) in the
 * canonical text of the address (`2001:DB8::0:1` is `2001:db8::1`), so one network is one entry
 * however it was typed, and removing it finds it. Other kinds are ids, matched exactly.
 */

/** Longest entry value, characters (an id, an address or a CIDR). */
export const MAX_LIST_VALUE_LENGTH = 256;

/** The canonical entry, or why the value is not one of the list's kind. */
export type ListValueCheck = { ok: true; value: string } | { ok: false; message: string };

/** Checks and normalises `raw` as an entry of a `kind` list. */
export function normaliseListValue(kind: DeclaredList['key'], raw: string): ListValueCheck {
  const text = raw.trim();
  if (text.length === 0) return { ok: false, message: 'must not be empty' };
  if (text.length > MAX_LIST_VALUE_LENGTH)
    return { ok: false, message: `must be at most ${MAX_LIST_VALUE_LENGTH} characters` };
  if (kind !== 'ip') {
    // Also a path parameter (a removal's) and a console form's: the one rule, wherever it came in.
    const unstorable = unstorableReason(text, false);
    if (unstorable !== undefined) return { ok: false, message: unstorable };
    return { ok: true, value: text };
  }
  const cidr = text.includes('/') ? parseCidr(text) : hostCidr(text);
  if (cidr === null) {
    return {
      ok: false,
      message: 'must be an IPv4 or IPv6 address or CIDR, e.g. 203.0.113.7 or 203.0.113.0/24',
    };
  }
  return { ok: true, value: cidrText(cidr) };
}

/** An address as the CIDR of that one address. */
function hostCidr(text: string): Cidr | null {
  const words = parseIp(text);
  if (words === null) return null;
  return { words, bits: 128, text };
}

/** Whether the words are an IPv4-mapped address (`::ffff:a.b.c.d`), how IPv4 is held. */
function isV4Mapped(words: IpWords): boolean {
  return words[0] === 0 && words[1] === 0 && words[2] === 0xffff;
}

/** `words` with the bits past `bits` cleared. */
export function networkOf(words: IpWords, bits: number): IpWords {
  const out = new Uint32Array(4);
  let remaining = bits;
  for (let i = 0; i < 4; i++) {
    const take = Math.max(0, Math.min(remaining, 32));
    const mask = take === 0 ? 0 : take === 32 ? 0xffffffff : ~(0xffffffff >>> take) >>> 0;
    out[i] = (words[i]! & mask) >>> 0;
    remaining -= 32;
  }
  return out;
}

/** A CIDR's network as canonical text: an address alone for a /32 (IPv4) or /128 (IPv6). */
function cidrText(cidr: Cidr): string {
  const net = networkOf(cidr.words, cidr.bits);
  // An IPv4 CIDR parses to the mapped form with its prefix offset by 96 (src/policy/ip-cidr.ts).
  if (isV4Mapped(net) && cidr.bits >= 96) {
    const w = net[3]!;
    const address = `${w >>> 24}.${(w >>> 16) & 255}.${(w >>> 8) & 255}.${w & 255}`;
    return cidr.bits === 128 ? address : `${address}/${cidr.bits - 96}`;
  }
  const hextets: string[] = [];
  for (let i = 0; i < 4; i++) hextets.push((net[i]! >>> 16).toString(16), (net[i]! & 0xffff).toString(16));
  // The URL parser writes an IPv6 address in its canonical (RFC 5952) form.
  const address = new URL(`http://[${hextets.join(':')}]`).hostname.slice(1, -1);
  return cidr.bits === 128 ? address : `${address}/${cidr.bits}`;
}
