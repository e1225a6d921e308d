import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { CALLER_KEY, type Harness, startHarness } from './decide-harness.ts';
import { eventually } from './support/eventually.ts';

/**
 * Admission control over real HTTP. A burst larger than riskgate admits (here: a slow vendor and
 * RISKGATE_MAX_IN_FLIGHT=4) is answered at once, not queued behind the decisions in flight: 503
 * problem+json with Retry-After, or the policy's overload verdict without any vendor call. A caller
 * that hangs up ends its decision's fan-out.
 */

const SLOW_SIGNALS = {
  rules: [
    { route: 'GET /api/v1/signals/*', latency: { kind: 'fixed', ms: 250 } },
    { route: 'POST /api/v1/signals/*', latency: { kind: 'fixed', ms: 250 } },
  ],
};

async function burst(h: Harness, body: unknown, n: number) {
  return Promise.all(
    Array.from({ length: n }, async () => {
      const started = performance.now();
      const res = await h.decide(body);
      return { ...res, ms: performance.now() - started };
    }),
  );
}

const metric = async (h: Harness, pattern: RegExp) =>
  Number(pattern.exec(await (await h.ops('/metrics')).text())?.[1] ?? 0);

describe('a burst past what riskgate admits', () => {
  let h: Harness;
  let alice: string;
  beforeAll(async () => {
    h = await startHarness({ deadlineMs: 1000, env: { RISKGATE_MAX_IN_FLIGHT: '4' } });
    ({ alice } = (await lookUpUserIds(h.sandbox, ['alice'])) as { alice: string });
  });
  afterAll(() => h.stop());

  it('is refused fast with 503 problem+json, RG_ERR_OVERLOADED and Retry-After; the admitted ones are answered', async () => {
    await h.control('PUT', '/sandbox/faults', SLOW_SIGNALS);
    try {
      const answers = await burst(h, demoRequest('alice', alice), 24);
      const admitted = answers.filter((a) => a.status === 200);
      const shed = answers.filter((a) => a.status === 503);
      expect(admitted.length).toBeGreaterThanOrEqual(4);
      expect(shed.length).toBeGreaterThan(0);
      expect(admitted.length + shed.length).toBe(24);
      for (const a of shed) {
        expect(a.headers.get('content-type')).toBe('application/problem+json');
        expect(a.headers.get('retry-after')).toBe('1');
        expect(a.body).toMatchObject({ status: 503, code: 'RG_ERR_OVERLOADED' });
      }
      // Not queued behind the slow decisions: refused well before the vendor's 250 ms.
      const fastest = Math.min(...admitted.map((a) => a.ms));
      const median = shed.map((a) => a.ms).sort((a, b) => a - b)[Math.floor(shed.length / 2)]!;
      expect(median).toBeLessThan(fastest);
      expect(
        await metric(h, /^riskgate_decisions_shed_total\{reason="in_flight",answer="refused"\} (\d+)$/m),
      ).toBe(shed.length);
    } finally {
      await h.control('DELETE', '/sandbox/faults');
    }
  });

  it('ends the fan-out of a decision whose caller hung up', async () => {
    await h.control('PUT', '/sandbox/faults', {
      rules: [{ route: 'GET /api/v1/signals/new-browser', hang: true }],
    });
    try {
      const { answer, hangUp } = h.decideThenHangUp(demoRequest('alice', alice));
      await eventually(() => h.riskgate.admission.inFlight === 1, { what: 'the decision admitted' });
      hangUp();
      await answer;
      // Released long before the 1000 ms deadline would have ended it.
      await eventually(() => h.riskgate.admission.inFlight === 0, {
        timeoutMs: 500,
        what: 'the slot released',
      });
    } finally {
      await h.control('DELETE', '/sandbox/faults');
    }
  });

  // Last: its slow decisions time out, and the breaker of that route counts them.
  it('sheds /feedback too while admission is saturated, with the same 503 problem', async () => {
    // Signals that hang (until the deadline) rather than are slow: on a busy machine the feedback
    // must still find the four decisions in flight.
    await h.control('PUT', '/sandbox/faults', {
      rules: [
        { route: 'GET /api/v1/signals/*', hang: true },
        { route: 'POST /api/v1/signals/*', hang: true },
      ],
    });
    try {
      // Four slow decisions fill what this riskgate admits (RISKGATE_MAX_IN_FLIGHT=4).
      const decisions = burst(h, demoRequest('alice', alice), 4);
      await eventually(() => h.riskgate.admission.inFlight >= 4, {
        intervalMs: 5,
        what: 'four decisions admitted',
      });
      expect(h.riskgate.admission.inFlight).toBe(4);
      const res = await fetch(`${h.url}/feedback`, {
        method: 'POST',
        headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ decisionId: crypto.randomUUID(), label: 'fraud' }),
      });
      expect(res.status).toBe(503);
      expect(res.headers.get('content-type')).toBe('application/problem+json');
      expect(res.headers.get('retry-after')).toBe('1');
      expect(await res.json()).toMatchObject({ status: 503, code: 'RG_ERR_OVERLOADED' });
      await decisions;
    } finally {
      await h.control('DELETE', '/sandbox/faults');
    }
  });
});

describe('a policy with an overload verdict', () => {
  let h: Harness;
  let alice: string;
  beforeAll(async () => {
    const shipped = readFileSync('policies/login.yaml', 'utf8');
    h = await startHarness({
      deadlineMs: 1000,
      env: { RISKGATE_MAX_IN_FLIGHT: '2' },
      policy: { yaml: `${shipped}\noverload:\n  verdict: challenge\n` },
    });
    ({ alice } = (await lookUpUserIds(h.sandbox, ['alice'])) as { alice: string });
  });
  afterAll(() => h.stop());

  it('answers shed decisions 200 with that verdict, degraded, reason overloaded, without calling the vendor', async () => {
    await h.control('PUT', '/sandbox/faults', SLOW_SIGNALS);
    try {
      await h.control('POST', '/sandbox/stats/reset');
      const answers = await burst(h, demoRequest('alice', alice), 12);
      expect(answers.every((a) => a.status === 200)).toBe(true);
      const overloaded = answers.filter((a) => a.body.reason === 'overloaded');
      expect(overloaded.length).toBeGreaterThan(0);
      for (const a of overloaded) {
        expect(a.body).toMatchObject({
          verdict: 'challenge',
          degraded: true,
          reason: 'overloaded',
          actions: [],
          signals: {},
          explanation: { decidedBy: 'overload' },
        });
      }
      // Only the admitted decisions reached the vendor (requests are listed as they arrive).
      const evaluated = answers.length - overloaded.length;
      const { requests } = (await h.control('GET', '/sandbox/stats/requests')) as {
        requests: { route: string }[];
      };
      expect(requests.filter((r) => r.route === 'GET /api/v1/signals/new-browser')).toHaveLength(evaluated);
      // An unauthenticated caller gets no verdict, overloaded or not.
      const stranger = await fetch(`${h.url}/decide`, { method: 'POST', body: '{}' });
      expect([401, 503]).toContain(stranger.status);
    } finally {
      await h.control('DELETE', '/sandbox/faults');
    }
  });
});

/** Holds riskgate's event loop (it runs in this process), as a busy host descheduling it would. */
function blockLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // busy
  }
}

describe('a lone caller on a busy host', () => {
  let h: Harness;
  let alice: string;
  beforeAll(async () => {
    // A delay bound well under the stalls below, and a deadline generous for a busy machine.
    h = await startHarness({ deadlineMs: 2000, env: { RISKGATE_MAX_EVENT_LOOP_DELAY_MS: '40' } });
    ({ alice } = (await lookUpUserIds(h.sandbox, ['alice'])) as { alice: string });
  });
  afterAll(() => h.stop());

  it('is never shed: one request in flight at a time, each read right after the loop stalled', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 50; i++) {
      // The loop is 80 ms late when the request is read: twice the delay bound, none of it queued work.
      blockLoop(80);
      statuses.push((await h.decide(demoRequest('alice', alice))).status);
    }
    expect(statuses.filter((s) => s === 503)).toHaveLength(0);
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect(h.riskgate.admission.shed).toEqual({ event_loop_delay: 0, in_flight: 0 });
  });
});
