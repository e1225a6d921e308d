import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CALLER_KEY, type Harness, startHarness } from './decide-harness.ts';

/**
 * Property-based fuzzing of POST /decide over real HTTP (fast-check): whatever the body and the
 * headers, riskgate answers a 2xx or a 4xx problem (never a 5xx, never a crash), a 400 names the
 * field, and no secret comes back. Bounded in runs and time so CI stays well under a minute.
 */

let h: Harness;
beforeAll(async () => {
  // A generous deadline: the property is about input handling, not vendor latency on 2 busy cores.
  h = await startHarness({ deadlineMs: 2000 });
});
afterAll(() => h?.stop());

const SECRETS = () => {
  const c = h.sandbox.config.credentials;
  return [CALLER_KEY, c.retrievalClientSecret, c.adminApiKey, c.callbackSignatureKey];
};

const fieldValue = fc.oneof(
  fc.string({ maxLength: 80 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.string({ maxLength: 8 }), { maxLength: 4 }),
  fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 }), { maxKeys: 3 }),
  fc.string({ minLength: 1000, maxLength: 3000 }),
);

const KNOWN = [
  'accountId',
  'userId',
  'deviceId',
  'platform',
  'unitId',
  'verificationStatus',
  'interactionId',
  'sdkVersionId',
  'baseline',
  'ip',
  'userAgent',
  'context',
] as const;

/** Bodies near the schema (known fields, sometimes valid values) and far from it. */
const body = fc.oneof(
  fc.record(
    Object.fromEntries(KNOWN.map((k) => [k, fieldValue])) as Record<
      (typeof KNOWN)[number],
      typeof fieldValue
    >,
    { requiredKeys: [] },
  ),
  fc.record(
    {
      accountId: fc.constantFrom('alice', 'mallory', 'nobody', ''),
      platform: fc.constantFrom('browser', 'mobile', 'fridge'),
      ip: fc.oneof(fc.ipV4(), fc.ipV6(), fc.string({ maxLength: 50 })),
      userAgent: fc.string({ maxLength: 1100 }),
      context: fc.dictionary(
        fc.string({ maxLength: 70 }),
        fc.oneof(fc.string({ maxLength: 300 }), fc.double(), fc.boolean(), fc.constant(null)),
        { maxKeys: 40 },
      ),
    },
    { requiredKeys: ['accountId'] },
  ),
  fc.jsonValue({ maxDepth: 4 }),
  fc.anything({ maxDepth: 3 }).map((v) => {
    try {
      return JSON.stringify(v) ?? 'undefined';
    } catch {
      return '{';
    }
  }),
  fc.string({ maxLength: 200 }),
);

const headerValue = fc.string({ unit: 'grapheme-ascii', maxLength: 60 }).filter((s) => !/[\r\n\0]/.test(s));
const headers = fc.record(
  {
    authorization: fc.oneof(
      fc.constant(`Bearer ${CALLER_KEY}`),
      fc.constant(`bearer   ${CALLER_KEY}  `),
      headerValue.map((v) => `Bearer ${v}`),
      headerValue,
    ),
    'content-type': fc.oneof(
      fc.constant('application/json'),
      fc.constant('application/json; charset=utf-8'),
      fc.constantFrom('text/plain', 'application/x-www-form-urlencoded', 'application/merge-patch+json'),
      headerValue,
    ),
    traceparent: headerValue,
    'x-request-id': headerValue,
  },
  { requiredKeys: ['authorization', 'content-type'] },
);

describe('POST /decide under fuzzed bodies and headers', () => {
  it('answers 2xx or a 4xx problem naming the field, never a 5xx, never a secret', async () => {
    for (const secret of SECRETS()) expect(secret.length).toBeGreaterThan(8);
    for (const secret of SECRETS()) expect(secret.length).toBeGreaterThan(8);
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(body, headers, async (b, hd) => {
        const res = await fetch(`${h.url}/decide`, {
          method: 'POST',
          headers: hd,
          body: typeof b === 'string' ? b : JSON.stringify(b),
        });
        const text = await res.text();
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        expect(res.status, text).toBeLessThan(500);
        for (const secret of SECRETS()) expect(text).not.toContain(secret);
        if (res.status >= 400) {
          expect(res.headers.get('content-type')).toBe('application/problem+json');
          const problem = JSON.parse(text) as { code: string; status: number; field?: string };
          expect(problem.status).toBe(res.status);
          expect(problem.code).toMatch(/^RG_ERR_[A-Z_]+$/);
          if (res.status === 400) expect(typeof problem.field).toBe('string');
        } else {
          expect(JSON.parse(text)).toMatchObject({
            verdict: expect.stringMatching(/^(allow|challenge|deny)$/),
          });
        }
      }),
      {
        numRuns: 2000,
        interruptAfterTimeLimit: 40_000,
        seed: Number(process.env.FUZZ_SEED ?? Date.now() % 2 ** 31),
      },
    );
    // The generators reached past authentication and validation: some decisions were made.
    expect(statuses.get(200) ?? 0).toBeGreaterThan(0);
    expect(statuses.get(400) ?? 0).toBeGreaterThan(0);
    expect(statuses.get(401) ?? 0).toBeGreaterThan(0);
  }, 60_000);
});
