import { existsSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { type FeatureMigrations, openDatabase, type RiskgateDatabase } from '../src/database/database.ts';
import { MarkerPoll, type MarkerWatch } from '../src/database/marker-poll.ts';
import { DrivenClock } from '../src/timing/driven-clock.ts';
import { tempDirForBlock } from './support/temp-dir-for-block.ts';

/**
 * The control database's one timer (src/database/marker-poll.ts): every watcher's marker in one
 * query per tick, and on the SQLite file no query at all while the file is untouched, but a real
 * read at least every `fullReadEveryMs` and at once after anyone's commit.
 */

type MarkerTables = { marker_a: { id: number; version: number }; marker_b: { id: number; version: number } };

const migrations: FeatureMigrations = {
  'test-001-markers': {
    async up(db) {
      for (const table of ['marker_a', 'marker_b']) {
        await db.schema
          .createTable(table)
          .addColumn('id', 'integer', (c) => c.primaryKey())
          .addColumn('version', 'integer', (c) => c.notNull())
          .execute();
        await sql`insert into ${sql.table(table)} (id, version) values (1, 0)`.execute(db);
      }
    },
  },
};

const dir = tempDirForBlock('riskgate-marker-poll-');
let files = 0;

type Seen = Parameters<MarkerWatch['observe']>[0];

function watcher(database: RiskgateDatabase, table: 'marker_a' | 'marker_b', pollMs = 3_600_000) {
  const seen: Seen[] = [];
  const watch: MarkerWatch = {
    marker: database.db.withTables<MarkerTables>().selectFrom(table).select('version').where('id', '=', 1),
    pollMs,
    observe: (s) => seen.push(s),
  };
  return { watch, seen };
}

/** Sets the file's (and its WAL's) times an hour back: older than any tick of the file system's clock. */
function ageFile(path: string): void {
  const past = new Date(Date.now() - 3_600_000);
  for (const p of [path, `${path}-wal`]) if (existsSync(p)) utimesSync(p, past, past);
}

describe('the control database marker poll', () => {
  it('reads every watcher’s marker in one query and tells each its own value', async () => {
    const database = await openDatabase({ kind: 'memory' }, { migrations });
    const poll = new MarkerPoll(database);
    const a = watcher(database, 'marker_a');
    const b = watcher(database, 'marker_b');
    const stop = [poll.watch(a.watch), poll.watch(b.watch)];
    await sql`update marker_b set version = 7`.execute(database.db);
    await poll.tick();
    expect(poll.reads).toBe(1);
    expect(a.seen).toEqual([{ value: 0, readAtMs: expect.any(Number) }]);
    expect(b.seen).toEqual([{ value: 7, readAtMs: expect.any(Number) }]);
    for (const s of stop) s();
    await database.close();
  });

  it('confirms from the file alone while it is untouched, and reads at once after another connection commits', async () => {
    const path = join(dir, `control-${files++}.sqlite`);
    const database = await openDatabase({ kind: 'sqlite', path }, { migrations });
    const clock = new DrivenClock();
    const poll = new MarkerPoll(database, { clock, fullReadEveryMs: 2000 });
    const a = watcher(database, 'marker_a');
    const stop = poll.watch(a.watch);
    ageFile(path);
    await poll.tick();
    clock.tick(500);
    await poll.tick();
    expect({ reads: poll.reads, skips: poll.skips }).toEqual({ reads: 1, skips: 1 });
    expect(a.seen.at(-1)).toEqual({ readAtMs: clock.nowMs() });
    // Another process sharing the file (a cluster's worker) commits a change.
    const other = new DatabaseSync(path);
    other.exec('update marker_a set version = 3');
    other.close();
    clock.tick(500);
    await poll.tick();
    expect(poll.reads).toBe(2);
    expect(a.seen.at(-1)).toEqual({ value: 3, readAtMs: clock.nowMs() });
    stop();
    await database.close();
  });

  it('reads the markers at least every fullReadEveryMs, the file untouched', async () => {
    const path = join(dir, `control-${files++}.sqlite`);
    const database = await openDatabase({ kind: 'sqlite', path }, { migrations });
    const clock = new DrivenClock();
    const poll = new MarkerPoll(database, { clock, fullReadEveryMs: 2000 });
    const a = watcher(database, 'marker_a');
    const stop = poll.watch({ ...a.watch, fullReadEveryMs: 1000 });
    ageFile(path);
    await poll.tick();
    for (let i = 0; i < 4; i++) {
      clock.tick(500);
      await poll.tick();
    }
    // Reads at 0, 1000 and 2000 ms (the watcher's 1000 is below the poll's 2000).
    expect({ reads: poll.reads, skips: poll.skips }).toEqual({ reads: 3, skips: 2 });
    stop();
    await database.close();
  });

  it('tells every watcher the error when the markers cannot be read, and reads again at the next tick', async () => {
    const path = join(dir, `control-${files++}.sqlite`);
    const database = await openDatabase({ kind: 'sqlite', path }, { migrations });
    const poll = new MarkerPoll(database);
    const a = watcher(database, 'marker_a');
    const b = watcher(database, 'marker_b');
    const stop = [poll.watch(a.watch), poll.watch(b.watch)];
    ageFile(path);
    await sql`drop table marker_b`.execute(database.db);
    ageFile(path);
    await poll.tick();
    await poll.tick();
    expect(a.seen).toHaveLength(2);
    for (const s of [...a.seen, ...b.seen]) expect(s).toHaveProperty('error');
    expect(poll.skips).toBe(0);
    for (const s of stop) s();
    await database.close();
  });

  it('ticks on its clock at the shortest watcher interval, and stops with the last watcher', async () => {
    const database = await openDatabase({ kind: 'memory' }, { migrations });
    const clock = new DrivenClock();
    const poll = new MarkerPoll(database, { clock });
    const a = watcher(database, 'marker_a', 1000);
    const b = watcher(database, 'marker_b', 500);
    const stopA = poll.watch(a.watch);
    const stopB = poll.watch(b.watch);
    await clock.advance(1000);
    expect(poll.reads).toBe(2);
    stopB();
    stopA();
    expect(clock.pendingTimers).toBe(0);
    await database.close();
  });
});
