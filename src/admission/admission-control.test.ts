import { describe, expect, it, vi } from 'vitest';
import { DrivenClock } from '../timing/driven-clock.ts';
import { AdmissionControl } from './admission-control.ts';

describe('AdmissionControl', () => {
  function controlled(options: { maxEventLoopDelayMs?: number; maxInFlight?: number; deadlineMs?: number }) {
    const clock = new DrivenClock({ monotonicMs: 1000 });
    const admission = new AdmissionControl({ deadlineMs: 300, ...options, clock });
    admission.start();
    return {
      admission,
      /** Time passes with the loop busy: the sample timer cannot run. */
      clock,
      stall: (ms: number) => clock.stall(ms),
      /** Time passes with the loop free: the sample runs on time. */
      idle: (ms: number) => {
        for (let i = 0; i < ms; i++) clock.tick(1);
      },
    };
  }

  it('admits while the loop keeps up, and sheds while it is stuck with a queue, from the moment it is', () => {
    const { admission, stall, idle } = controlled({ maxEventLoopDelayMs: 50 });
    admission.inFlight = 8; // riskgate's own queue: the delay is its doing
    idle(30); // samples at +10, +20, +30: the next is due at +40
    expect(admission.check()).toBeUndefined();
    stall(50); // the sample is 40 ms overdue: within bounds
    expect(admission.check()).toBeUndefined();
    stall(30); // 70 ms overdue, and no sample has run: seen all the same
    expect(admission.eventLoopDelayMs()).toBe(70);
    expect(admission.check()).toBe('event_loop_delay');
    // The late sample runs as soon as the loop is free and records the delay; once the next one
    // runs on time, decisions are admitted.
    idle(1);
    expect(admission.check()).toBe('event_loop_delay');
    idle(10);
    expect(admission.check()).toBeUndefined();
    expect(admission.shed).toEqual({ event_loop_delay: 2, in_flight: 0 });
    admission.stop();
  });

  it('with a queue, never starts a decision that queued past its whole deadline, even with the delay signal off', () => {
    const { admission, stall } = controlled({ maxEventLoopDelayMs: 0, deadlineMs: 300 });
    admission.inFlight = 8;
    stall(250);
    expect(admission.check()).toBeUndefined();
    stall(100);
    expect(admission.check()).toBe('event_loop_delay');
    admission.stop();
  });

  it('never sheds on the loop delay alone while riskgate has little in flight (the host’s noise)', () => {
    const { admission, stall, idle } = controlled({ maxEventLoopDelayMs: 50 });
    for (let inFlight = 0; inFlight < 8; inFlight++) {
      admission.inFlight = inFlight;
      stall(400); // descheduled past the delay bound and the whole deadline
      expect(admission.eventLoopDelayMs()).toBeGreaterThan(300);
      expect(admission.check()).toBeUndefined();
      idle(20);
    }
    admission.inFlight = 8;
    stall(400);
    expect(admission.check()).toBe('event_loop_delay');
    expect(admission.shed).toEqual({ event_loop_delay: 1, in_flight: 0 });
    admission.stop();
  });

  it('sheds past the most decisions in flight', () => {
    const { admission } = controlled({ maxInFlight: 2 });
    admission.inFlight = 2;
    expect(admission.check()).toBe('in_flight');
    admission.inFlight = 1;
    expect(admission.check()).toBeUndefined();
    admission.stop();
  });

  it('pauses sampling after a second with nothing in flight, and the next admitted request resumes it', () => {
    const { admission, clock, stall, idle } = controlled({ maxEventLoopDelayMs: 50 });
    idle(990);
    expect(clock.pendingTimers).toBe(1);
    idle(20);
    // Idle: no timer of its own wakes the process.
    expect(clock.pendingTimers).toBe(0);
    expect(admission.eventLoopDelayMs()).toBe(0);
    // A burst: the first admitted request starts sampling again, and a stuck loop is seen at once.
    for (let i = 0; i < 8; i++) admission.enter();
    expect(clock.pendingTimers).toBe(1);
    stall(80);
    expect(admission.eventLoopDelayMs()).toBe(70);
    expect(admission.check()).toBe('event_loop_delay');
    // Busy, it keeps sampling however long the requests take.
    idle(2000);
    expect(clock.pendingTimers).toBe(1);
    for (let i = 0; i < 8; i++) admission.leave();
    idle(1010);
    expect(clock.pendingTimers).toBe(0);
    admission.stop();
  });

  it('never lets a saturated loop raise the limit past maxInFlight, even one below the floor of 8', () => {
    const busy = { idle: 0, active: 1, utilization: 1 };
    const spy = vi.spyOn(performance, 'eventLoopUtilization').mockReturnValue(busy);
    try {
      const { admission, idle } = controlled({ maxInFlight: 4 });
      for (let i = 0; i < 4; i++) admission.enter();
      // Saturated and finishing decisions: each 100 ms window sees throughput.
      for (let window = 0; window < 3; window++) {
        admission.leave();
        admission.enter();
        idle(100);
        expect(admission.limit).toBe(4);
      }
      expect(admission.check()).toBe('in_flight');
      admission.stop();
    } finally {
      spy.mockRestore();
    }
  });
});
