import { describe, expect, it } from 'vitest';
import { buildDecideBodies, DEMO_ACCOUNTS } from '../bench/decide-bodies.ts';
import {
  acceptDecideRequest,
  decideRequestSchema,
  MAX_CONTEXT_ENTRIES,
  MAX_CONTEXT_STRING_LENGTH,
} from '../src/decide/decide-request.ts';
import {
  MAX_INTERACTION_ID_LENGTH,
  MAX_SDK_VERSION_ID_LENGTH,
  MAX_UNIT_ID_LENGTH,
} from '../src/signals/identifiers.ts';

/**
 * `acceptDecideRequest` (the /decide body checked without zod, issue 32) held to zod's answers:
 * whatever it accepts, zod accepts too and returns the same value (members in the same order), and
 * it accepts the bodies logins send. What it declines, zod decides (and words the 400), so a
 * decline is never wrong: only an acceptance can be.
 */

const userIds = Object.fromEntries(DEMO_ACCOUNTS.map((a, i) => [a.name, `user-${i}`]));
const base = (): Record<string, unknown> => JSON.parse(buildDecideBodies(1, userIds)[0]!);
const text = (n: number, c = 'a') => c.repeat(n);

/** A value of every JSON kind, and the strings near each limit. */
const ANY = [null, true, false, 0, -1, 1.5, '', 'x', [], {}, ['a'], { a: 1 }];
const field = (...values: unknown[]) => [...ANY, ...values];
const MUTATIONS: Record<string, unknown[]> = {
  accountId: field('alice', text(50), text(51), 'al ice', 'alice_', 'é'),
  userId: field('u', text(100), text(101), 'a.b_c~d-e', 'a/b', 'a b'),
  deviceId: field('d', text(100), text(101), 'a/b'),
  platform: field('browser', 'mobile', 'Browser', 'desktop'),
  unitId: field('unit-1', text(MAX_UNIT_ID_LENGTH), text(MAX_UNIT_ID_LENGTH + 1), 'u_1', 'u.1'),
  verificationStatus: field('verified', 'unverified', 'fraud', 'Verified'),
  interactionId: field('i-1', text(MAX_INTERACTION_ID_LENGTH), text(MAX_INTERACTION_ID_LENGTH + 1), 'i 1'),
  sdkVersionId: field(
    '1.2.3/x-y',
    text(MAX_SDK_VERSION_ID_LENGTH),
    text(MAX_SDK_VERSION_ID_LENGTH + 1),
    '1_2',
  ),
  ip: field(
    '10.0.0.1',
    '::1',
    '2001:db8::1',
    '::ffff:10.0.0.1',
    '10.0.0.256',
    '1.2.3',
    `${text(40, '0')}::1`,
    ' 10.0.0.1',
  ),
  userAgent: field('Mozilla/5.0', text(1024), text(1025), 'é ✓'),
  firstFactor: field('passed', 'failed', 'not_checked', 'Passed'),
  baseline: field(
    { unitId: 'u-app', verificationStatus: 'verified' },
    { unitId: 'u-app' },
    { verificationStatus: 'verified' },
    { unitId: 'u', verificationStatus: 'verified', interactionId: 'i' },
    { unitId: 'u', interactionId: 'i' },
    { accountId: 'other', unitId: 'u', verificationStatus: 'fraud', sdkVersionId: '1.0' },
    { unitId: 'u', verificationStatus: 'verified', extra: 1 },
    { unitId: 'u', verificationStatus: 'nope' },
    { unitId: null },
  ),
  context: field(
    { channel: 'web', n: 3, b: false },
    { _a: text(MAX_CONTEXT_STRING_LENGTH) },
    { a: text(MAX_CONTEXT_STRING_LENGTH + 1) },
    { a: null },
    { a: [] },
    { a: {} },
    { '1a': 1 },
    { [text(64)]: 1 },
    { [text(65)]: 1 },
    { 'a-b': 1 },
    Object.fromEntries(Array.from({ length: MAX_CONTEXT_ENTRIES }, (_, i) => [`k${i}`, i])),
    Object.fromEntries(Array.from({ length: MAX_CONTEXT_ENTRIES + 1 }, (_, i) => [`k${i}`, i])),
  ),
};

/** Bodies as the edge sees them: text through `JSON.parse`. */
function cases(): { name: string; json: unknown }[] {
  const out: { name: string; json: unknown }[] = [];
  const add = (name: string, body: string) => out.push({ name, json: JSON.parse(body) });
  for (const [i, body] of buildDecideBodies(256, userIds).entries()) add(`bench body ${i}`, body);
  for (const [key, values] of Object.entries(MUTATIONS)) {
    for (const [i, value] of values.entries()) {
      add(`${key} #${i}`, JSON.stringify({ ...base(), [key]: value }));
      // Alone with the account too (no ordering rule in the way), and after every other member.
      add(`${key} #${i} alone`, JSON.stringify({ accountId: 'alice', [key]: value }));
    }
    const without = base();
    delete without[key];
    add(`no ${key}`, JSON.stringify(without));
  }
  const b = JSON.stringify(base());
  add('unknown member', `${b.slice(0, -1)},"unitID":"x"}`);
  add('member named __proto__', `${b.slice(0, -1)},"__proto__":{"a":1}}`);
  add(
    'context key __proto__',
    JSON.stringify({ accountId: 'a' }).replace('}', ',"context":{"__proto__":1}}'),
  );
  add('number beyond double range in context', '{"accountId":"a","context":{"n":1e400}}');
  add('verificationStatus without unitId', '{"accountId":"a","verificationStatus":"verified"}');
  add('interactionId without verificationStatus', '{"accountId":"a","unitId":"u","interactionId":"i"}');
  add('members in another order', '{"platform":"mobile","ip":"::1","accountId":"a","firstFactor":"failed"}');
  for (const body of ['null', '[]', '"x"', '1', 'true', '{}', '{"accountId":null}']) add(body, body);
  return out;
}

describe('acceptDecideRequest', () => {
  const all = cases();

  it('accepts only what zod accepts, and returns what zod returns, members in its order', () => {
    let accepted = 0;
    for (const { name, json } of all) {
      const fast = acceptDecideRequest(json);
      if (fast === undefined) continue;
      accepted++;
      const parsed = decideRequestSchema.safeParse(json);
      expect(parsed.success, name).toBe(true);
      expect(JSON.stringify(fast), name).toBe(JSON.stringify(parsed.data));
      expect(fast, name).toStrictEqual(parsed.data);
      expect(fast, name).not.toBe(json);
    }
    expect(accepted).toBeGreaterThan(300);
  });

  it('accepts every body zod accepts but one with a member zod leaves out of its copy', () => {
    const declined = all
      .filter(
        ({ json }) => decideRequestSchema.safeParse(json).success && acceptDecideRequest(json) === undefined,
      )
      .map(({ name }) => name);
    expect(declined).toEqual(['context key __proto__']);
  });

  it('accepts the bodies logins send (the bench bodies, every demo account)', () => {
    const bench = all.filter(({ name }) => name.startsWith('bench body'));
    expect(bench.every(({ json }) => acceptDecideRequest(json) !== undefined)).toBe(true);
  });
});
