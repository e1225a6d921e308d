import { afterAll, beforeAll } from 'vitest';

/**
 * A server a test file or `describe` block shares: call it at the top of the file (or of the
 * block); `start` runs in a `beforeAll` registered here, so before the block's own hooks, and the
 * server stops after the last test, once the block's own `afterAll` hooks are done with it (vitest
 * runs those in reverse). The value stands for the running server: reading it before it started
 * (at collection time) or after it stopped throws, naming `what`.
 */
export function runningForBlock<T extends { stop(): Promise<void> }>(
  what: string,
  start: () => Promise<T>,
  startTimeoutMs?: number,
): T {
  let running: T | undefined;
  beforeAll(async () => {
    running = await start();
  }, startTimeoutMs);
  afterAll(async () => {
    await running?.stop();
    running = undefined;
  });
  return new Proxy({} as T, {
    get(_target, property) {
      if (running === undefined)
        throw new Error(`${what} is not running here: use it inside a test or a hook`);
      const value = Reflect.get(running, property);
      return typeof value === 'function' ? value.bind(running) : value;
    },
  });
}
