import { CompiledQuery, type Kysely, PostgresAdapter, sql } from 'kysely';
import type { FeatureMigrations } from '../database/database.ts';
import type { DecisionTables } from './decision-tables.ts';

/**
 * Counts per hour kept beside the decisions (issue 32): a count over 30 days read 1,000,000 index
 * entries (92.5 ms for one day on SQLite, bench/RESULTS.md "Issue 25"); from these tables it reads
 * 720 hours' rows.
 *
 * - `decision_hour`: decisions per clock hour (UTC, `hour_ms` its start) and per verdict, active
 *   revision, shadow revision and shadow verdict ('' without a shadow): the console's counts and
 *   chart, the rule report's decisions per revision and its agreement matrix.
 * - `decision_rule_hour`: `decision_rule` rows per hour, rule, policy (active, shadow), revision
 *   and the decision's verdict: counts under the console's rule filter, the report's fires.
 *
 * Kept in the transaction that changes the rows. On PostgreSQL by triggers, once per statement over
 * its rows (transition tables), grouped, in key order (replicas lock the same hour's rows in one
 * order), whoever writes: the writer thread's batches (a row already stored, `ON CONFLICT DO
 * NOTHING`, inserts nothing and counts nothing), kysely's path, retention's deletes (each hour is
 * decremented by the rows that go, so an hour that retention cuts in two stays exact), a test's
 * seed. On SQLite, deletes by triggers too (once per row: retention's, once a minute), but inserts
 * by their writer (`HourTally`, `countInserted`): SQLite has no statement triggers, and its row
 * triggers (an upsert per decision and per rule row, each rule looking up its decision's verdict)
 * cost ~150 µs per decision (bench/RESULTS.md "Issue 32: the store over 1,000,000 decisions"),
 * where the writer adds a batch's counts with one upsert per group, counting only the rows its
 * inserts stored (`changes`, `RETURNING`): a retried batch counts nothing twice.
 *
 * What they count never changes after the insert (time, verdicts, revisions, rules; a label is not
 * counted here), so no update trigger. A `decision_rule` row takes its decision's verdict when it is
 * written and when it goes: written after its decision, deleted before it (as the writer and
 * retention do), or it counts under the verdict ''.
 *
 * Readers (`splitByHours`): the whole hours of a range from these tables, the partial hours at
 * its ends from the rows, so a count is exactly the rows' count.
 */

export const HOUR_MS = 3_600_000;

export type HourTables = {
  decision_hour: {
    hour_ms: number;
    verdict: string;
    policy_revision: string;
    /** '' without a shadow. */
    shadow_revision: string;
    /** '' without a shadow. */
    shadow_verdict: string;
    decisions: number;
  };
  decision_rule_hour: {
    rule_id: string;
    /** `active` or `shadow`. */
    policy: string;
    hour_ms: number;
    policy_revision: string;
    /** The decision's (active) verdict. */
    verdict: string;
    fires: number;
  };
};

/** The start of `atMs`'s hour (floor, also before 1970) of its integer, as `hourOf` says in SQL. */
export function hourStartOf(atMs: number): number {
  const at = Math.trunc(atMs);
  return at - (((at % HOUR_MS) + HOUR_MS) % HOUR_MS);
}

/** The start of `at`'s hour (floor, also before 1970), in SQL; `at` an integer expression. */
const hourOf = (at: string) => `(${at} - ((${at} % ${HOUR_MS}) + ${HOUR_MS}) % ${HOUR_MS})`;

const DECISION_KEY = ['hour_ms', 'verdict', 'policy_revision', 'shadow_revision', 'shadow_verdict'];
const RULE_KEY = ['rule_id', 'policy', 'hour_ms', 'policy_revision', 'verdict'];

/** `decision_hour`'s key of the decision row `d` (`new`, `old`, a table alias). */
const decisionKey = (d: string, at = `${d}.at_ms`) => [
  hourOf(at),
  `${d}.verdict`,
  `${d}.policy_revision`,
  `coalesce(${d}.shadow_revision, '')`,
  `coalesce(${d}.shadow_verdict, '')`,
];

/** `decision_rule_hour`'s key of the rule row `r`, `verdict` its decision's verdict. */
const ruleKey = (r: string, verdict: string, at = `${r}.at_ms`) => [
  `${r}.rule_id`,
  `${r}.policy`,
  hourOf(at),
  `${r}.policy_revision`,
  `coalesce(${verdict}, '')`,
];

const matches = (columns: string[], values: string[], table = '') =>
  columns.map((c, i) => `${table}${c} = ${values[i]}`).join(' and ');

/** SQLite's triggers: one row each (SQLite has no statement triggers); the inserts' go in 007. */
function sqliteTriggers(): string[] {
  const verdictOf = (r: string) =>
    `(select d.verdict from decision d where d.decision_id = ${r}.decision_id)`;
  // node:sqlite may hand a REAL to an integer column: the hour is computed on its integer.
  const at = (row: string) => `cast(${row}.at_ms as integer)`;
  const row = {
    decision: {
      table: 'decision_hour',
      columns: DECISION_KEY,
      n: 'decisions',
      key: (r: string) => decisionKey(r, at(r)),
    },
    decision_rule: {
      table: 'decision_rule_hour',
      columns: RULE_KEY,
      n: 'fires',
      key: (r: string) => ruleKey(r, verdictOf(r), at(r)),
    },
  };
  return Object.entries(row).flatMap(([source, t]) => [
    `create trigger if not exists ${t.table}_insert after insert on ${source} begin
       insert into ${t.table} (${t.columns.join(', ')}, ${t.n}) values (${t.key('new').join(', ')}, 1)
       on conflict (${t.columns.join(', ')}) do update set ${t.n} = ${t.n} + 1;
     end`,
    `create trigger if not exists ${t.table}_delete after delete on ${source} begin
       update ${t.table} set ${t.n} = ${t.n} - 1 where ${matches(t.columns, t.key('old'))};
       delete from ${t.table} where ${matches(t.columns, t.key('old'))} and ${t.n} <= 0;
     end`,
  ]);
}

/** PostgreSQL's triggers: once per statement, over its rows (a transition table), grouped. */
function postgresTriggers(): string[] {
  const tables = {
    decision: {
      table: 'decision_hour',
      columns: DECISION_KEY,
      n: 'decisions',
      from: (rows: string) => `${rows} s`,
      key: decisionKey('s'),
    },
    decision_rule: {
      table: 'decision_rule_hour',
      columns: RULE_KEY,
      n: 'fires',
      from: (rows: string) => `${rows} s left join decision d on d.decision_id = s.decision_id`,
      key: ruleKey('s', 'd.verdict'),
    },
  };
  return Object.entries(tables).flatMap(([source, t]) => {
    const grouped = (rows: string) =>
      `select ${t.key.map((k, i) => `${k} as ${t.columns[i]}`).join(', ')}, count(*) as n
         from ${t.from(rows)} group by ${t.key.map((_, i) => i + 1).join(', ')}
        order by ${t.key.map((_, i) => i + 1).join(', ')}`;
    const keyOf = (alias: string) => t.columns.map((c) => `${alias}.${c}`);
    return [
      `create or replace function ${t.table}_insert() returns trigger language plpgsql as $$
       begin
         insert into ${t.table} (${t.columns.join(', ')}, ${t.n})
           select ${t.columns.join(', ')}, n from (${grouped('added')}) g
           on conflict (${t.columns.join(', ')}) do update set ${t.n} = ${t.table}.${t.n} + excluded.${t.n};
         return null;
       end $$`,
      `create or replace function ${t.table}_delete() returns trigger language plpgsql as $$
       begin
         update ${t.table} h set ${t.n} = h.${t.n} - g.n from (${grouped('removed')}) g
          where ${matches(t.columns, keyOf('g'), 'h.')};
         delete from ${t.table} h using (${grouped('removed')}) g
          where ${matches(t.columns, keyOf('g'), 'h.')} and h.${t.n} <= 0;
         return null;
       end $$`,
      `create trigger ${t.table}_insert after insert on ${source} referencing new table as added
         for each statement execute function ${t.table}_insert()`,
      `create trigger ${t.table}_delete after delete on ${source} referencing old table as removed
         for each statement execute function ${t.table}_delete()`,
    ];
  });
}

/** The counts of the rows already stored (a store upgraded with a month of decisions). */
function backfill(postgres: boolean): string[] {
  const at = (row: string) => (postgres ? `${row}.at_ms` : `cast(${row}.at_ms as integer)`);
  const d = decisionKey('s', at('s'));
  const r = ruleKey('s', 'd.verdict', at('s'));
  const positions = (n: number) => Array.from({ length: n }, (_, i) => i + 1).join(', ');
  return [
    `insert into decision_hour (${DECISION_KEY.join(', ')}, decisions)
       select ${d.join(', ')}, count(*) from decision s group by ${positions(d.length)}`,
    `insert into decision_rule_hour (${RULE_KEY.join(', ')}, fires)
       select ${r.join(', ')}, count(*) from decision_rule s left join decision d on d.decision_id = s.decision_id
        group by ${positions(r.length)}`,
  ];
}

/** Statements setting the hour tables to a count of the rows (a bench's seed in raw SQL, SQLite). */
export const RECOUNT_HOURS: readonly string[] = [
  'delete from decision_hour',
  'delete from decision_rule_hour',
  ...backfill(false),
];

/** Adds a group's count to its hour, one statement per group (SQLite; `?` parameters: key, count). */
const upsert = (table: string, columns: string[], n: string) =>
  `insert into ${table} (${columns.join(', ')}, ${n}) values (${columns.map(() => '?').join(', ')}, ?)
   on conflict (${columns.join(', ')}) do update set ${n} = ${n} + excluded.${n}`;

/** The statement adding one `HourTally` group to each hour table (SQLite). */
export const HOUR_UPSERTS = {
  decision_hour: upsert('decision_hour', DECISION_KEY, 'decisions'),
  decision_rule_hour: upsert('decision_rule_hour', RULE_KEY, 'fires'),
} as const;

export type HourTable = keyof typeof HOUR_UPSERTS;
type Group = { values: (string | number)[]; n: number };

/**
 * The counts a SQLite write adds to the hour tables: the rows its inserts stored, by hour key, so a
 * batch of 300 decisions is a handful of upserts (its verdicts and revisions), not 300 and more.
 */
export class HourTally {
  readonly #groups: Record<HourTable, Map<string, Group>> = {
    decision_hour: new Map(),
    decision_rule_hour: new Map(),
  };

  #add(table: HourTable, values: (string | number)[]): void {
    const key = values.join('\u0000');
    const group = this.#groups[table].get(key);
    if (group === undefined) this.#groups[table].set(key, { values, n: 1 });
    else group.n++;
  }

  /** A `decision` row stored (a shadow's columns null without a shadow). */
  decision(atMs: number, verdict: string, revision: string, shadowRevision: unknown, shadowVerdict: unknown) {
    this.#add('decision_hour', [
      hourStartOf(atMs),
      verdict,
      revision,
      typeof shadowRevision === 'string' ? shadowRevision : '',
      typeof shadowVerdict === 'string' ? shadowVerdict : '',
    ]);
  }

  /** A `decision_rule` row stored; `verdict` its decision's (stored) verdict, '' without one. */
  rule(ruleId: string, policy: string, atMs: number, revision: string, verdict: string | undefined) {
    this.#add('decision_rule_hour', [ruleId, policy, hourStartOf(atMs), revision, verdict ?? '']);
  }

  /** Each group as `HOUR_UPSERTS[table]`'s parameters: its key, then its count. */
  parameters(table: HourTable): (string | number)[][] {
    return [...this.#groups[table].values()].map((g) => [...g.values, g.n]);
  }
}

/** Whether the writer adds the hour counts of its inserts (SQLite), or triggers do (PostgreSQL). */
export const countsByWriter = (db: { getExecutor(): { adapter: unknown } }): boolean =>
  !(db.getExecutor().adapter instanceof PostgresAdapter);

/** The columns of a stored `decision` row its hour is counted by. */
export type CountedDecision = Pick<
  DecisionTables['decision'],
  'decision_id' | 'at_ms' | 'verdict' | 'policy_revision' | 'shadow_revision' | 'shadow_verdict'
>;
export type CountedRule = DecisionTables['decision_rule'];

/**
 * Adds the hour counts of rows just stored through kysely (`writeOps`, a test's or a bench's seed)
 * in the caller's transaction, on SQLite (on PostgreSQL the triggers did): `decisions` and `rules`
 * each stored now (a row an insert left as it was must not be given). A rule's verdict is its
 * decision's among `decisions`, else the stored one.
 */
export async function countInserted(
  db: Kysely<DecisionTables>,
  decisions: readonly CountedDecision[],
  rules: readonly CountedRule[],
): Promise<void> {
  if (!countsByWriter(db)) return;
  const tally = new HourTally();
  const verdicts = new Map<string, string>();
  for (const d of decisions) {
    tally.decision(Number(d.at_ms), d.verdict, d.policy_revision, d.shadow_revision, d.shadow_verdict);
    verdicts.set(d.decision_id, d.verdict);
  }
  const unknown = [...new Set(rules.map((r) => r.decision_id).filter((id) => !verdicts.has(id)))];
  for (let i = 0; i < unknown.length; i += 500) {
    const stored = await db
      .selectFrom('decision')
      .select(['decision_id', 'verdict'])
      .where('decision_id', 'in', unknown.slice(i, i + 500))
      .execute();
    for (const d of stored) verdicts.set(d.decision_id, d.verdict);
  }
  for (const r of rules)
    tally.rule(r.rule_id, r.policy, Number(r.at_ms), r.policy_revision, verdicts.get(r.decision_id));
  for (const table of Object.keys(HOUR_UPSERTS) as HourTable[]) {
    for (const parameters of tally.parameters(table))
      await db.executeQuery(CompiledQuery.raw(HOUR_UPSERTS[table], parameters));
  }
}

/**
 * How far the hour tables' counts of the hour starting at `hourMs` are from a count of its rows:
 * over decisions and rule rows, the sum of each key's difference (0: exact). In one snapshot (a
 * transaction; PostgreSQL's repeatable read): rows another worker or replica writes meanwhile are in
 * both counts or in neither. Rule rows are reached from their decisions (a rule row without its
 * decision is not seen; the writers never leave one).
 */
export async function hourDrift(db: Kysely<DecisionTables>, hourMs: number): Promise<number> {
  const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
  const at = postgres ? 's.at_ms' : 'cast(s.at_ms as integer)';
  // Rule rows reached from their decisions of the hour (decision_at, then each one's rule rows by
  // key): decision_rule has no index by time alone.
  const tables = [
    {
      table: 'decision_hour',
      columns: DECISION_KEY,
      n: 'decisions',
      key: decisionKey('s', at),
      from: 'decision s',
      inHour: ['s.at_ms'],
    },
    {
      table: 'decision_rule_hour',
      columns: RULE_KEY,
      n: 'fires',
      key: ruleKey('s', 'd.verdict', at),
      from: 'decision d join decision_rule s on s.decision_id = d.decision_id',
      inHour: ['d.at_ms', 's.at_ms'],
    },
  ];
  const begin = db.transaction();
  return (postgres ? begin.setIsolationLevel('repeatable read') : begin).execute(async (tx) => {
    let drift = 0;
    for (const t of tables) {
      const keyOf = (row: Record<string, unknown>) =>
        t.columns.map((c) => (c === 'hour_ms' ? String(Number(row[c])) : String(row[c]))).join('\u0000');
      const stored = await sql<
        Record<string, unknown>
      >`select ${sql.raw(t.columns.join(', '))}, ${sql.raw(t.n)} as n
        from ${sql.raw(t.table)} where hour_ms = ${hourMs}`.execute(tx);
      const counted = await sql<Record<string, unknown>>`select ${sql.raw(
        t.key.map((k, i) => `${k} as ${t.columns[i]}`).join(', '),
      )}, count(*) as n from ${sql.raw(t.from)} where ${sql.join(
        t.inHour.map((c) => sql`${sql.ref(c)} >= ${hourMs} and ${sql.ref(c)} < ${hourMs + HOUR_MS}`),
        sql` and `,
      )} group by ${sql.raw(t.key.map((_, i) => i + 1).join(', '))}`.execute(tx);
      const diff = new Map<string, number>();
      for (const r of stored.rows) diff.set(keyOf(r), (diff.get(keyOf(r)) ?? 0) + Number(r.n));
      for (const r of counted.rows) diff.set(keyOf(r), (diff.get(keyOf(r)) ?? 0) - Number(r.n));
      for (const d of diff.values()) drift += Math.abs(d);
    }
    return drift;
  });
}

/** How often `hourDriftCheck` compares an hour, milliseconds: an hour's rows are ~1,000,000 at 300/s. */
export const HOUR_CHECK_EVERY_MS = 3_600_000;

/**
 * Every `everyMs`, one random whole hour of the last `maxAgeMs` (before the current one) compared
 * with its rows (`hourDrift`) on the reading connection, off the writer's: a difference is counted
 * (`drift()`, riskgate_decision_hour_drift) and logged. The counts are kept exact by construction;
 * this says so, or says when they are not (a writer that inserted uncounted rows). `check(hourMs)`
 * compares one hour now.
 */
export function hourDriftCheck(o: {
  db: Kysely<DecisionTables>;
  maxAgeMs: number;
  log: (line: Record<string, unknown>) => void;
  everyMs?: number;
}) {
  let total = 0;
  const check = async (hourMs: number): Promise<number> => {
    const drift = await hourDrift(o.db, hourMs);
    if (drift > 0) {
      total += drift;
      o.log({
        level: 'error',
        msg: 'decision store: the counts per hour differ from the rows',
        hour: new Date(hourMs).toISOString(),
        drift,
      });
    }
    return drift;
  };
  const timer = setInterval(() => {
    const hours = Math.max(1, Math.floor(o.maxAgeMs / HOUR_MS));
    const hourMs = hourStartOf(Date.now()) - (1 + Math.floor(Math.random() * hours)) * HOUR_MS;
    // The store unreadable: its reads and writes say so already.
    check(hourMs).catch(() => {});
  }, o.everyMs ?? HOUR_CHECK_EVERY_MS);
  timer.unref();
  return { check, drift: () => total, stop: () => clearInterval(timer) };
}

export const hourCountMigrations: FeatureMigrations = {
  'decisions-006-hour-counts': {
    async up(db) {
      const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
      const text = (c: string) => c !== 'hour_ms';
      let hours = db.schema.createTable('decision_hour');
      for (const c of DECISION_KEY)
        hours = hours.addColumn(c, text(c) ? 'text' : 'bigint', (b) => b.notNull());
      // SQLite: the key is the table (one B-tree an upsert walks, not a rowid table and its index).
      const keyed = sql.raw(postgres ? '' : 'without rowid');
      await hours
        .addColumn('decisions', 'bigint', (b) => b.notNull())
        .addPrimaryKeyConstraint('decision_hour_pk', DECISION_KEY as never)
        .modifyEnd(keyed)
        .execute();
      let rules = db.schema.createTable('decision_rule_hour');
      for (const c of RULE_KEY) rules = rules.addColumn(c, text(c) ? 'text' : 'bigint', (b) => b.notNull());
      await rules
        .addColumn('fires', 'bigint', (b) => b.notNull())
        .addPrimaryKeyConstraint('decision_rule_hour_pk', RULE_KEY as never)
        .modifyEnd(keyed)
        .execute();
      // An earlier revision's report names no rules: its rows by revision, not by rule.
      await db.schema
        .createIndex('decision_rule_hour_revision')
        .on('decision_rule_hour')
        .columns(['policy_revision', 'policy', 'hour_ms'])
        .execute();
      // PostgreSQL: other replicas may be writing; nothing lands between the counts and the
      // triggers (SQLite's migration holds the file's write lock already: src/database/database.ts).
      if (postgres) await sql`lock table decision, decision_rule in share row exclusive mode`.execute(db);
      for (const statement of [...backfill(postgres), ...(postgres ? postgresTriggers() : sqliteTriggers())])
        await sql.raw(statement).execute(db);
    },
  },
  // Issue 32: on SQLite the writers add the counts of what they insert, per batch (`HourTally`,
  // `countInserted`): the row triggers cost ~150 µs per decision. Deletes keep theirs (retention's,
  // once a minute). Every writer of this version counts, and the migration runs before any writes.
  'decisions-007-sqlite-hour-counts-by-writer': {
    async up(db) {
      if (db.getExecutor().adapter instanceof PostgresAdapter) return;
      for (const trigger of ['decision_hour_insert', 'decision_rule_hour_insert'])
        await sql.raw(`drop trigger if exists ${trigger}`).execute(db);
    },
  },
};

/** A time range, half open: `fromMs <= at_ms < toMs`, either end open when absent. */
export interface TimeRange {
  fromMs?: number | undefined;
  toMs?: number | undefined;
}

/**
 * `range` as the whole hours inside it (`hours`, for the hour tables; absent when none) and the
 * ranges left at its ends (`edges`, to count from the rows): together exactly `range`.
 */
export function splitByHours(range: TimeRange): { hours?: TimeRange; edges: TimeRange[] } {
  const { fromMs, toMs } = range;
  const first = fromMs === undefined ? undefined : Math.ceil(fromMs / HOUR_MS) * HOUR_MS;
  const end = toMs === undefined ? undefined : Math.floor(toMs / HOUR_MS) * HOUR_MS;
  if (first !== undefined && end !== undefined && first >= end) return { edges: [range] };
  const edges: TimeRange[] = [];
  if (fromMs !== undefined && first !== undefined && fromMs < first) edges.push({ fromMs, toMs: first });
  if (toMs !== undefined && end !== undefined && end < toMs) edges.push({ fromMs: end, toMs });
  return { hours: { fromMs: first, toMs: end }, edges };
}

export type HourDb = Kysely<HourTables>;

/** One group of an hour table's counts: its slice's start (with a step), its verdict, its count. */
export interface HourCount {
  atMs?: number;
  verdict: string;
  n: number;
}

/**
 * The counts by verdict of the whole hours `hours` (`splitByHours`): every decision, or the
 * decisions the active policy's `rule` matched; by slice of `stepMs` (a whole number of hours,
 * slices starting on its multiples, as the rows' `at_ms / step` groups them) when given.
 */
export async function hourVerdictCounts(
  db: HourDb,
  hours: TimeRange,
  o: { verdict?: string | undefined; rule?: string | undefined; stepMs?: number },
): Promise<HourCount[]> {
  // Without a step, a constant: PostgreSQL refuses an ungrouped column.
  const slice =
    o.stepMs === undefined
      ? sql<number>`0`
      : sql<number | string>`hour_ms / ${sql.lit(Math.trunc(o.stepMs))}`;
  const q =
    o.rule === undefined
      ? db
          .selectFrom('decision_hour')
          .select((eb) => ['verdict', slice.as('slice'), eb.fn.sum<number | string>('decisions').as('n')])
      : db
          .selectFrom('decision_rule_hour')
          .select((eb) => ['verdict', slice.as('slice'), eb.fn.sum<number | string>('fires').as('n')])
          .where('rule_id', '=', o.rule)
          .where('policy', '=', 'active');
  const rows = await (q as ReturnType<typeof decisionHourQuery>)
    .$if(hours.fromMs !== undefined, (w) => w.where('hour_ms', '>=', hours.fromMs!))
    .$if(hours.toMs !== undefined, (w) => w.where('hour_ms', '<', hours.toMs!))
    .$if(o.verdict !== undefined, (w) => w.where('verdict', '=', o.verdict!))
    .groupBy(o.stepMs === undefined ? ['verdict'] : ['verdict', slice])
    .execute();
  // PostgreSQL answers sums (numeric) and bigint quotients as strings.
  return rows.map((r) => ({
    ...(o.stepMs !== undefined && { atMs: Number(r.slice) * Math.trunc(o.stepMs) }),
    verdict: r.verdict,
    n: Number(r.n),
  }));
}

/** The shape both of `hourVerdictCounts`'s queries share (for the builder's types). */
const decisionHourQuery = (db: HourDb) =>
  db
    .selectFrom('decision_hour')
    .select((eb) => [
      'verdict',
      sql<number | string>`0`.as('slice'),
      eb.fn.sum<number | string>('decisions').as('n'),
    ]);
