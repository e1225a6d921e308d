import { LRUCache } from 'lru-cache';

/**
 * Refuses a signed Admin callback seen before. The vendor signs the body alone (docs/vendor-api.md#callbacks:
 * no timestamp, no nonce), so a captured callback stays valid forever; but every callback body is
 * unique (an enrollment's id and activation code, a migration's device pair and time), so a second
 * arrival of the same signature is a replay. Only verified signatures are remembered: a forger
 * cannot fill the set.
 *
 * Limits (documented in docs/security.md): the set lives in this process, so a replay to another replica
 * or after a restart is not recognised, nor one older than the window or pushed out by
 * `maxEntries` newer callbacks.
 */
export interface CallbackReplayGuardOptions {
  /** How long a signature is remembered, in milliseconds. Default 24 h. */
  windowMs?: number;
  /** At most this many signatures are remembered (the oldest go first). Default 100,000 (~15 MB). */
  maxEntries?: number;
}

export class CallbackReplayGuard {
  readonly #seen: LRUCache<string, true>;

  constructor(options: CallbackReplayGuardOptions = {}) {
    this.#seen = new LRUCache<string, true>({
      max: options.maxEntries ?? 100_000,
      ttl: options.windowMs ?? 24 * 60 * 60 * 1000,
      ttlAutopurge: false,
      // The clock read at every check (a vDSO call), not kept for 1 ms behind a timer of its own.
      ttlResolution: 0,
    });
  }

  /**
   * Records `signature` (the JWS signature's decoded bytes); false when it was already recorded.
   * Keyed on the bytes, not on the header's text: one signature has several base64url spellings
   * (a `=` pad, other unused low bits in the last character), and each would otherwise pass once.
   */
  firstSighting(signature: Uint8Array): boolean {
    const key = signatureKey(signature);
    if (this.#seen.has(key)) return false;
    this.#seen.set(key, true);
    return true;
  }

  /** Whether `signature` (decoded bytes) was recorded, without recording it. */
  seen(signature: Uint8Array): boolean {
    return this.#seen.has(signatureKey(signature));
  }
}

/** The bytes' canonical base64url: one string per signature. */
function signatureKey(signature: Uint8Array): string {
  return Buffer.from(signature.buffer, signature.byteOffset, signature.byteLength).toString('base64url');
}
