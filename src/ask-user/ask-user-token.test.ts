import { describe, expect, it } from 'vitest';
import { MAX_TOKEN_CHARS, TOKEN_ID_BYTES, tokenCodec } from './ask-user-token.ts';

const SECRET = 'a-token-codec-secret-of-at-least-32-chars';

describe('the "was this you?" token codec', () => {
  it('verifies the tokens it issued, each naming its own row', () => {
    const codec = tokenCodec(SECRET);
    const issued = Array.from({ length: 200 }, () => codec.issue());
    for (const { token, key } of issued) expect(codec.verify(token)).toBe(key);
    expect(new Set(issued.map((i) => i.key)).size).toBe(issued.length);
    expect(new Set(issued.map((i) => i.token)).size).toBe(issued.length);
  });

  it('carries a 128-bit random id and a mac, and nothing else', () => {
    const { token, key } = tokenCodec(SECRET).issue();
    const [id, mac, ...rest] = token.split('.');
    expect(rest).toEqual([]);
    expect(Buffer.from(id!, 'base64url')).toHaveLength(TOKEN_ID_BYTES);
    expect(Buffer.from(mac!, 'base64url')).toHaveLength(32);
    // The row key is a hash of the id, not the id: a copy of the table gives no token.
    expect(key).toMatch(/^[0-9a-f]{64}$/);
    expect(key).not.toContain(Buffer.from(id!, 'base64url').toString('hex'));
  });

  it('refuses every changed character of a token', () => {
    const codec = tokenCodec(SECRET);
    const { token } = codec.issue();
    for (let i = 0; i < token.length; i++) {
      if (token[i] === '.') continue;
      const changed = `${token.slice(0, i)}${token[i] === 'A' ? 'B' : 'A'}${token.slice(i + 1)}`;
      expect(codec.verify(changed), `position ${i}`).toBeUndefined();
    }
  });

  it('refuses a token signed with another secret, and malformed ones', () => {
    const { token } = tokenCodec(SECRET).issue();
    const other = tokenCodec(`${SECRET}-rotated`);
    expect(other.verify(token)).toBeUndefined();
    const codec = tokenCodec(SECRET);
    for (const bad of [
      '',
      '.',
      token.slice(0, -1),
      `${token}A`,
      token.replace('.', ''),
      `${token}.x`,
      token.replace('.', '..'),
      'x'.repeat(MAX_TOKEN_CHARS + 1),
      `${token.split('.')[0]}.${'A'.repeat(43)}`,
      token.replace(/[A-Za-z0-9]/, '+'),
    ]) {
      expect(codec.verify(bad), bad).toBeUndefined();
    }
  });

  it('refuses a non-canonical encoding of the same bytes', () => {
    const codec = tokenCodec(SECRET);
    const { token } = codec.issue();
    const [id, mac] = token.split('.') as [string, string];
    // The last base64url character of a 16-byte id carries 2 unused bits: setting one is another string.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const last = alphabet.indexOf(id.at(-1)!);
    const sibling = `${id.slice(0, -1)}${alphabet[last ^ 1]}`;
    expect(Buffer.from(sibling, 'base64url').equals(Buffer.from(id, 'base64url'))).toBe(true);
    expect(codec.verify(`${sibling}.${mac}`)).toBeUndefined();
  });
});
