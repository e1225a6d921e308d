import { isIP } from 'node:net';

/**
 * IPv4/IPv6 addresses as four 32-bit words. IPv4 is stored as its IPv4-mapped IPv6 form
 * (`::ffff:a.b.c.d`), so `1.2.3.4` and `::ffff:1.2.3.4` are the same address and an IPv4 CIDR
 * never matches a native IPv6 address.
 */
export type IpWords = Uint32Array;

export interface Cidr {
  words: IpWords;
  /** Prefix length in the 128-bit space (IPv4 prefixes are offset by 96). */
  bits: number;
  text: string;
}

/** Dotted-quad parse without allocation (this runs once per decision for the override lists). */
function parseV4Into(s: string, out: IpWords): boolean {
  let value = 0;
  let octet = 0;
  let digits = 0;
  let dots = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 46) {
      if (digits === 0 || ++dots > 3) return false;
      value = value * 256 + octet;
      octet = 0;
      digits = 0;
    } else if (c >= 48 && c <= 57 && digits < 3) {
      octet = octet * 10 + (c - 48);
      digits++;
      if (octet > 255) return false;
    } else return false;
  }
  if (dots !== 3 || digits === 0) return false;
  out[0] = 0;
  out[1] = 0;
  out[2] = 0xffff;
  out[3] = (value * 256 + octet) >>> 0;
  return true;
}

/** Parses an IP address; `null` when it is not one. Zone ids (`fe80::1%eth0`) are dropped. */
export function parseIp(input: string): IpWords | null {
  const out = new Uint32Array(4);
  if (parseV4Into(input, out)) return out;
  const pct = input.indexOf('%');
  const s = pct >= 0 ? input.slice(0, pct) : input;
  const family = isIP(s);
  if (family !== 6) return null;
  const hextets = new Array<number>(8).fill(0);
  let head = s;
  let tail = '';
  const dbl = s.indexOf('::');
  if (dbl >= 0) {
    head = s.slice(0, dbl);
    tail = s.slice(dbl + 2);
  }
  const toHextets = (part: string): number[] | null => {
    if (part === '') return [];
    const res: number[] = [];
    for (const h of part.split(':')) {
      if (h.includes('.')) {
        const v4 = new Uint32Array(4);
        if (!parseV4Into(h, v4)) return null;
        res.push(v4[3]! >>> 16, v4[3]! & 0xffff);
      } else res.push(Number.parseInt(h, 16));
    }
    return res;
  };
  const h = toHextets(head);
  const t = toHextets(tail);
  if (!h || !t) return null;
  for (let i = 0; i < h.length; i++) hextets[i] = h[i]!;
  for (let i = 0; i < t.length; i++) hextets[8 - t.length + i] = t[i]!;
  for (let i = 0; i < 4; i++) out[i] = ((hextets[2 * i]! << 16) | hextets[2 * i + 1]!) >>> 0;
  return out;
}

let lastParsedText: string | undefined;
let lastParsed: IpWords | null = null;

/**
 * {@link parseIp} of the address asked about last, kept: one decision asks about its `request.ip`
 * in the overrides, the snoozes, each list lookup and each `inCidr` call, and parses it once. The
 * words are shared between callers: read them, never write them.
 */
export function parseIpShared(text: string): IpWords | null {
  if (text !== lastParsedText) {
    lastParsed = parseIp(text);
    lastParsedText = text;
  }
  return lastParsed;
}

/** Parses `addr/bits`; `null` when malformed. */
export function parseCidr(text: string): Cidr | null {
  const slash = text.indexOf('/');
  if (slash < 0) return null;
  const addrText = text.slice(0, slash);
  const bitsText = text.slice(slash + 1);
  if (!/^\d{1,3}$/.test(bitsText)) return null;
  const words = parseIp(addrText);
  if (!words) return null;
  const v4 = isIP(addrText) === 4;
  const bits = Number(bitsText) + (v4 ? 96 : 0);
  if (bits > 128 || (v4 && bits - 96 > 32)) return null;
  return { words, bits, text };
}

/** Whether `ip` lies inside `cidr`. */
export function cidrContains(cidr: Cidr, ip: IpWords): boolean {
  let remaining = cidr.bits;
  for (let i = 0; i < 4 && remaining > 0; i++) {
    const take = Math.min(remaining, 32);
    const mask = take === 32 ? 0xffffffff : ~(0xffffffff >>> take) >>> 0;
    if (((cidr.words[i]! ^ ip[i]!) & mask) >>> 0 !== 0) return false;
    remaining -= take;
  }
  return true;
}
