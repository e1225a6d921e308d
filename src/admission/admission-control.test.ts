import { describe, expect, it } from 'vitest';
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
    const { admission, busy } = measured({ maxInFlight: 4 });
    for (let i = 0; i < 4; i++) admission.enter();
    // Saturated and finishing decisions: each 100 ms window sees throughput.
    for (let window = 0; window < 3; window++) {
      admission.leave();
      admission.enter();
      busy(100);
      expect(admission.limit).toBe(4);
    }
    expect(admission.check()).toBe('in_flight');
    admission.stop();
  });
});

/**
 * The concurrency limit from what the loop measured. A driven clock, and a loop whose busy time
 * the test sets: `busy(ms)` is CPU work (the sampler runs late, as a saturated loop runs it),
 * `idle(ms)` is waiting (the sampler on time). `serve(...)` runs windows of 100 ms: the decisions
 * arriving are checked at the window's start, the CPU works through those admitted in order
 * (`cpuMs` each, at most the window's 100 ms), and at the window's end each one whose CPU is done
 * and which has waited `answerMs` (its vendor calls) is answered.
 */
function measured(options: { maxInFlight?: number; deadlineMs?: number } = {}) {
  const clock = new DrivenClock({ monotonicMs: 1000 });
  let activeMs = 0;
  const admission = new AdmissionControl({
    deadlineMs: 300,
    ...options,
    clock,
    loopActiveMs: () => activeMs,
  });
  admission.start();
  const busy = (ms: number) => {
    clock.stall(ms);
    activeMs += ms;
    clock.tick(0); // the late sample runs once the work is done
  };
  const idle = (ms: number) => clock.tick(ms);
  /** Admitted and not answered: when (`enter`'s time), and the CPU each still needs. */
  const inFlight: { enteredAtMs: number; cpuMs: number }[] = [];
  const serve = (o: { windows: number; perWindow: number; answerMs: number; cpuMs: number }) => {
    let shed = 0;
    for (let w = 0; w < o.windows; w++) {
      for (let i = 0; i < o.perWindow; i++) {
        if (admission.check() !== undefined) shed++;
        else inFlight.push({ enteredAtMs: admission.enter(), cpuMs: o.cpuMs });
      }
      let cpu = 0;
      for (const d of inFlight) {
        const done = Math.min(d.cpuMs, 100 - cpu);
        d.cpuMs -= done;
        cpu += done;
      }
      busy(cpu);
      idle(100 - cpu);
      for (const d of inFlight.filter((d) => d.cpuMs === 0)) {
        if (clock.monotonicMs() - d.enteredAtMs < o.answerMs) continue;
        inFlight.splice(inFlight.indexOf(d), 1);
        admission.leave(d.enteredAtMs);
      }
    }
    return shed;
  };
  return { admission, busy, idle, serve, inFlight };
}

describe('AdmissionControl: the limit from what the loop measured', () => {
  it('while the loop has room, holds the limit at what the CPU can finish within the target, not maxInFlight', () => {
    const { admission, serve } = measured();
    // 70/s at 10 ms of CPU each: the loop 70 % busy, a capacity of 100/s; each answered 100 ms
    // after admission (its window's end).
    expect(serve({ windows: 20, perWindow: 7, answerMs: 50, cpuMs: 10 })).toBe(0);
    // 100/s × (100 ms + the target, a third of the deadline) = 20 in flight, not the 1000 allowed.
    expect(admission.limit).toBe(20);
    admission.stop();
  });

  it('holds a surge to twice its capacity near what it can finish, from the first saturated window', () => {
    const { admission, serve, inFlight } = measured();
    serve({ windows: 20, perWindow: 7, answerMs: 50, cpuMs: 10 });
    // Twice the capacity arrives: 20 a window, the CPU finishes 10. The first window admits up to
    // the limit measured while the loop had room; from the next, what the saturated loop
    // finishes × the target (100/s × 0.1 s) is the limit, and the rest is shed.
    expect(serve({ windows: 1, perWindow: 20, answerMs: 50, cpuMs: 10 })).toBe(0);
    expect(inFlight.length).toBe(10);
    expect(serve({ windows: 1, perWindow: 20, answerMs: 50, cpuMs: 10 })).toBe(20);
    expect(admission.limit).toBe(10);
    const shed = serve({ windows: 20, perWindow: 20, answerMs: 50, cpuMs: 10 });
    expect(inFlight.length).toBeLessThanOrEqual(10);
    expect(shed).toBeGreaterThanOrEqual(20 * 10);
    // One window of few arrivals amid the surge (the loop 40 % busy, 80 % over the last third of a
    // second): a lull, not room, and the limit holds rather than letting the next burst in.
    serve({ windows: 1, perWindow: 4, answerMs: 50, cpuMs: 10 });
    expect(admission.limit).toBe(10);
    // A lull: the backlog answered, the loop has room again. The limit grows by 8 a window toward
    // what the CPU could finish, not at once: a lull amid a surge must not open it wide.
    serve({ windows: 1, perWindow: 0, answerMs: 50, cpuMs: 10 });
    expect(admission.limit).toBe(18);
    serve({ windows: 1, perWindow: 0, answerMs: 50, cpuMs: 10 });
    expect(admission.limit).toBe(26);
    admission.stop();
  });

  it('never sheds under its capacity when the vendor is slow: the limit grows with the time to answer', () => {
    const { admission, serve, inFlight } = measured();
    // 200/s at 1 ms of CPU each (the loop 20 % busy), each answered after 250 ms (the third
    // window's end): 40-60 in flight, more than the 8 to 20 a busy loop would be allowed.
    expect(serve({ windows: 30, perWindow: 20, answerMs: 250, cpuMs: 1 })).toBe(0);
    expect(inFlight.length).toBe(40);
    expect(admission.limit).toBeGreaterThan(60);
    admission.stop();
  });

  it('adjusts every 100 ms of the clock, even while a saturated loop runs its sampler late', () => {
    const { admission, busy } = measured();
    for (let i = 0; i < 30; i++) admission.enter();
    // The loop busy throughout: one late sample per 50 ms of work, a decision answered in each.
    for (let i = 0; i < 4; i++) {
      admission.leave();
      admission.enter();
      busy(50);
    }
    // Four samples, 200 ms: two windows of 20/s each, not the tenth sample that never came.
    expect(admission.limit).toBe(8);
    admission.stop();
  });
});

describe('AdmissionControl: a saturated loop that loses its core for a moment', () => {
  it('keeps admitting a closed loop answered well within the target through one window of few answers', () => {
    const { admission, busy } = measured();
    // A closed loop of 32 on a saturated loop, 650 answered a second (each in 49 ms): Little's
    // law puts the limit at 65, and nothing is shed.
    const enteredAt: number[] = [];
    for (let i = 0; i < 32; i++) enteredAt.push(admission.enter());
    const window = (answered: number) => {
      for (let i = 0; i < answered; i++) {
        admission.leave(enteredAt.shift());
        expect(admission.check()).toBeUndefined();
        enteredAt.push(admission.enter());
      }
      busy(100); // the loop counts as busy throughout, whether it ran or waited for its core
    };
    for (let w = 0; w < 10; w++) window(65);
    expect(admission.limit).toBe(65);
    // The database threads' page writes on the same core (or a GC) take most of one window: the
    // loop still busy, 20 answered. The decayed rate still sees the CPU it has: no shed.
    window(20);
    expect(admission.limit).toBeGreaterThan(32);
    for (let w = 0; w < 3; w++) window(65);
    expect(admission.shed).toEqual({ event_loop_delay: 0, in_flight: 0 });
    admission.stop();
  });

  it('still follows a fall in what the saturated loop finishes that lasts, within a few windows', () => {
    const { admission, busy } = measured();
    for (let i = 0; i < 32; i++) admission.enter();
    const window = (answered: number) => {
      for (let i = 0; i < answered; i++) {
        admission.leave();
        admission.enter();
      }
      busy(100);
    };
    for (let w = 0; w < 10; w++) window(65);
    // A CPU quota or an overload cuts the rate to 200/s for good: the limit comes down to what it
    // finishes (20), below the 32 in flight by the fourth window, 400 ms.
    const limits: number[] = [];
    for (let w = 0; w < 10; w++) {
      window(20);
      limits.push(admission.limit);
    }
    expect(limits.findIndex((l) => l < 32)).toBeLessThanOrEqual(3);
    expect(limits.at(-1)).toBeLessThanOrEqual(22);
    expect(admission.check()).toBe('in_flight');
    admission.stop();
  });
});

describe('AdmissionControl: a loop with room that loses its core for a moment', () => {
  /**
   * An open loop of 200/s on a loop that finishes 500/s (2 ms of busy loop each): each window's 20
   * arrivals are checked at its start, and those admitted are answered at its end. A stalled
   * window: the host (or a GC, or the database threads on the same core) holds the core through
   * it, the loop counts as busy throughout, and only `answered` of those in flight are answered.
   */
  function openLoop() {
    const { admission, busy, idle } = measured();
    const enteredAt: number[] = [];
    let shed = 0;
    const window = (o: { arrivals: number; stalled?: { answered: number } }) => {
      for (let i = 0; i < o.arrivals; i++) {
        if (admission.check() !== undefined) shed++;
        else enteredAt.push(admission.enter());
      }
      const cpu = o.stalled ? 100 : Math.min(100, enteredAt.length * 2);
      busy(cpu);
      idle(100 - cpu);
      const answered = o.stalled?.answered ?? enteredAt.length;
      for (let i = 0; i < answered; i++) admission.leave(enteredAt.shift());
    };
    return { admission, window, inFlight: () => enteredAt.length, shed: () => shed };
  }

  it('keeps admitting 200/s through a window in which the loop had no core, and sheds none', () => {
    const { admission, window, inFlight, shed } = openLoop();
    for (let w = 0; w < 10; w++) window({ arrivals: 20 });
    // 8 of the window's 20 answered: a saturated window. Its answers (and the decayed rate, 200/s
    // at most: what arrived) taken for what the loop finishes put the limit at 20, under the 12
    // left and the next 20: 12 of them were shed.
    window({ arrivals: 20, stalled: { answered: 8 } });
    expect(inFlight()).toBe(12);
    // What the loop finished per busy millisecond while it had room (500/s) × the target: ~50.
    expect(admission.limit).toBeGreaterThanOrEqual(32);
    for (let w = 0; w < 10; w++) window({ arrivals: 20 });
    expect(shed()).toBe(0);
    expect(admission.shed).toEqual({ event_loop_delay: 0, in_flight: 0 });
    admission.stop();
  });

  it('still follows a cut in its core that lasts: at what it finishes within five windows, and sheds', () => {
    const { admission, window, shed } = openLoop();
    for (let w = 0; w < 10; w++) window({ arrivals: 20 });
    // A quota (or a neighbour) takes three quarters of the core for good: 125/s, 12.5 a window.
    // Each saturated window weighs in what the loop finishes before the next one's limit.
    const limits: number[] = [];
    for (let w = 0; w < 8; w++) {
      window({ arrivals: 20, stalled: { answered: w % 2 === 0 ? 12 : 13 } });
      limits.push(admission.limit);
    }
    // The first window is taken for a stall (the limit held at what the loop finished with room),
    // then the windows with no room weigh in, and by the fifth the limit is what it now finishes.
    expect(limits.slice(0, 5)).toEqual([...limits.slice(0, 5)].sort((a, b) => b - a));
    expect(limits[4]).toBeLessThanOrEqual(15);
    expect(limits.at(-1)).toBe(13);
    expect(shed()).toBeGreaterThan(0);
    admission.stop();
  });
});
