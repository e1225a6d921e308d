/**
 * Polls `check` every 20 ms until it returns a value other than `undefined`, for up to `timeoutMs`
 * (default 5000): for effects that land after an answer (queued actions, the Log API follower).
 */
export async function eventually<T>(check: () => Promise<T | undefined>, timeoutMs = 5000): Promise<T> {
  const until = performance.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (performance.now() > until) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
