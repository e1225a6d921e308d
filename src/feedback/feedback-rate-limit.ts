/**
 * Per-key token buckets for `POST /feedback`: each key may send `ratePerSecond` labels a second on
 * average and `burst` at once. Keyed by key id, so the map holds at most one bucket per configured
 * key. Per process: with N replicas or workers a key's total is up to N times the rate.
 */
export interface FeedbackRateLimitOptions {
  /** Sustained labels per second per key. Default 10. */
  ratePerSecond?: number;
  /** Labels a key may send at once. Default 50. */
  burst?: number;
}

export class FeedbackRateLimit {
  readonly #ratePerMs: number;
  readonly #burst: number;
  readonly #buckets = new Map<string, { tokens: number; atMs: number }>();

  constructor(options: FeedbackRateLimitOptions = {}) {
    this.#ratePerMs = (options.ratePerSecond ?? 10) / 1000;
    this.#burst = options.burst ?? 50;
  }

  /**
   * Takes one token of `keyId`'s bucket at `nowMs`: undefined when taken, else how long until one
   * is due, milliseconds.
   */
  take(keyId: string, nowMs: number): number | undefined {
    const bucket = this.#buckets.get(keyId) ?? { tokens: this.#burst, atMs: nowMs };
    bucket.tokens = Math.min(this.#burst, bucket.tokens + Math.max(0, nowMs - bucket.atMs) * this.#ratePerMs);
    bucket.atMs = nowMs;
    this.#buckets.set(keyId, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return undefined;
    }
    return Math.ceil((1 - bucket.tokens) / this.#ratePerMs);
  }
}
