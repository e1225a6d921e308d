import { describe, expect, it } from 'vitest';
import type { Operator } from '../operators/operator.ts';
import { consoleCookie, SessionSigner } from './console-session.ts';

const ANN: Operator = { name: 'ann', role: 'analyst', keyId: 'key-0123456789ab' };
const KEYS = ['ann:analyst:a-key-of-ann-0123456789'];

describe('console sessions', () => {
  it('with no operator key and no session key (single sign-on alone), sign with a key no one can know', () => {
    // Derived from nothing, the key would be a constant: anyone could sign an admin session.
    const mine = new SessionSigner({ operatorKeys: [] });
    const forged = new SessionSigner({ operatorKeys: [] }).sign({ ...ANN, role: 'admin' });
    expect(mine.verify(forged)).toBeUndefined();
    expect(mine.verify(mine.sign(ANN))?.operator).toEqual(ANN);
  });

  it('verify their own token until it expires, naming the operator, never holding a key', () => {
    const signer = new SessionSigner({ operatorKeys: KEYS, sessionMinutes: 10 });
    const token = signer.sign(ANN, 1_000_000);
    expect(token).not.toContain('a-key-of-ann');
    expect(Buffer.from(token.split('.')[0]!, 'base64url').toString()).not.toContain('a-key-of-ann');
    expect(signer.verify(token, 1_000_000)).toEqual({ operator: ANN, expiresAtMs: 1_600_000 });
    expect(signer.verify(token, 1_599_999)?.operator).toEqual(ANN);
    expect(signer.verify(token, 1_600_000)).toBeUndefined();
  });

  it('refuse a token altered, signed with other keys, or malformed', () => {
    const signer = new SessionSigner({ operatorKeys: KEYS });
    const token = signer.sign(ANN);
    const [body, mac] = token.split('.') as [string, string];
    const admin = Buffer.from(
      JSON.stringify({ ...JSON.parse(Buffer.from(body, 'base64url').toString()), r: 'admin' }),
    ).toString('base64url');
    expect(signer.verify(`${admin}.${mac}`)).toBeUndefined();
    expect(new SessionSigner({ operatorKeys: ['another-key-0123456789'] }).verify(token)).toBeUndefined();
    // A role changed in RISKGATE_OPS_KEYS derives another session key: the old sessions end.
    expect(
      new SessionSigner({ operatorKeys: ['ann:viewer:a-key-of-ann-0123456789'] }).verify(token),
    ).toBeUndefined();
    for (const bad of [undefined, '', 'x', `${token}.x`, `${body}.`, 'a'.repeat(2000)]) {
      expect(signer.verify(bad)).toBeUndefined();
    }
  });

  it('agree across replicas: the same keys (in any order) or the same session key', () => {
    const token = new SessionSigner({ operatorKeys: ['k1-0123456789abcdef', 'k2-0123456789abcdef'] }).sign(
      ANN,
    );
    expect(
      new SessionSigner({ operatorKeys: ['k2-0123456789abcdef', 'k1-0123456789abcdef'] }).verify(token),
    ).toBeDefined();
    const key = 's'.repeat(32);
    const shared = new SessionSigner({ sessionKey: key, operatorKeys: ['k1-0123456789abcdef'] }).sign(ANN);
    expect(new SessionSigner({ sessionKey: key, operatorKeys: [] }).verify(shared)).toBeDefined();
    expect(new SessionSigner({ operatorKeys: ['k1-0123456789abcdef'] }).verify(shared)).toBeUndefined();
  });

  it('give each session its own CSRF token, which only matches that session', () => {
    const signer = new SessionSigner({ operatorKeys: KEYS });
    const one = signer.sign(ANN, 1);
    const two = signer.sign(ANN, 2_000);
    expect(signer.csrfFor(one)).not.toBe(signer.csrfFor(two));
    expect(signer.csrfMatches(one, signer.csrfFor(one))).toBe(true);
    expect(signer.csrfMatches(one, signer.csrfFor(two))).toBe(false);
    expect(signer.csrfMatches(one, undefined)).toBe(false);
    expect(signer.csrfMatches(undefined, signer.csrfFor(one))).toBe(false);
  });

  it('write cookies HttpOnly, SameSite=Strict, on /console, Secure when asked', () => {
    expect(consoleCookie('c', 'v', { maxAgeSeconds: 60, secure: false })).toBe(
      'c=v; Path=/console; HttpOnly; SameSite=Strict; Max-Age=60',
    );
    expect(consoleCookie('c', '', { maxAgeSeconds: 0, secure: true })).toBe(
      'c=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0; Secure',
    );
  });
});
