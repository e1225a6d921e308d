import { describe, expect, it } from 'vitest';
import { DrivenClock } from '../timing/driven-clock.ts';
import { pauseWhileQuiet } from './runtime-metrics.ts';

/**
 * The event-loop delay monitor's 10 ms timer is most of an idle process's CPU (issue 32): it
 * pauses after five quiet seconds in a row and resumes at the first busier one.
 */
describe('the event-loop delay monitor while the loop is quiet', () => {
  it('pauses after five quiet checks in a row, resumes at the first busy one, and keeps sampling while busy', async () => {
    const clock = new DrivenClock();
    const calls: string[] = [];
    const monitor = {
      enable: () => calls.push('enable') > 0,
      disable: () => calls.push('disable') > 0,
    };
    let ratio = 0;
    const pausing = pauseWhileQuiet(monitor, { clock, busyRatio: () => ratio });
    await clock.advance(4000);
    expect({ paused: pausing.paused(), calls }).toEqual({ paused: false, calls: [] });
    await clock.advance(1000);
    expect({ paused: pausing.paused(), calls }).toEqual({ paused: true, calls: ['disable'] });
    await clock.advance(10_000);
    expect(calls).toEqual(['disable']);
    ratio = 0.5;
    await clock.advance(1000);
    expect({ paused: pausing.paused(), calls }).toEqual({ paused: false, calls: ['disable', 'enable'] });
    // A quiet check between busy ones does not pause it: five in a row do.
    ratio = 0;
    await clock.advance(3000);
    ratio = 0.05;
    await clock.advance(1000);
    ratio = 0;
    await clock.advance(4000);
    expect(pausing.paused()).toBe(false);
    await clock.advance(1000);
    expect({ paused: pausing.paused(), calls }).toEqual({
      paused: true,
      calls: ['disable', 'enable', 'disable'],
    });
    pausing.stop();
    expect(clock.pendingTimers).toBe(0);
  });
});
