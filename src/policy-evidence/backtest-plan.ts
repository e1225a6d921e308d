import { CompiledQuery, type Kysely } from 'kysely';
import type { DecisionTables } from '../decision-store/decision-tables.ts';
import { pageQuery, type StoredLine, type StoreKey, type StoreStretch } from '../replay/replay-store.ts';

/**
 * How a backtest's window is read: cut into stretches of the same size on the `decision_at` index
 * (one per replay thread), the cap on decisions applied exactly (the oldest first), and a stretch
 * read in process through kysely when no thread can open the store.
 */

/** One page of `stretch` through kysely (a process-private database replayed in process). */
export async function kyselyPage(
  db: Kysely<DecisionTables>,
  stretch: StoreStretch,
  limit: number,
): Promise<StoredLine[]> {
  const q = pageQuery(stretch, limit, () => '?');
  return (await db.executeQuery(CompiledQuery.raw(q.text, q.params))).rows as StoredLine[];
}

/** How a window is read: the stretches in window order, and where a cap on decisions cut it. */
export interface StorePlan {
  stretches: StoreStretch[];
  /** The decisions the stretches hold. */
  decisions: number;
  /** Set when the window holds more than the cap: the time of the first decision left unread. */
  cutAtMs?: number;
}

/**
 * The window's first `maxDecisions` decisions cut into at most `parts` stretches of at least
 * `minPerPart` decisions each. Its queries walk the `decision_at` index (a count bounded by the
 * cap, one offset per cut) on the database's own thread or pool, never on the event loop.
 */
export async function planStore(
  db: Kysely<DecisionTables>,
  window: { fromMs: number; toMs: number },
  o: { maxDecisions: number; parts: number; minPerPart: number },
): Promise<StorePlan> {
  const inWindow = () =>
    db
      .selectFrom('decision')
      .where('at_ms', '>=', window.fromMs)
      .where('at_ms', '<', window.toMs)
      .orderBy('at_ms')
      .orderBy('decision_id');
  const keyAt = async (offset: number): Promise<StoreKey | undefined> => {
    const row = await inWindow().select(['at_ms', 'decision_id']).limit(1).offset(offset).executeTakeFirst();
    return row === undefined ? undefined : { atMs: Number(row.at_ms), id: row.decision_id };
  };
  const counted = await db
    .selectFrom(
      inWindow()
        .select('decision_id')
        .limit(o.maxDecisions + 1)
        .as('w'),
    )
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .executeTakeFirstOrThrow();
  const n = Math.min(Number(counted.n), o.maxDecisions);
  const plan: StorePlan = { stretches: [], decisions: n };
  let through: StoreKey | undefined;
  if (Number(counted.n) > o.maxDecisions) {
    through = n === 0 ? undefined : await keyAt(n - 1);
    plan.cutAtMs = (await keyAt(n))?.atMs ?? window.toMs;
  }
  const parts = Math.max(1, Math.min(o.parts, Math.floor(n / Math.max(1, o.minPerPart))));
  let after: StoreKey | undefined;
  for (let k = 1; k <= parts; k++) {
    const end = k === parts ? through : await keyAt(Math.floor((n * k) / parts) - 1);
    plan.stretches.push({ ...window, after, through: end });
    after = end;
  }
  if (n === 0 && plan.cutAtMs !== undefined) plan.stretches = [];
  return plan;
}
