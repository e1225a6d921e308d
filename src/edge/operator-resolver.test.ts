import { describe, expect, it } from 'vitest';
import { createOperatorResolver, keyIdOf } from './caller-auth.ts';

const ANN_KEY = 'a-key-of-ann-0123456789';
const PLAIN_KEY = 'a-plain-key-0123456789';

describe('an operator signed in earlier', () => {
  const resolver = createOperatorResolver([`ann:analyst:${ANN_KEY}`, PLAIN_KEY], {
    proxies: [],
    identityHeader: 'x-forwarded-email',
    operators: new Map([['sam@example.com', 'admin']]),
  });

  it('still operates while their key (by id) or their single-sign-on identity has the same name and role', () => {
    expect(resolver.stillOperates({ name: 'ann', role: 'analyst', keyId: keyIdOf(ANN_KEY) })).toBe(true);
    const plain = keyIdOf(PLAIN_KEY);
    expect(resolver.stillOperates({ name: plain, role: 'admin', keyId: plain })).toBe(true);
    expect(resolver.stillOperates({ name: 'sam@example.com', role: 'admin', keyId: 'sso' })).toBe(true);
  });

  it('no longer operates once the key is gone, the role changed, or the identity is unlisted', () => {
    expect(resolver.stillOperates({ name: 'ann', role: 'admin', keyId: keyIdOf(ANN_KEY) })).toBe(false);
    expect(resolver.stillOperates({ name: 'bob', role: 'analyst', keyId: keyIdOf(ANN_KEY) })).toBe(false);
    expect(
      resolver.stillOperates({ name: 'ann', role: 'analyst', keyId: keyIdOf('gone-key-0123456789') }),
    ).toBe(false);
    expect(resolver.stillOperates({ name: 'sam@example.com', role: 'viewer', keyId: 'sso' })).toBe(false);
    expect(resolver.stillOperates({ name: 'eve@example.com', role: 'admin', keyId: 'sso' })).toBe(false);
  });
});
