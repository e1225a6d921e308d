import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AskUserPruning } from '../src/ask-user/ask-user-pruning.ts';
import {
  type AskUserLink,
  AskUserStore,
  type AskUserTables,
  askUserMigrations,
} from '../src/ask-user/ask-user-store.ts';
import { type DatabaseTarget, openDatabase } from '../src/database/database.ts';
import { stateFiles } from '../src/database/state-files.ts';
import { DrivenClock } from '../src/timing/driven-clock.ts';
import { describeOnPostgres } from './support/postgres-server.ts';
import { tempDirForBlock } from './support/temp-dir-for-block.ts';

/**
 * The "was this you?" links' table on both engines: one answer wins of two at once, an expired
 * or unknown link is never answered, a read never answers, a bad `on_no` takes no action, and the
 * links past their expiry are pruned, bounded and counted.
 */

const NOW = 1_800_000_000_000;

function link(key: string, over: Partial<AskUserLink> = {}): AskUserLink {
  return {
    tokenKey: key,
    decisionId: `d-${key}`,
    accountId: 'acct',
    userId: 'u-1',
    verdict: 'challenge',
    onNo: [{ name: 'lockOut', durationMs: 3_600_000 }],
    createdMs: NOW,
    expiresMs: NOW + 60_000,
    answeredMs: null,
    answer: null,
    ...over,
  };
}

async function answersOnceAndExpires(target: DatabaseTarget): Promise<void> {
  const database = await openDatabase(target, { migrations: askUserMigrations });
  try {
    const store = new AskUserStore(database);
    await store.add(link('a'));
    await store.add(link('b'));
    // A read changes nothing, however often.
    expect((await store.state('a', NOW)).state).toBe('open');
    expect((await store.state('a', NOW)).state).toBe('open');
    // Two answers at once: exactly one is recorded.
    const [first, second] = await Promise.all([
      store.answer('a', 'no', NOW + 1),
      store.answer('a', 'yes', NOW + 2),
    ]);
    expect([first.state, second.state].sort()).toEqual(['answered', 'used']);
    const after = await store.state('a', NOW + 3);
    expect(after).toMatchObject({ state: 'used', link: { answeredMs: expect.any(Number) } });
    expect(after.state !== 'unknown' && after.link.onNo).toEqual([
      { name: 'lockOut', durationMs: 3_600_000 },
    ]);
    // Expired at its expiry, to the millisecond; nothing recorded.
    expect((await store.answer('b', 'no', NOW + 60_000)).state).toBe('expired');
    expect(await store.state('b', NOW)).toMatchObject({ state: 'open', link: { answer: null } });
    expect((await store.answer('nope', 'no', NOW)).state).toBe('unknown');
  } finally {
    await database.close();
  }
}

async function badOnNoTakesNoAction(target: DatabaseTarget): Promise<void> {
  const database = await openDatabase(target, { migrations: askUserMigrations });
  try {
    const store = new AskUserStore(database);
    await store.add(link('c'));
    await database.db
      .withTables<{ ask_user_link: { token_key: string; on_no: string } }>()
      .updateTable('ask_user_link')
      .set({ on_no: '{not json' })
      .where('token_key', '=', 'c')
      .execute();
    const answered = await store.answer('c', 'no', NOW);
    expect(answered).toMatchObject({ state: 'answered', link: { onNo: [] } });
  } finally {
    await database.close();
  }
}

/**
 * Expired links are deleted past their keep, bounded a round, the ones that expired first; a link
 * not yet past its keep still reads expired; a round whose database does not answer is counted and
 * logged, and the rounds run on the clock (driven, never a sleep) until stopped.
 */
async function prunesExpiredLinks(target: DatabaseTarget): Promise<void> {
  const database = await openDatabase(target, { migrations: askUserMigrations });
  const DAY = 86_400_000;
  const clock = new DrivenClock({ nowMs: NOW });
  const lines: Record<string, unknown>[] = [];
  try {
    const store = new AskUserStore(database);
    // The links of the tests before (PostgreSQL's one database) would be pruned too.
    await database.db.withTables<AskUserTables>().deleteFrom('ask_user_link').execute();
    // 25 links long past their keep (5 answered), 3 just expired, 2 open.
    for (let i = 0; i < 25; i++)
      await store.add(
        link(`old-${i}`, {
          expiresMs: NOW - 30 * DAY + i,
          ...(i < 5 && { answeredMs: NOW - 31 * DAY, answer: 'no' as const }),
        }),
      );
    for (let i = 0; i < 3; i++) await store.add(link(`recent-${i}`, { expiresMs: NOW - DAY }));
    for (let i = 0; i < 2; i++) await store.add(link(`open-${i}`, { expiresMs: NOW + DAY }));
    const pruning = new AskUserPruning({
      store,
      clock,
      log: (l) => lines.push(l),
      everyMs: 60_000,
      batch: 4,
      maxBatches: 5,
    });
    pruning.start();
    // Nothing before the first round is due.
    await clock.advance(59_999);
    expect(pruning.counts.pruned).toBe(0);
    // A round: 5 statements of 4, the ones that expired first.
    await clock.advance(1);
    await expect.poll(() => pruning.counts.pruned).toBe(20);
    expect((await store.state('old-19', NOW)).state).toBe('unknown');
    expect((await store.state('old-20', NOW)).state).toBe('expired');
    // The next round takes the rest, and nothing within its keep.
    await clock.advance(60_000);
    await expect.poll(() => pruning.counts.pruned).toBe(25);
    await clock.advance(60_000);
    expect(await pruning.prune()).toBe(0);
    expect(pruning.counts.pruned).toBe(25);
    expect((await store.state('recent-0', NOW)).state).toBe('expired');
    expect((await store.state('open-1', NOW)).state).toBe('open');
    // Past the keep of the recent ones, they go too; the open ones stay.
    clock.stepWall(7 * DAY);
    expect(await pruning.prune()).toBe(3);
    expect((await store.state('open-0', NOW)).state).toBe('open');
    await pruning.stop(1000);
    expect(clock.pendingTimers).toBe(0);
    // A database that does not answer: the round is counted and logged, not thrown.
    await database.close();
    const after = new AskUserPruning({ store, clock, log: (l) => lines.push(l) });
    expect(await after.prune()).toBe(0);
    expect(after.counts.failures).toBe(1);
    expect(lines).toEqual([
      expect.objectContaining({ level: 'warn', msg: expect.stringMatching(/not pruned/) }),
    ]);
  } finally {
    await database.close().catch(() => {});
  }
}

const dir = tempDirForBlock('riskgate-ask-user-');

describe('the "was this you?" links', () => {
  it('answer once, expire, and never answer on a read, on SQLite', async () => {
    await answersOnceAndExpires({ kind: 'sqlite', path: stateFiles(join(dir, 'a')).control });
  });

  it('are pruned past their expiry and keep, bounded a round, counted, on SQLite', async () => {
    await prunesExpiredLinks({ kind: 'sqlite', path: stateFiles(join(dir, 'p')).control });
  });

  it('take no action for a bad on_no row, on SQLite', async () => {
    await badOnNoTakesNoAction({ kind: 'sqlite', path: stateFiles(join(dir, 'b')).control });
  });

  it('refuse to open a corrupt control database (unreadable is unavailable, never empty)', async () => {
    const path = stateFiles(join(dir, 'c')).control;
    const ready = await openDatabase({ kind: 'sqlite', path }, { migrations: askUserMigrations });
    await ready.close();
    writeFileSync(path, 'not a database, a broken file');
    await expect(openDatabase({ kind: 'sqlite', path }, { migrations: askUserMigrations })).rejects.toThrow();
  });

  describeOnPostgres('on PostgreSQL', (pg) => {
    it('answer once, expire, and never answer on a read', async () => {
      await answersOnceAndExpires({ kind: 'postgres', url: pg.url });
    });

    it('are pruned past their expiry and keep, bounded a round, counted', async () => {
      await prunesExpiredLinks({ kind: 'postgres', url: pg.url });
    });

    it('take no action for a bad on_no row', async () => {
      await badOnNoTakesNoAction({ kind: 'postgres', url: pg.url });
    });
  });
});
