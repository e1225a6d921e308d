import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import {
  type DatabaseTarget,
  type FeatureMigrations,
  MIGRATION_TABLE,
  openDatabase,
  type RiskgateDatabase,
} from '../src/database/database.ts';
import { LockoutStore } from '../src/lockouts/lockout-store.ts';
import { DatabaseOutboxStore } from '../src/outbox/database-outbox-store.ts';
import { OUTBOX_INDEXES } from '../src/outbox/outbox-tables.ts';
import { CONTROL_MIGRATIONS } from '../src/service/database-migrations.ts';
import { doneOutcome, lockOutSpec } from './support/outbox-database.ts';
import { describeOnPostgres } from './support/postgres-server.ts';
import { CAN_MOUNT, mountSmallDisk } from './support/small-disk.ts';

/**
 * The outbox's migration 002 (issue 32: the indexes no query needs dropped, the untold lines'
 * partial index, SQLite's `seq` without AUTOINCREMENT) meets a control database an earlier version
 * left, entries in every status: every row kept as it was (its `seq` too), the indexes as
 * `OUTBOX_INDEXES` lists, and the store goes on with them (the untold lines, the claim's order, a
 * new entry after the newest). A re-run (its record gone) changes nothing.
 */

const MIGRATION_002 = 'outbox-002-indexes-that-earn-their-place';
const BEFORE_002: FeatureMigrations = Object.fromEntries(
  Object.entries(CONTROL_MIGRATIONS).filter(([name]) => name !== MIGRATION_002),
);
const T0 = 1_800_000_000_000;
const LEASE = 10_000;

let n = 0;
const spec = (user: string) => lockOutSpec(++n, user);

const open = (target: DatabaseTarget, migrations = CONTROL_MIGRATIONS) =>
  openDatabase(target, { migrations });

/**
 * Entries in every status (delivered told and untold, dead, dropped, pending leased, pending due
 * later, pending behind a user's earlier one) and their lock-outs. The pending ones, by seq.
 */
async function seed(database: RiskgateDatabase): Promise<string[]> {
  const store = new DatabaseOutboxStore(database);
  const specs = ['u1', 'u2', 'u3', 'u4', 'u5', 'u6', 'u6', 'u7'].map(spec);
  await store.append(specs, T0);
  const lockouts = new LockoutStore(database);
  for (const s of specs)
    await lockouts.add(
      { decisionId: s.decisionId, userId: s.target, rule: 'r', createdMs: T0, status: 'queued' },
      T0,
    );
  // The claim takes the first of each user: all but the second u6.
  expect((await store.claim('w1', 100, T0, LEASE)).length).toBe(7);
  await store.complete(specs[0]!.id, 'w1', T0);
  await store.complete(specs[1]!.id, 'w1', T0);
  await store.markLogged([specs[1]!.id]);
  await store.deadLetter(specs[2]!.id, 'w1', 'horizon_exhausted', T0);
  await store.drop(specs[3]!.id, 'operator', T0);
  await store.retryLater(specs[4]!.id, 'w1', T0 + 60_000, 'UPSTREAM_TIMEOUT', true, T0);
  await store.retryLater(specs[7]!.id, 'w1', T0, 'UPSTREAM_TIMEOUT', true, T0);
  await lockouts.lockedAll([doneOutcome(specs[0]!)], T0);
  // Leased: u6's first (w1's lease runs); due later: u5's; due: u7's; behind u6's first: u6's second.
  return [specs[5]!.id, specs[6]!.id, specs[7]!.id];
}

/** Every row of both tables, as stored (PostgreSQL's bigint as text: compared as read). */
async function rows(database: RiskgateDatabase) {
  const { db } = database;
  return {
    outbox: (await sql`SELECT * FROM outbox_entry ORDER BY seq`.execute(db)).rows,
    lockout: (await sql`SELECT * FROM lockout ORDER BY id`.execute(db)).rows,
  };
}

async function indexes(database: RiskgateDatabase): Promise<string[]> {
  const { rows: found } =
    database.engine === 'sqlite'
      ? await sql<{ name: string }>`SELECT name FROM sqlite_master WHERE type = 'index'
          AND tbl_name = 'outbox_entry' AND name NOT LIKE 'sqlite_autoindex_%'`.execute(database.db)
      : await sql<{
          name: string;
        }>`SELECT indexname AS name FROM pg_indexes WHERE schemaname = current_schema()
          AND tablename = 'outbox_entry' AND indexname NOT IN ('outbox_entry_pkey', 'outbox_entry_id_key')`.execute(
          database.db,
        );
  return found.map((r) => r.name).sort();
}

const LISTED = OUTBOX_INDEXES.map((l) => l.index)
  .filter((name) => !name.startsWith('('))
  .sort();

/** SQLite: whether `seq` is AUTOINCREMENT, and the `sqlite_sequence` row it keeps. */
async function autoincrement(database: RiskgateDatabase) {
  const table = await sql<{ sql: string }>`SELECT sql FROM sqlite_master WHERE name = 'outbox_entry'`.execute(
    database.db,
  );
  const sequence = await sql`SELECT * FROM sqlite_sequence WHERE name = 'outbox_entry'`.execute(database.db);
  return { autoincrement: /autoincrement/i.test(table.rows[0]!.sql), sequenceRows: sequence.rows.length };
}

/** The migrated database against what the earlier one held, and the store going on with it. */
async function expectMigrated(
  database: RiskgateDatabase,
  before: Awaited<ReturnType<typeof rows>>,
  pending: string[],
): Promise<void> {
  expect(await rows(database)).toEqual(before);
  expect(await indexes(database)).toEqual(LISTED);
  if (database.engine === 'sqlite')
    expect(await autoincrement(database)).toEqual({ autoincrement: false, sequenceRows: 0 });
  const store = new DatabaseOutboxStore(database);
  // The lines untold: the delivered one not confirmed, the dead one, the dropped one (oldest first).
  expect((await store.unlogged(100)).map((e) => e.status)).toEqual(['delivered', 'dead', 'dropped']);
  expect(await store.stats(T0)).toEqual({ pending: 4, dead: 1, oldestPendingAgeMs: 0 });
  expect((await store.list({ status: 'pending' })).map((e) => e.spec.id)).toEqual(
    expect.arrayContaining(pending),
  );
  // Due now, not leased, first of its user: u7's; then, w1's lease ended, u6's first, then its second.
  expect((await store.claim('w2', 100, T0 + 1, LEASE)).map((e) => e.spec.id)).toEqual([pending[2]]);
  const later = T0 + LEASE; // w1's leases ended, w2's still running
  expect((await store.claim('w2', 100, later, LEASE)).map((e) => e.spec.id)).toEqual([pending[0]]);
  await store.complete(pending[0]!, 'w2', later);
  expect((await store.claim('w2', 100, later, LEASE)).map((e) => e.spec.id)).toEqual([pending[1]]);
  // A new entry: after the newest.
  const next = spec('u8');
  expect(await store.append([next], later)).toEqual([true]);
  const { rows: seqs } = await sql<{ id: string; seq: number | string }>`SELECT id, seq FROM outbox_entry
    ORDER BY seq DESC LIMIT 2`.execute(database.db);
  expect(seqs[0]!.id).toBe(next.id);
  expect(Number(seqs[0]!.seq)).toBe(Number(seqs[1]!.seq) + 1);
  await store.close();
}

/** A database 002 has not run on, and its rows; the same after 002 and after a re-run of it. */
async function migrateAndRerun(target: DatabaseTarget): Promise<void> {
  const earlier = await open(target, BEFORE_002);
  const pending = await seed(earlier);
  if (earlier.engine === 'sqlite')
    expect(await autoincrement(earlier)).toEqual({ autoincrement: true, sequenceRows: 1 });
  expect(await indexes(earlier)).not.toEqual(LISTED);
  const before = await rows(earlier);
  await earlier.close();

  const migrated = await open(target);
  try {
    await expectMigrated(migrated, before, pending);
  } finally {
    await migrated.close();
  }

  // 002 again (its record gone): the same schema, the same rows.
  const again = await open(target);
  const kept = await rows(again);
  await sql`DELETE FROM ${sql.table(MIGRATION_TABLE)} WHERE name = ${MIGRATION_002}`.execute(again.db);
  await again.close();
  const rerun = await open(target);
  try {
    expect(await rows(rerun)).toEqual(kept);
    expect(await indexes(rerun)).toEqual(LISTED);
    if (rerun.engine === 'sqlite')
      expect(await autoincrement(rerun)).toEqual({ autoincrement: false, sequenceRows: 0 });
  } finally {
    await rerun.close();
  }
}

describe('outbox migration 002 (SQLite)', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('a control file made before 002, entries in every status, migrates: rows and seq kept, indexes as listed, no AUTOINCREMENT; a re-run changes nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'riskgate-outbox-002-'));
    dirs.push(dir);
    await migrateAndRerun({ kind: 'sqlite', path: join(dir, 'control.sqlite') });
  });

  // The rebuild writes a second copy of `outbox_entry` before it drops the first: on a disk without
  // room for it the one migration transaction rolls back whole, riskgate does not start (never an
  // empty outbox), and with room again the next start migrates every row.
  it.runIf(CAN_MOUNT)(
    'on a full disk, 002 fails whole and keeps every row; with room again it migrates them',
    async () => {
      const disk = mountSmallDisk('riskgate-outbox-002-full-', '4m');
      try {
        const target: DatabaseTarget = { kind: 'sqlite', path: join(disk.dir, 'control.sqlite') };
        const earlier = await open(target, BEFORE_002);
        await seed(earlier);
        const bulk = new DatabaseOutboxStore(earlier);
        await bulk.append(
          Array.from({ length: 2_000 }, (_, i) => spec(`bulk-${i}`)),
          T0,
        );
        const before = await rows(earlier);
        await earlier.close();

        const filler = disk.fillUp();
        await expect(open(target)).rejects.toThrow(/migrating the sqlite database failed/);
        rmSync(filler);

        const migrated = await open(target);
        try {
          expect(await rows(migrated)).toEqual(before);
          expect(await indexes(migrated)).toEqual(LISTED);
          expect(await autoincrement(migrated)).toEqual({ autoincrement: false, sequenceRows: 0 });
        } finally {
          await migrated.close();
        }
      } finally {
        disk.remove();
      }
    },
  );
});

describeOnPostgres('outbox migration 002 (PostgreSQL)', (pg) => {
  it('a database made before 002, entries in every status, migrates: rows kept, indexes as listed; a re-run changes nothing', async () => {
    await migrateAndRerun({ kind: 'postgres', url: pg.url });
  });
});
