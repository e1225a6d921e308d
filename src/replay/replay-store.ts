/**
 * The decision store read as a replay source (a policy version's backtest): stored decision lines
 * in `(at_ms, decision_id)` order, the `decision_at` index, in keyset pages. A window is cut into
 * stretches (src/policy-evidence/backtest-plan.ts), so each replay thread reads a part of the same
 * size with a connection of its own; a stretch starts after a key (exclusive) and ends at a key
 * (inclusive), so the stretches of a window hold each row once. Plain SQL text: a thread runs it
 * with node:sqlite or a `pg` client, no query builder.
 */

/** A row's place on the `decision_at` index. */
export interface StoreKey {
  atMs: number;
  id: string;
}

/** The rows of `[fromMs, toMs)` after `after` (exclusive) up to `through` (inclusive). */
export interface StoreStretch {
  fromMs: number;
  toMs: number;
  after?: StoreKey | undefined;
  through?: StoreKey | undefined;
}

/** One stored decision as replay reads it. */
export interface StoredLine {
  decision_id: string;
  /** A string from PostgreSQL (`bigint`). */
  at_ms: number | string;
  line: string;
}

/**
 * One page of `stretch` as SQL text and parameters, `placeholder(n)` writing the n-th parameter
 * (`?` for SQLite, `$n` for PostgreSQL). The plain `at_ms` bounds keep the index range narrow
 * whichever way a planner reads the key comparisons.
 */
export function pageQuery(
  stretch: StoreStretch,
  limit: number,
  placeholder: (n: number) => string,
): { text: string; params: (number | string)[] } {
  const params: (number | string)[] = [];
  const p = (v: number | string) => {
    params.push(v);
    return placeholder(params.length);
  };
  const where = [`at_ms >= ${p(stretch.fromMs)}`, `at_ms < ${p(stretch.toMs)}`];
  const { after, through } = stretch;
  if (after !== undefined) {
    where.push(`at_ms >= ${p(after.atMs)}`);
    where.push(`(at_ms > ${p(after.atMs)} or decision_id > ${p(after.id)})`);
  }
  if (through !== undefined) {
    where.push(`at_ms <= ${p(through.atMs)}`);
    where.push(`(at_ms < ${p(through.atMs)} or decision_id <= ${p(through.id)})`);
  }
  return {
    text: `select decision_id, at_ms, line from decision where ${where.join(' and ')} order by at_ms, decision_id limit ${p(limit)}`,
    params,
  };
}
