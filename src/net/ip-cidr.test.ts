import { describe, expect, it } from 'vitest';
import { cidrContains, parseCidr, parseIp, parseIpShared } from './ip-cidr.ts';

const inside = (cidr: string, ip: string) => {
  const c = parseCidr(cidr);
  const w = parseIp(ip);
  if (!c || !w) throw new Error(`unparsable ${cidr} ${ip}`);
  return cidrContains(c, w);
};

describe('CIDR matching', () => {
  it('matches IPv4 prefixes at their edges', () => {
    expect(inside('10.1.0.0/16', '10.1.255.255')).toBe(true);
    expect(inside('10.1.0.0/16', '10.2.0.0')).toBe(false);
    expect(inside('203.0.113.7/32', '203.0.113.7')).toBe(true);
    expect(inside('203.0.113.7/32', '203.0.113.8')).toBe(false);
    expect(inside('0.0.0.0/0', '8.8.8.8')).toBe(true);
    expect(inside('198.18.0.0/15', '198.19.255.1')).toBe(true);
    expect(inside('198.18.0.0/15', '198.20.0.1')).toBe(false);
  });

  it('matches IPv6 prefixes, with :: compression and non-word-aligned lengths', () => {
    expect(inside('2001:db8::/32', '2001:db8:ffff::1')).toBe(true);
    expect(inside('2001:db8::/32', '2001:db9::1')).toBe(false);
    expect(inside('2001:db8:dead::/48', '2001:db8:dead:beef::1')).toBe(true);
    expect(inside('2001:db8:8000::/33', '2001:db8:7fff::1')).toBe(false);
    expect(inside('2001:db8:8000::/33', '2001:db8:8000::1')).toBe(true);
    expect(inside('::/0', 'fe80::1%eth0')).toBe(true);
    expect(inside('::1/128', '::1')).toBe(true);
  });

  it('treats IPv4-mapped IPv6 as IPv4 and keeps IPv4 prefixes off native IPv6', () => {
    expect(inside('192.0.2.0/24', '::ffff:192.0.2.33')).toBe(true);
    expect(inside('0.0.0.0/0', '2001:db8::1')).toBe(false);
  });

  it('refuses malformed addresses and prefixes', () => {
    expect(parseIp('300.1.1.1')).toBeNull();
    expect(parseIp('hello')).toBeNull();
    expect(parseCidr('10.0.0.0/33')).toBeNull();
    expect(parseCidr('10.0.0.0')).toBeNull();
    expect(parseCidr('2001:db8::/129')).toBeNull();
    expect(parseCidr('10.0.0.0/x')).toBeNull();
  });
});

describe('parseIpShared', () => {
  it('parses as parseIp does, once for the same address asked again', () => {
    for (const text of ['198.18.4.20', '2001:db8:dead::1', '::ffff:1.2.3.4', 'not an ip', '']) {
      const first = parseIpShared(text);
      expect(first).toEqual(parseIp(text));
      // The same words, not a second parse (a decision asks about its request.ip several times).
      expect(parseIpShared(text)).toBe(first);
    }
    const a = parseIpShared('10.0.0.1');
    const b = parseIpShared('10.0.0.2');
    expect(b).not.toBe(a);
    expect(b).toEqual(parseIp('10.0.0.2'));
    expect(parseIpShared('10.0.0.1')).toEqual(parseIp('10.0.0.1'));
  });
});
