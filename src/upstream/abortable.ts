import type { UpstreamName } from '../errors/riskgate-error.ts';
import { deadlineError, internalError } from './upstream-errors.ts';
import type { UpstreamResult } from './upstream-result.ts';

/**
 * Releases one caller from a shared piece of work: resolves with `work`'s result, or with
 * `RG_ERR_DEADLINE_EXCEEDED` as soon as `signal` aborts. `work` goes on for whoever else awaits it
 * (a shared token refresh, a shared cache load). Never rejects: should `work` reject (a bug), the
 * caller gets `RG_ERR_INTERNAL`.
 */
export function raceWithSignal<T>(
  work: Promise<UpstreamResult<T>>,
  signal: AbortSignal,
  upstream: UpstreamName,
  operation: string,
): Promise<UpstreamResult<T>> {
  const started = performance.now();
  const deadline = (): UpstreamResult<T> => ({
    ok: false,
    error: deadlineError(upstream, operation),
    durationMs: performance.now() - started,
  });
  if (signal.aborted) return Promise.resolve(deadline());
  return new Promise((resolve) => {
    const onAbort = (): void => resolve(deadline());
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (r) => {
        signal.removeEventListener('abort', onAbort);
        resolve(r);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        resolve({
          ok: false,
          error: internalError(upstream, operation, err),
          durationMs: performance.now() - started,
        });
      },
    );
  });
}
