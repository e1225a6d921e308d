import { createHash } from 'node:crypto';
import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { createKeyring, keyAuth, keyIdOf } from './caller-auth.ts';

const CALLER_KEY = 'a-caller-key-0123456789';
const OTHER_CALLER_KEY = 'another-caller-key-0123456789';
const OPS_KEY = 'an-operator-key-0123456789';

/** An app behind `keyAuth` answering who the request authenticated as. */
function guarded() {
  const app = new Hono();
  app.use(keyAuth({ caller: [CALLER_KEY, OTHER_CALLER_KEY], operator: [`ann:admin:${OPS_KEY}`] }));
  app.get('/who', (c) => c.json(c.get('principal')));
  return app;
}

const asKey = (key: string) => ({ headers: { authorization: `Bearer ${key}` } });

describe('caller and operator keys', () => {
  it('names a key by the first 12 hex digits of its SHA-256, as sha256sum does', () => {
    const hex = createHash('sha256').update(CALLER_KEY, 'utf8').digest('hex');
    expect(keyIdOf(CALLER_KEY)).toBe(`key-${hex.slice(0, 12)}`);
  });

  it('identifies each configured key and no other, a prefix or a longer key included', () => {
    const identify = createKeyring([CALLER_KEY, OTHER_CALLER_KEY]);
    expect(identify(CALLER_KEY)).toBe(keyIdOf(CALLER_KEY));
    expect(identify(OTHER_CALLER_KEY)).toBe(keyIdOf(OTHER_CALLER_KEY));
    expect(identify(CALLER_KEY.slice(0, -1))).toBeUndefined();
    expect(identify(`${CALLER_KEY}x`)).toBeUndefined();
    expect(identify('')).toBeUndefined();
  });

  it('authenticates a caller key as a caller and an operator key as its operator', async () => {
    const app = guarded();
    expect(await (await app.request('/who', asKey(CALLER_KEY))).json()).toEqual({
      keyId: keyIdOf(CALLER_KEY),
      role: 'caller',
    });
    expect(await (await app.request('/who', asKey(OTHER_CALLER_KEY))).json()).toEqual({
      keyId: keyIdOf(OTHER_CALLER_KEY),
      role: 'caller',
    });
    expect(await (await app.request('/who', asKey(OPS_KEY))).json()).toEqual({
      keyId: keyIdOf(OPS_KEY),
      role: 'operator',
      operator: { name: 'ann', role: 'admin', keyId: keyIdOf(OPS_KEY) },
    });
  });

  it('answers 401 problem+json to a wrong or missing key, without echoing the key', async () => {
    const app = guarded();
    const wrong = await app.request('/who', asKey('not-a-configured-key-0123'));
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('content-type')).toContain('application/problem+json');
    expect(await wrong.text()).not.toContain('not-a-configured-key-0123');
    expect((await app.request('/who')).status).toBe(401);
  });
});
