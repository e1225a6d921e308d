import type { IncomingMessage } from 'node:http';
import type { Context } from 'hono';
import { type Cidr, cidrContains, parseCidr, parseIp } from '../net/ip-cidr.ts';

/**
 * Where a request came from: the socket's remote address, or, when that socket is a trusted proxy
 * (RISKGATE_TRUSTED_PROXIES), the address the proxy saw. Used for the audit trail's `from` and to
 * decide whether a trusted identity header (src/edge/caller-auth.ts) may be believed.
 */

/**
 * Parses RISKGATE_TRUSTED_PROXIES entries (an IP, or a CIDR); a string naming the first malformed
 * one otherwise. A bare IP is its own /32 (/128).
 */
export function parseTrustedProxies(entries: readonly string[]): Cidr[] | string {
  const proxies: Cidr[] = [];
  for (const entry of entries) {
    const cidr = entry.includes('/')
      ? parseCidr(entry)
      : parseIp(entry) === null
        ? null
        : parseCidr(`${entry}/${entry.includes(':') ? 128 : 32}`);
    if (cidr === null)
      return `lists ${JSON.stringify(entry.slice(0, 60))}, which is neither an IP address nor a CIDR`;
    proxies.push(cidr);
  }
  return proxies;
}

/** The socket's remote address (as @hono/node-server hands the request over), IPv4-mapped shown as IPv4. */
export function socketAddressOf(c: Context): string | undefined {
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  const address = incoming?.socket?.remoteAddress;
  return address === undefined ? undefined : plainAddress(address);
}

function plainAddress(address: string): string {
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
}

function within(proxies: readonly Cidr[], address: string | undefined): boolean {
  if (address === undefined) return false;
  const ip = parseIp(address);
  return ip !== null && proxies.some((p) => cidrContains(p, ip));
}

/** Whether the request's socket is one of `proxies`. */
export function fromTrustedProxy(c: Context, proxies: readonly Cidr[]): boolean {
  return proxies.length > 0 && within(proxies, socketAddressOf(c));
}

/**
 * The client's address: the socket's, or, from a trusted proxy, the last `X-Forwarded-For` hop
 * that is not itself a trusted proxy. Read from the right, because each proxy appends the address
 * it saw: the entries left of the trusted proxies' are the client's own words and may be forged.
 * `unknown` when there is no socket (a request built in a test).
 */
export function clientAddressOf(c: Context, proxies: readonly Cidr[]): string {
  const socket = socketAddressOf(c);
  if (socket === undefined) return 'unknown';
  if (!within(proxies, socket)) return socket;
  const hops = (c.req.header('x-forwarded-for') ?? '')
    .split(',')
    .map((h) => h.trim())
    .filter((h) => h.length > 0);
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i]!;
    if (parseIp(hop) === null) return socket;
    if (!within(proxies, hop)) return plainAddress(hop);
  }
  return socket;
}
