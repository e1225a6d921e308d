import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { type Harness, startHarness } from './decide-harness.ts';

/**
 * Upstream failures over real HTTP: the sandbox injects them, riskgate (real clients, real policy
 * engine) answers a degraded decision within its deadline, treated as the policy says.
 */

const DEADLINE_MS = 300;
const POLICY = `
apiVersion: riskgate/v1
kind: Policy
name: edge
thresholds: { challenge: 40, deny: 80 }
signals:
  newBrowser:
    timeoutMs: 100
    onUnavailable: { score: 40 }
  latestProximity:
    timeoutMs: 2000
    onUnavailable: ignore
rules:
  - id: new-browser
    description: The browser is new for this account.
    when: signals.newBrowser.success && !signals.newBrowser.known
    score: 40
  - id: near-phone
    description: The login is next to the enrolled phone.
    when: signals.latestProximity.success && signals.latestProximity.proximityConfidence >= 0.8
    score: -30
`;

const NEW_BROWSER = 'GET /api/v1/signals/new-browser';
const PROXIMITY = 'GET /api/v1/signals/latest-proximity';
// An account without observations: every signal answers success false, so no rule matches and
// the score is exactly what the policy adds for what is unavailable.
const LOGIN = demoRequest('nobody', undefined);

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ policy: { yaml: POLICY }, deadlineMs: DEADLINE_MS });
  await h.decide(LOGIN); // warm up: a cold first call can exceed the 100 ms signal timeout
});
afterAll(() => h?.stop());
afterEach(async () => {
  await h.control('DELETE', '/sandbox/faults');
});

async function faults(...rules: unknown[]) {
  await h.control('PUT', '/sandbox/faults', { rules });
}

async function timedDecide() {
  const started = performance.now();
  const answer = await h.decide(LOGIN);
  return { answer, wallMs: performance.now() - started };
}

describe('a failing signal gives a degraded decision, treated as the policy says', () => {
  it('calls only the signals the policy references', async () => {
    await h.control('POST', '/sandbox/stats/reset');
    const { answer } = await timedDecide();
    expect(answer.status).toBe(200);
    const stats = (await h.control('GET', '/sandbox/stats')) as { routes: Record<string, unknown> };
    const vendorRoutes = Object.keys(stats.routes).filter((r) => !r.includes('/oauth/'));
    expect(vendorRoutes.sort()).toEqual([PROXIMITY, NEW_BROWSER].sort());
    // One each, or two when a slow attempt met its timeout and the client retried it once.
    expect(await h.calls(NEW_BROWSER)).toBeGreaterThanOrEqual(1);
    expect(await h.calls(PROXIMITY)).toBeGreaterThanOrEqual(1);
    expect(Object.keys(answer.body.signals as object).sort()).toEqual(['latestProximity', 'newBrowser']);
  });

  it('a 500 marks the signal unavailable with the error code and applies onUnavailable', async () => {
    await faults({ route: NEW_BROWSER, errorRate: 1, errorStatus: 500 });
    const { answer, wallMs } = await timedDecide();
    expect(answer.status).toBe(200);
    expect(answer.body.signals).toMatchObject({
      newBrowser: { status: 'unavailable', reason: 'RG_ERR_UPSTREAM_SERVER_ERROR', treatment: 'score:40' },
    });
    expect(answer.body).toMatchObject({ degraded: true, verdict: 'challenge', score: 40 });
    expect(wallMs).toBeLessThan(DEADLINE_MS + 100);
  });

  it('a hang past the signal’s own timeout is reported as `timeout`, before the deadline', async () => {
    await faults({ route: NEW_BROWSER, hang: true });
    const { answer, wallMs } = await timedDecide();
    expect(answer.body.signals).toMatchObject({ newBrowser: { status: 'unavailable', reason: 'timeout' } });
    expect(answer.body).toMatchObject({ degraded: true, verdict: 'challenge' });
    expect(answer.body.elapsedMs).toBeGreaterThanOrEqual(100);
    expect(answer.body.elapsedMs).toBeLessThan(DEADLINE_MS);
    expect(wallMs).toBeLessThan(DEADLINE_MS + 100);
  });

  it('a signal’s timeout bounds the whole call: a timed-out attempt is not retried past it', async () => {
    await faults({ route: NEW_BROWSER, hang: true });
    await h.control('POST', '/sandbox/stats/reset');
    const { answer } = await timedDecide();
    expect(answer.body.signals).toMatchObject({ newBrowser: { status: 'unavailable', reason: 'timeout' } });
    // One attempt: a retry would have needed time past the signal's 100 ms.
    expect(await h.calls(NEW_BROWSER)).toBe(1);
    expect(answer.body.elapsedMs).toBeLessThan(200);
  });

  it('a hang past the decision deadline is reported as `deadline`, and the answer goes out on time', async () => {
    await faults({ route: PROXIMITY, hang: true });
    const { answer, wallMs } = await timedDecide();
    expect(answer.body.signals).toMatchObject({
      latestProximity: { status: 'unavailable', reason: 'deadline', treatment: 'ignore' },
      newBrowser: { status: 'ok' },
    });
    expect(answer.body.degraded).toBe(true);
    expect(answer.body.elapsedMs).toBeGreaterThanOrEqual(DEADLINE_MS - 1);
    expect(wallMs).toBeLessThan(DEADLINE_MS + 150);
    expect(answer.headers.get('server-timing')).toMatch(
      /signals-latestProximity;dur=\d+(\.\d)?;desc="deadline"/,
    );
  });

  it('a 429 is reported as rate limited and applies onUnavailable', async () => {
    await faults({ route: NEW_BROWSER, rateLimit: { rate: 1, retryAfterSeconds: 30 } });
    const { answer, wallMs } = await timedDecide();
    expect(answer.body.signals).toMatchObject({
      newBrowser: { status: 'unavailable', reason: 'RG_ERR_UPSTREAM_RATE_LIMITED', treatment: 'score:40' },
    });
    expect(answer.body).toMatchObject({ degraded: true, verdict: 'challenge' });
    expect(wallMs).toBeLessThan(DEADLINE_MS + 100);
  });

  it('with every signal healthy again the decision is not degraded', async () => {
    const { answer } = await timedDecide();
    expect(answer.body.degraded).toBe(false);
    expect(answer.body.signals).toMatchObject({
      newBrowser: { status: 'ok' },
      latestProximity: { status: 'ok' },
    });
  });
});
