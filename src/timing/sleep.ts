import { type Clock, systemClock } from './clock.ts';

/**
 * Waits `ms` milliseconds. Resolves `true` when the time is up, `false` as soon as `signal` aborts
 * (at once when it already has). Never rejects. A wait of 0 or less resolves on the next microtask.
 */
export function sleep(ms: number, signal?: AbortSignal, clock: Clock = systemClock): Promise<boolean> {
  if (ms <= 0 || signal?.aborted) return Promise.resolve(!signal?.aborted);
  return new Promise((resolve) => {
    const onAbort = (): void => {
      clock.clearTimeout(timer);
      resolve(false);
    };
    const timer = clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
