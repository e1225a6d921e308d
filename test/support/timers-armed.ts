import { createHook } from 'node:async_hooks';

/**
 * How many timers (`setTimeout`/`setInterval`, ref'd or not) `work` arms, seen through async_hooks as
 * Node creates them. `work` must be synchronous: nothing else runs while the hook counts. A timer
 * armed per decision is a turn of the event loop of its own at a low rate (issue 32).
 */
export function timersArmedBy(work: () => void): number {
  let timers = 0;
  const hook = createHook({
    init(_id, type) {
      if (type === 'Timeout') timers++;
    },
  });
  hook.enable();
  try {
    work();
  } finally {
    hook.disable();
  }
  return timers;
}
