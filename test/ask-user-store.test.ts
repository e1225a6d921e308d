import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AskUserLink, AskUserStore, askUserMigrations } from '../src/ask-user/ask-user-store.ts';
import { type DatabaseTarget, openDatabase } from '../src/database/database.ts';
import { stateFiles } from '../src/database/state-files.ts';
import { postgresAvailable, type RunningPostgres, startPostgres } from './support/postgres-server.ts';

/**
 * The "was this you?" links' table on both engines: one answer wins of two at once, an expired
 * or unknown link is never answered, a read never answers, and a bad `on_no` takes no action.
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

const dir = mkdtempSync(join(tmpdir(), 'riskgate-ask-user-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the "was this you?" links', () => {
  it('answer once, expire, and never answer on a read, on SQLite', async () => {
    await answersOnceAndExpires({ kind: 'sqlite', path: stateFiles(join(dir, 'a')).control });
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

  describe.runIf(postgresAvailable())('on PostgreSQL', () => {
    let pg: RunningPostgres;
    beforeAll(async () => {
      pg = await startPostgres();
    }, 60_000);
    afterAll(async () => pg?.stop());

    it('answer once, expire, and never answer on a read', async () => {
      await answersOnceAndExpires({ kind: 'postgres', url: pg.url });
    });

    it('take no action for a bad on_no row', async () => {
      await badOnNoTakesNoAction({ kind: 'postgres', url: pg.url });
    });
  });
});
