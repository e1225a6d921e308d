import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import {
  buildCanonicalString,
  canonicalizeHost,
  canonicalizeQuery,
  createSigningKey,
  formatRfc2822,
  hexSignaturesEqual,
  parseBasicAuthorization,
  parseRfc2822,
  signCanonicalString,
  signRequest,
} from './hmac-signature.ts';

const SERVICE_ID = '7ef5fbc3-8a0d-4a44-8a5c-3b1f2a1e9c10';
const KEY = 'admin-api-key-example';
const DATE = 'Tue, 02 Jan 2024 10:00:00 +0000';

describe('HMAC request signing (docs/vendor-api.md#signing-test-vectors)', () => {
  it('signs the GET vector with a canonicalised query', () => {
    const canonical = buildCanonicalString({
      date: DATE,
      method: 'get',
      host: 'API.Example.COM',
      path: '/srv/admin/v1/users',
      query: new URLSearchParams('username=jo%20hn&status=enabled&limit=10'),
    });
    expect(canonical).toBe(
      `${DATE}\nGET\napi.example.com\n/srv/admin/v1/users\nlimit=10&status=enabled&username=jo%20hn`,
    );
    expect(signCanonicalString(canonical, KEY)).toBe(
      '71d41fc64fcf510a63dcf1ce9df19476de521cfc41723e65f0b6eb9458b1f29c',
    );
  });

  it('signs the POST vector over the exact body bytes', () => {
    const canonical = buildCanonicalString({
      date: DATE,
      method: 'POST',
      host: 'API.Example.COM',
      path: '/srv/admin/v1/users',
      body: '{"display_name":"John Doe","valid_secs":600}',
    });
    expect(signCanonicalString(canonical, KEY)).toBe(
      '89ecd5e391ea896889e92065c9ffbe84187cb499e3b726cd0867c2e3d886a98e',
    );
  });

  it('builds a Basic header that decodes back to id and signature', () => {
    const header = signRequest({ date: DATE, method: 'GET', host: 'h', path: '/p' }, SERVICE_ID, KEY);
    const parsed = parseBasicAuthorization(header);
    expect(parsed?.id).toBe(SERVICE_ID);
    expect(parsed?.signature).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('canonical pieces', () => {
  it('encodes spaces as %20, plus and unicode as percent bytes, and sorts by key then value', () => {
    expect(
      canonicalizeQuery([
        ['b', 'x y'],
        ['a', '2'],
        ['a', '1'],
        ['c', '+é'],
      ]),
    ).toBe('a=1&a=2&b=x%20y&c=%2B%C3%A9');
  });
  it('drops only the default port', () => {
    expect(canonicalizeHost('Host.Example:443')).toBe('host.example');
    expect(canonicalizeHost('127.0.0.1:4010', 'http:')).toBe('127.0.0.1:4010');
    expect(canonicalizeHost('localhost:80', 'http:')).toBe('localhost');
  });
  it('formats and parses RFC 2822 dates', () => {
    const d = new Date(Date.UTC(2024, 0, 2, 10, 0, 0));
    expect(formatRfc2822(d)).toBe(DATE);
    expect(parseRfc2822(DATE)?.getTime()).toBe(d.getTime());
    expect(parseRfc2822('2024-01-02T10:00:00Z')).toBeUndefined();
  });
  it('compares hex signatures case-insensitively', () => {
    expect(hexSignaturesEqual('ABCDEF', 'abcdef')).toBe(true);
    expect(hexSignaturesEqual('abcdef', 'abcdee')).toBe(false);
    expect(hexSignaturesEqual('abc', 'abcdef')).toBe(false);
  });

  it('a key object made once signs exactly as the string key, and never shows the key', () => {
    const canonical = `${DATE}\nGET\napi.example.com\n/srv/admin/v1/users\nlimit=10`;
    const key = createSigningKey(KEY);
    expect(signCanonicalString(canonical, key)).toBe(signCanonicalString(canonical, KEY));
    expect(signCanonicalString(canonical, createSigningKey('another-key'))).not.toBe(
      signCanonicalString(canonical, KEY),
    );
    expect(inspect(key)).not.toContain(KEY);
    expect(JSON.stringify(key)).not.toContain(KEY);
  });
});
