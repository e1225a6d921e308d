import { ErrorCode } from '../errors/riskgate-error.ts';
import { type ListSyncOptions, PolledSnapshot } from '../lists/list-sync.ts';
import type { DecisionSnoozes, SnoozeLookup } from '../policy-input/rule-snooze.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import type { UpstreamResult } from '../upstream/upstream-result.ts';
import { type SnoozeRow, SnoozeSnapshot } from './snooze-snapshot.ts';
import type { SnoozeStore } from './snooze-store.ts';

/**
 * This process's rule snoozes, kept current as the runtime lists are (a poll of the change marker
 * every 500 ms, a reload when it moved: a snooze made on any replica applies on every one within
 * a poll and a load). A decision reads the snapshot in memory, never the database.
 *
 * Unreadable (no poll confirmed the snapshot for 10 s): a snooze only ever makes a verdict more
 * permissive, so decisions then evaluate every rule as if nothing were snoozed (the careful side:
 * the rules fire) and say so (`snoozesUnavailable` in the explanation, RG_ERR_SNOOZES_UNAVAILABLE).
 * It is not a degraded input: nothing a policy reads is missing, and the verdict is at least as
 * careful as with the snoozes.
 */

/** What a decision reads: the snapshot at the service's time, or why it cannot be used. */
export interface SnoozeReader {
  forDecision(): DecisionSnoozes;
}

export class SnoozeSync extends PolledSnapshot<SnoozeRow, SnoozeSnapshot> implements SnoozeReader {
  readonly #clock: Clock;

  constructor(options: Omit<ListSyncOptions, 'store'> & { store: SnoozeStore }) {
    super(options, {
      build: (rows) => new SnoozeSnapshot(rows),
      code: ErrorCode.SNOOZES_UNAVAILABLE,
      name: 'snooze',
      upstream: 'snoozes',
    });
    this.#clock = options.clock ?? systemClock;
  }

  forDecision(): DecisionSnoozes {
    const nowMs = this.#clock.nowMs();
    const read: UpstreamResult<SnoozeLookup> = this.read(nowMs);
    return read.ok ? { lookup: read.value, nowMs } : { unavailable: read.error.code };
  }
}
