import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '../src/errors/riskgate-error.ts';
import { SteppedClock } from '../src/timing/driven-clock.ts';
import type { UpstreamResult } from '../src/upstream/upstream-result.ts';
import { type ClientSandbox, startClientSandbox } from './clients-sandbox.ts';

const NEW_BROWSER = 'GET /api/v1/signals/new-browser';

// Tokens live 5 s (expires_in 4): rollovers happen within a test by moving both clocks.
let env: ClientSandbox;
const clock = new SteppedClock();

beforeAll(async () => {
  env = await startClientSandbox({ tokenLifetimeSeconds: 5 });
});
afterAll(async () => {
  await env.stop();
});
beforeEach(async () => {
  await env.clearFaults();
  await env.resetStats();
});

/** Moves the sandbox clock and the clients' clock together. */
async function advanceBoth(seconds: number) {
  await env.advanceClock(seconds);
  clock.step(seconds * 1000);
}

const codes = (rs: UpstreamResult<unknown>[]) => rs.map((r) => (r.ok ? 'ok' : r.error.code));

/**
 * 200 concurrent new-browser calls; each call's attempt count from `onCall`. The clients get a 5 s
 * attempt timeout: on a busy machine a 1 s timeout would spend the one retry and blur the counts.
 */
async function burst(c: ReturnType<ClientSandbox['signals']>, attempts: number[]) {
  const rs = await Promise.all(
    Array.from({ length: 200 }, () => c.newBrowser({ subjectAccountId: 'alice' })),
  );
  expect(new Set(codes(rs))).toEqual(new Set(['ok']));
  expect(attempts).toHaveLength(200);
  return env.stats();
}

describe('token rollover against the sandbox', () => {
  it('200 concurrent callers at token expiry cause exactly one token request, and none fails', async () => {
    const tokens = env.tokens({ clock });
    const attempts: number[] = [];
    const c = env.signals(tokens, {
      clock,
      defaultTimeoutMs: 5000,
      onCall: (i) => attempts.push(i.attempts),
    });
    expect((await tokens.getToken()).ok).toBe(true);
    await advanceBoth(5); // the token has expired on both sides
    expect(tokens.isReady()).toBe(false);
    await env.resetStats();

    const s = await burst(c, attempts);
    expect(s.tokensIssued).toBe(1);
    expect(env.count(s, NEW_BROWSER, 200)).toBe(200);
    expect(env.count(s, NEW_BROWSER, 401)).toBe(0);
    expect(new Set(attempts)).toEqual(new Set([1]));
  });

  it('a token the upstream rejects (401) is refreshed once for 200 concurrent callers, each retried once', async () => {
    const tokens = env.tokens({ clock });
    const attempts: number[] = [];
    const c = env.signals(tokens, {
      clock,
      defaultTimeoutMs: 5000,
      onCall: (i) => attempts.push(i.attempts),
    });
    expect((await tokens.getToken()).ok).toBe(true);
    await env.advanceClock(5); // expired for the sandbox only: the client still believes in it
    expect(tokens.isReady()).toBe(true);
    await env.resetStats();

    const s = await burst(c, attempts);
    expect(s.tokensIssued).toBe(1);
    // Every call was built in the same turn with the held token, so each met one 401 and then
    // succeeded with the one refreshed token: 200 refusals, 200 answers, nothing more.
    expect(env.count(s, NEW_BROWSER, 401)).toBe(200);
    expect(env.count(s, NEW_BROWSER, 200)).toBe(200);
    expect(env.count(s, NEW_BROWSER)).toBe(400);
    expect(new Set(attempts)).toEqual(new Set([2]));
  });

  it('a 401 whose retry meets a 503 ends there: two requests reach the upstream, not three', async () => {
    const tokens = env.tokens({ clock });
    expect((await tokens.getToken()).ok).toBe(true);
    await env.advanceClock(5); // the sandbox refuses the held token
    let armed = false;
    // The 503 is armed between the 401 and the retry, so only requests after the 401 meet it.
    const c = env.signals(
      {
        peekToken: () => tokens.peekToken(),
        invalidate: (t) => {
          armed = true;
          tokens.invalidate(t);
        },
        getToken: async (signal) => {
          if (armed) {
            armed = false;
            await env.faults([{ route: NEW_BROWSER, errorRate: 1, errorStatus: 503, times: 2 }]);
          }
          return tokens.getToken(signal);
        },
      },
      { clock },
    );
    await env.resetStats();

    const r = await c.newBrowser({ subjectAccountId: 'alice' });
    expect(codes([r])).toEqual([ErrorCode.UPSTREAM_SERVER_ERROR]);
    expect(r.ok ? 0 : r.error.status).toBe(503);
    const s = await env.stats();
    expect(env.count(s, NEW_BROWSER, 401)).toBe(1);
    expect(env.count(s, NEW_BROWSER, 503)).toBe(1);
    expect(env.count(s, NEW_BROWSER)).toBe(2);
  });

  it('no call fails across repeated rollovers under continuous load (refreshed ahead of expiry)', async () => {
    const tokens = env.tokens({ clock });
    await tokens.start();
    const c = env.signals(tokens, { clock });
    await env.resetStats();
    const all: UpstreamResult<unknown>[] = [];
    for (let round = 0; round < 16; round++) {
      const rs = await Promise.all(
        Array.from({ length: 25 }, (_, i) =>
          i % 2 === 0
            ? c.newBrowser({ subjectAccountId: 'alice' })
            : c.remoteAccessTool({
                accountId: 'bob',
                unitId: 'bob-web',
                verificationStatus: 'unverified',
                interactionId: `bob-login-${round}`,
              }),
        ),
      );
      all.push(...rs);
      await advanceBoth(1); // 16 s of token time: several 5 s lifetimes
    }
    expect(all).toHaveLength(400);
    expect(new Set(codes(all))).toEqual(new Set(['ok']));
    const s = await env.stats();
    expect(s.tokensIssued).toBeGreaterThanOrEqual(5);
    expect(env.count(s, NEW_BROWSER, 401)).toBe(0); // always refreshed before the sandbox refused one
    expect(tokens.stats().failures).toBe(0);
  });

  it('a wrong client secret is TOKEN_UNAVAILABLE for the call, and the secret appears nowhere', async () => {
    const secret = 'definitely-wrong-secret-1234';
    const tokens = env.tokens({ clock, clientSecret: secret });
    const c = env.signals(tokens, { clock });
    const r = await c.geolocation({ accountId: 'alice' });
    expect(codes([r])).toEqual([ErrorCode.TOKEN_UNAVAILABLE]);
    expect(tokens.isReady()).toBe(false);
    if (!r.ok) {
      expect(r.error.status).toBe(401);
      const dump = `${r.error.message} ${r.error.upstreamMessage} ${JSON.stringify(r.error)} ${String(r.error.cause)}`;
      expect(dump).not.toContain(secret);
    }
    expect(env.count(await env.stats(), 'GET /api/v1/signals/geolocation')).toBe(0);
  });
});
