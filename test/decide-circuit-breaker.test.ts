import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { DrivenClock } from '../src/timing/driven-clock.ts';
import { type Harness, startHarness } from './decide-harness.ts';

/**
 * Circuit breakers over real HTTP, with the sandbox's faults: a failing route opens (decisions stop
 * calling it and report it unavailable as `circuit_open`), a probe goes through when the open period
 * ends, and a success closes it; a 429's Retry-After keeps every decision off the route until then.
 */

const ROUTE = 'GET /api/v1/signals/new-browser';
let h: Harness;
let alice: string;
/** The breakers' clock: open periods pass when the test says so, not after a sleep. */
const clock = new DrivenClock();

beforeAll(async () => {
  h = await startHarness({
    riskgate: { breakers: { consecutiveFailures: 3, openMs: { initialMs: 400, maxMs: 400 }, clock } },
  });
  ({ alice } = (await lookUpUserIds(h.sandbox, ['alice'])) as { alice: string });
});
afterAll(() => h.stop());
afterEach(async () => {
  await h.control('DELETE', '/sandbox/faults');
  // Let any open route reach its probe and close on the healthy vendor.
  clock.tick(2_000);
  await h.decide(demoRequest('alice', alice));
});

const newBrowserOf = async () => {
  const { body } = await h.decide(demoRequest('alice', alice));
  return (body.signals as Record<string, { status: string; reason?: string }>).newBrowser!;
};
const seen = async () => {
  const { requests } = (await h.control('GET', '/sandbox/stats/requests')) as {
    requests: { route: string }[];
  };
  return requests.filter((r) => r.route === ROUTE).length;
};
const metrics = async () => (await h.ops('/metrics')).text();

describe('a circuit breaker per vendor route', () => {
  it('opens after failures in a row: decisions stop calling the route and see it unavailable as circuit_open', async () => {
    await h.control('PUT', '/sandbox/faults', { rules: [{ route: ROUTE, errorRate: 1, errorStatus: 500 }] });
    await h.control('POST', '/sandbox/stats/reset');
    for (let i = 0; i < 3; i++) {
      expect(await newBrowserOf()).toMatchObject({
        status: 'unavailable',
        reason: 'RG_ERR_UPSTREAM_SERVER_ERROR',
      });
    }
    const before = await seen();
    expect(await newBrowserOf()).toMatchObject({ status: 'unavailable', reason: 'circuit_open' });
    expect(await seen()).toBe(before); // the route was not called: nobody waited on it
    expect(await metrics()).toMatch(
      /^riskgate_circuit_state\{route="signals new-browser",state="open"\} 1$/m,
    );
    const health = (await (await fetch(`${h.url}/healthz`)).json()) as { vendor: { circuits: unknown[] } };
    expect(health.vendor.circuits).toEqual([
      { route: 'signals new-browser', state: 'open', retryAfterMs: expect.any(Number) },
    ]);
  });

  it('lets one probe through when the open period ends, and closes on its success', async () => {
    await h.control('PUT', '/sandbox/faults', { rules: [{ route: ROUTE, errorRate: 1, errorStatus: 503 }] });
    for (let i = 0; i < 3; i++) await newBrowserOf();
    expect((await newBrowserOf()).reason).toBe('circuit_open');
    await h.control('DELETE', '/sandbox/faults');
    clock.tick(400); // the open period (at most 400 ms, jittered) passes
    await h.control('POST', '/sandbox/stats/reset');
    expect(await newBrowserOf()).toMatchObject({ status: 'ok' }); // the probe
    expect(await newBrowserOf()).toMatchObject({ status: 'ok' });
    expect(await seen()).toBe(2);
    const text = await metrics();
    expect(text).toMatch(/^riskgate_circuit_state\{route="signals new-browser",state="closed"\} 1$/m);
    expect(text).toMatch(
      /^riskgate_circuit_transitions_total\{route="signals new-browser",to="half_open"\} [1-9]/m,
    );
  });

  it('honours a 429’s Retry-After across decisions: none calls the route until it has passed', async () => {
    await h.control('PUT', '/sandbox/faults', {
      rules: [{ route: ROUTE, rateLimit: { rate: 1, retryAfterSeconds: 1 }, times: 1 }],
    });
    await h.control('POST', '/sandbox/stats/reset');
    const first = await newBrowserOf();
    expect(first).toMatchObject({ status: 'unavailable', reason: 'RG_ERR_UPSTREAM_RATE_LIMITED' });
    const during: string[] = [];
    for (let i = 0; i < 5; i++) {
      during.push((await newBrowserOf()).reason ?? 'ok');
      clock.tick(190); // 950 ms in all: still inside the second
    }
    expect(new Set(during)).toEqual(new Set(['circuit_open']));
    expect(await seen()).toBe(1);
    clock.tick(50);
    expect(await newBrowserOf()).toMatchObject({ status: 'ok' });
  });

  it('reports a call cut by riskgate’s side (its caller hung up) as not counted against the route', async () => {
    await h.control('PUT', '/sandbox/faults', { rules: [{ route: ROUTE, hang: true }] });
    for (let i = 0; i < 4; i++) {
      const before = await seen();
      const { answer, hangUp } = h.decideThenHangUp(demoRequest('alice', alice));
      // Hung up once the decision's call is at the (hanging) vendor.
      await expect.poll(seen).toBeGreaterThan(before);
      hangUp();
      await answer;
    }
    const notCounted =
      /^riskgate_circuit_failures_not_counted_total\{route="signals new-browser",reason="deadline"\} (\d+)$/m;
    await expect.poll(async () => Number(notCounted.exec(await metrics())?.[1] ?? 0)).toBeGreaterThan(0);
  });
});
