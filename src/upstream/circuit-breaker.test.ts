import { describe, expect, it } from 'vitest';
import { ErrorCode, UpstreamError } from '../errors/riskgate-error.ts';
import { DrivenClock } from '../timing/driven-clock.ts';
import { CircuitBreakers, type CircuitState, routeOutcome, uncountedReason } from './circuit-breaker.ts';
import { timeoutError } from './upstream-errors.ts';

const fail = (code: string = ErrorCode.UPSTREAM_SERVER_ERROR, retryAfterMs?: number) =>
  new UpstreamError(code as ErrorCode, 'x', {
    upstream: 'signals',
    ...(retryAfterMs !== undefined && { retryAfterMs }),
  });

function breakers() {
  const clock = new DrivenClock();
  const transitions: [string, CircuitState, CircuitState][] = [];
  const b = new CircuitBreakers({
    consecutiveFailures: 3,
    windowCalls: 10,
    openMs: { initialMs: 1000, maxMs: 8000, random: () => 0.999_999 },
    clock,
    onTransition: (route, from, to) => transitions.push([route, from, to]),
  });
  return { b, transitions, advance: (ms: number) => clock.tick(ms) };
}

describe('CircuitBreakers', () => {
  it('opens a route after failures in a row, refuses calls while open, probes once, closes on success', () => {
    const { b, transitions, advance } = breakers();
    const route = 'signals new-browser';
    for (let i = 0; i < 3; i++) {
      expect(b.gate(route)).toEqual({ go: true, probe: false });
      b.record(route, fail(), false);
    }
    const refused = b.gate(route);
    expect(refused.go).toBe(false);
    expect(refused.go === false && refused.retryAfterMs).toBeCloseTo(1000, -1);
    // Another route is not affected.
    expect(b.gate('signals geovelocity')).toEqual({ go: true, probe: false });
    advance(1000);
    expect(b.gate(route)).toEqual({ go: true, probe: true });
    // While the probe is out, others do not pile onto the route.
    expect(b.gate(route).go).toBe(false);
    b.record(route, undefined, true);
    expect(b.gate(route)).toEqual({ go: true, probe: false });
    expect(transitions.map(([, , to]) => to)).toEqual(['open', 'half_open', 'closed']);
  });

  it('a failed probe opens the route again, for longer', () => {
    const { b, advance } = breakers();
    const route = 'admin get-user';
    for (let i = 0; i < 3; i++) b.record(route, fail(ErrorCode.UPSTREAM_TIMEOUT), false);
    advance(1000);
    expect(b.gate(route)).toEqual({ go: true, probe: true });
    b.record(route, fail(ErrorCode.UPSTREAM_UNREACHABLE), true);
    const again = b.gate(route);
    expect(again.go === false && again.retryAfterMs).toBeGreaterThan(1500);
  });

  it('honours Retry-After at once: one 429 keeps every caller off the route until then', () => {
    const { b, advance } = breakers();
    const route = 'signals remote-access-tool-batch';
    b.record(route, fail(ErrorCode.UPSTREAM_RATE_LIMITED, 5000), false);
    const gate = b.gate(route);
    expect(gate.go === false && gate.retryAfterMs).toBeGreaterThanOrEqual(5000);
    advance(4999);
    expect(b.gate(route).go).toBe(false);
    advance(1000);
    expect(b.gate(route)).toEqual({ go: true, probe: true });
  });

  it('opens on a high failure ratio even without a run of failures', () => {
    const { b } = breakers();
    const route = 'signals active-call';
    for (let i = 0; i < 10; i++) b.record(route, i % 2 === 0 ? fail() : undefined, false);
    expect(b.gate(route).go).toBe(false);
  });

  it('counts only the vendor’s failures: a 4xx about the request works, a cut deadline says nothing', () => {
    expect(routeOutcome(undefined)).toBe('success');
    expect(routeOutcome(fail(ErrorCode.UPSTREAM_NOT_FOUND))).toBe('success');
    expect(routeOutcome(fail(ErrorCode.UPSTREAM_SERVER_ERROR))).toBe('failure');
    expect(routeOutcome(fail(ErrorCode.DEADLINE_EXCEEDED))).toBe('neutral');
    const { b } = breakers();
    const route = 'admin get-user';
    for (let i = 0; i < 10; i++) b.record(route, fail(ErrorCode.DEADLINE_EXCEEDED), false);
    expect(b.gate(route).go).toBe(true);
    expect(b.states()).toEqual([]);
  });

  it('a timeout counts against the vendor only when its timer fired within 10 % of the timeout (at least 10 ms)', () => {
    const late = (timeoutMs: number, ownDelayMs: number) =>
      uncountedReason(timeoutError('signals', 'new-browser', timeoutMs, ownDelayMs));
    expect(late(200, 2)).toBeUndefined();
    expect(late(200, 20)).toBeUndefined();
    expect(late(200, 21)).toBe('riskgate_late');
    expect(late(50, 10)).toBeUndefined();
    expect(late(50, 11)).toBe('riskgate_late');
    const { b } = breakers();
    const route = 'signals new-browser';
    for (let i = 0; i < 5; i++) b.record(route, timeoutError('signals', 'new-browser', 150, 80), false);
    expect(b.gate(route).go).toBe(true);
    for (let i = 0; i < 3; i++) b.record(route, timeoutError('signals', 'new-browser', 150, 1), false);
    expect(b.gate(route).go).toBe(false);
  });
});
