import { once } from 'node:events';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../errors/riskgate-error.ts';
import { systemClock } from '../timing/clock.ts';
import { CircuitBreakers, type UncountedReason } from './circuit-breaker.ts';
import { type CallSpec, callUpstream, type UpstreamContext } from './upstream-call.ts';
import { createUpstreamPool } from './upstream-pool.ts';

/**
 * Breakers blame the right party, over real HTTP: a vendor that answers promptly behind a blocked
 * riskgate loop is not failing; a vendor slower than the timeout is; a call cut by riskgate's own
 * deadline says nothing about the vendor.
 */

let server: Server;
let pool: Pool;
/** How long the server waits before answering, ms (undefined: never answers). */
let answerAfterMs: number | undefined = 0;

beforeAll(async () => {
  server = createServer((req, res: ServerResponse) => {
    req.resume();
    req.on('end', () => {
      if (answerAfterMs === undefined) return;
      setTimeout(() => res.end('{}'), answerAfterMs);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  pool = createUpstreamPool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { connections: 8 });
});
afterAll(async () => {
  await pool.destroy();
  server.closeAllConnections();
  server.close();
});

function setup() {
  const uncounted: UncountedReason[] = [];
  const breakers = new CircuitBreakers({
    consecutiveFailures: 2,
    onUncounted: (_route, reason) => uncounted.push(reason),
  });
  const ctx: UpstreamContext = {
    upstream: 'signals',
    dispatcher: pool,
    clock: systemClock,
    defaultTimeoutMs: 500,
    maxRetryWaitMs: 0,
    retryDelayMs: 1,
    minRetryBudgetMs: 5,
    maxBodyBytes: 1024,
    lateAnswerGraceMs: 1000,
    breakers,
  };
  const spec: CallSpec<unknown> = {
    name: 'probe',
    build: () => ({ method: 'GET', path: '/probe', headers: {} }),
    parse: () => ({}),
    retry: false,
  };
  const routeOpen = () => breakers.states().some((s) => s.state === 'open');
  return { ctx, spec, uncounted, routeOpen };
}

/** Holds the event loop (a request flood's parsing, a long GC): nothing else runs meanwhile. */
function blockLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy
  }
}

describe('circuit breakers blame the right party', () => {
  it('a prompt vendor behind a blocked riskgate loop keeps its route closed', async () => {
    answerAfterMs = 0;
    const { ctx, spec, uncounted, routeOpen } = setup();
    for (let i = 0; i < 4; i++) {
      const call = callUpstream(ctx, spec, { timeoutMs: 40 });
      blockLoop(200); // the timer is due at 40 ms and can only fire at ~200 ms
      const r = await call;
      // Either the answer was read in the final look, or it is a timeout riskgate caused.
      if (!r.ok) expect(r.error.code).toBe(ErrorCode.UPSTREAM_TIMEOUT);
    }
    expect(routeOpen()).toBe(false);
    expect(uncounted.every((why) => why === 'riskgate_late')).toBe(true);
  });

  it('a vendor genuinely slower than the timeout opens its route', async () => {
    answerAfterMs = 400;
    const { ctx, spec, routeOpen } = setup();
    // Two counted timeouts in a row open it; a rare late timer on a busy machine is not counted,
    // so a few more calls are allowed before the route must be open.
    for (let i = 0; i < 8 && !routeOpen(); i++) {
      const r = await callUpstream(ctx, spec, { timeoutMs: 100 });
      expect(r.ok ? 'ok' : r.error.code).toBe(ErrorCode.UPSTREAM_TIMEOUT);
    }
    expect(routeOpen()).toBe(true);
  });

  it('a call cut by the decision deadline (or a caller gone) counts neither way', async () => {
    answerAfterMs = undefined;
    const { ctx, spec, uncounted, routeOpen } = setup();
    for (let i = 0; i < 4; i++) {
      const deadline = new AbortController();
      const call = callUpstream(ctx, spec, { timeoutMs: 5000, signal: deadline.signal });
      setTimeout(() => deadline.abort(), 20);
      const r = await call;
      expect(r.ok ? 'ok' : r.error.code).toBe(ErrorCode.DEADLINE_EXCEEDED);
    }
    expect(routeOpen()).toBe(false);
    expect(uncounted).toEqual(['deadline', 'deadline', 'deadline', 'deadline']);
  });
});
