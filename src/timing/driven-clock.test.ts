import { describe, expect, it } from 'vitest';
import { DrivenClock, SteppedClock } from './driven-clock.ts';
import { sleep } from './sleep.ts';
import { withTimeout } from './with-timeout.ts';

describe('DrivenClock', () => {
  it('stands still until advanced, then moves wall and monotonic time together', async () => {
    const clock = new DrivenClock({ nowMs: 1_000_000, monotonicMs: 5 });
    expect([clock.nowMs(), clock.monotonicMs()]).toEqual([1_000_000, 5]);
    await clock.advance(250);
    expect([clock.nowMs(), clock.monotonicMs()]).toEqual([1_000_250, 255]);
  });

  it('fires due timers in due order, each at its own time, and no timer before it is due', async () => {
    const clock = new DrivenClock();
    const seen: string[] = [];
    const at = (name: string) => () => seen.push(`${name}@${clock.monotonicMs()}`);
    clock.setTimeout(at('b'), 20);
    clock.setTimeout(at('a'), 10);
    clock.setTimeout(at('a2'), 10);
    clock.setTimeout(at('late'), 31);
    await clock.advance(30);
    expect(seen).toEqual(['a@10', 'a2@10', 'b@20']);
    expect(clock.pendingTimers).toBe(1);
  });

  it('fires a timer set by a timer within the same advance, and never a cleared one', async () => {
    const clock = new DrivenClock();
    const seen: number[] = [];
    clock.setTimeout(() => clock.setTimeout(() => seen.push(clock.monotonicMs()), 5), 5);
    clock.clearTimeout(clock.setTimeout(() => seen.push(-1), 1));
    await clock.advance(10);
    expect(seen).toEqual([10]);
    expect(clock.pendingTimers).toBe(0);
  });

  it('runs the work a timer resumes before advance returns (sleep, withTimeout)', async () => {
    const clock = new DrivenClock();
    let slept = false;
    void sleep(100, undefined, clock).then(() => {
      slept = true;
    });
    const raced = withTimeout(new Promise(() => {}), {
      timeoutMs: 50,
      onTimeout: () => new Error('late'),
      clock,
    });
    raced.catch(() => {});
    await clock.advance(99);
    expect(slept).toBe(false);
    await expect(Promise.race([raced, 'pending'])).rejects.toThrow('late');
    await clock.advance(1);
    expect(slept).toBe(true);
  });

  it('ticks synchronously, firing what falls due on the way', () => {
    const clock = new DrivenClock({ monotonicMs: 0 });
    const seen: number[] = [];
    clock.setTimeout(() => seen.push(clock.monotonicMs()), 7);
    clock.tick(10);
    expect([seen, clock.monotonicMs()]).toEqual([[7], 10]);
  });

  it('stalls like a stuck event loop: what falls due fires late, at the next tick', () => {
    const clock = new DrivenClock({ monotonicMs: 0 });
    const seen: number[] = [];
    clock.setTimeout(() => seen.push(clock.monotonicMs()), 5);
    clock.stall(20);
    expect(seen).toEqual([]);
    clock.tick(0);
    expect(seen).toEqual([20]);
  });

  it('steps the wall clock alone: intervals on monotonic time do not see it', async () => {
    const clock = new DrivenClock({ nowMs: 10_000, monotonicMs: 0 });
    clock.stepWall(-5_000);
    expect([clock.nowMs(), clock.monotonicMs()]).toEqual([5_000, 0]);
  });

  it('a SteppedClock runs in real time with its wall time stepped', () => {
    const clock = new SteppedClock();
    clock.step(3_600_000);
    expect(clock.nowMs() - Date.now()).toBeGreaterThanOrEqual(3_599_000);
    expect(Math.abs(clock.monotonicMs() - performance.now())).toBeLessThan(1_000);
  });
});
