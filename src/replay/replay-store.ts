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
 * (`?` for SQLite, `$n` for PostgreSQL). One lower and one upper bound on `at_ms` (the tighter of
 * the window's and the keys'), so the index range starts at the page, not at the window's start:
 * given two lower bounds SQLite picks the first, and every page read the window from its start.
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
  const { after, through } = stretch;
  const where: string[] = [];
  if (after === undefined) where.push(`at_ms >= ${p(stretch.fromMs)}`);
  else {
    where.push(`at_ms >= ${p(Math.max(stretch.fromMs, after.atMs))}`);
    where.push(`(at_ms > ${p(after.atMs)} or decision_id > ${p(after.id)})`);
  }
  // Times are whole milliseconds: before `toMs` is at most `toMs - 1`.
  if (through === undefined) where.push(`at_ms < ${p(stretch.toMs)}`);
  else {
    where.push(`at_ms <= ${p(Math.min(Math.ceil(stretch.toMs) - 1, through.atMs))}`);
    where.push(`(at_ms < ${p(through.atMs)} or decision_id <= ${p(through.id)})`);
  }
  return {
    text: `select decision_id, at_ms, line from decision where ${where.join(' and ')} order by at_ms, decision_id limit ${p(limit)}`,
    params,
  };
}
