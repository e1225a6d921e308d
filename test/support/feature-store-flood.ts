import { hash } from 'node:crypto';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { CounterOp, HistoryEvent } from '../../src/features/feature-store.ts';
import type { MemoryFeatureStore } from '../../src/features/memory-feature-store.ts';

/**
 * Floods of the memory feature store shaped as an attacker's traffic reaches it, and the heap they
 * leave behind. Keys and members are digests made as src/features/velocity-counters.ts makes them
 * (a 22-character slice of a SHA-256), so the strings cost what they cost in riskgate.
 */

export const FLOOD_T0_MS = 1_800_000_000_000;
const TEN_MINUTES_MS = 600_000;

function digest(text: string): string {
  return hash('sha256', text, 'base64url').slice(0, 22);
}

let collect: (() => void) | undefined;

/** Heap used plus array buffers after a full collection, bytes. */
export function heapAfterGcBytes(): number {
  if (collect === undefined) {
    // Tests and tsx run without --expose-gc; the flag exposes `gc` to contexts made after it.
    setFlagsFromString('--expose-gc');
    collect = runInNewContext('gc') as () => void;
  }
  collect();
  collect();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

/** `keys` distinct counters (an account tried from ever new addresses), `members` each. */
export function floodDistinctMembers(store: MemoryFeatureStore, keys: number, members: number): void {
  for (let k = 0; k < keys; k++) {
    const key = `ipsPerAccount.AbCdEfGh:${digest(`account ${k}|`)}`;
    const ops: CounterOp[] = [];
    for (let m = 0; m < members; m++)
      ops.push({ key, windowMs: TEN_MINUTES_MS, member: digest(`=ip ${k}.${m}`) });
    store.recordCountersNow(ops, FLOOD_T0_MS + k);
  }
}

/** `keys` new counter instances, a count and a one-member distinct counter per key (new addresses). */
export function floodNewKeys(store: MemoryFeatureStore, keys: number): void {
  for (let k = 0; k < keys; k++) {
    const ip = digest(`ip ${k}|`);
    store.recordCountersNow(
      [
        { key: `attemptsPerIp.AbCdEfGh:${ip}`, windowMs: TEN_MINUTES_MS },
        { key: `accountsPerIp.AbCdEfGh:${ip}`, windowMs: TEN_MINUTES_MS, member: digest(`=account ${k}`) },
      ],
      FLOOD_T0_MS + k,
    );
  }
}

/** `users` users with `events` failed authentications each, in batches as the follower records them. */
export function floodHistory(store: MemoryFeatureStore, users: number, events: number): void {
  for (let u = 0; u < users; u++) {
    const batch: HistoryEvent[] = [];
    for (let e = 0; e < events; e++) {
      batch.push({
        userKey: digest(`user ${u}`),
        kind: 'failed',
        atMs: FLOOD_T0_MS - e * 1000,
        eventId: `01JD${digest(`event ${u}.${e}`)}`,
      });
    }
    store.recordHistoryNow(batch, FLOOD_T0_MS);
  }
}
