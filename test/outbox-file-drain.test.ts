import { existsSync, mkdirSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ActionSpec } from '../src/actions/admin-actions.ts';
import { type Harness, startHarness } from './decide-harness.ts';
import { adminUserStatus } from './support/admin-user-status.ts';
import { eventually } from './support/eventually.ts';

/**
 * Issue 30: an `outbox.sqlite` left by a riskgate from before the outbox moved into the database
 * is drained into it at the first start: its pending entries are delivered, its dead ones kept for
 * an operator (ids, attempts, times and errors as they were), and the file is renamed aside.
 */

/** The former store's schema, as src/outbox/sqlite-outbox-store.ts created it (removed in issue 30). */
const FORMER_SCHEMA = `
CREATE TABLE IF NOT EXISTS outbox (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  ordering_key TEXT NOT NULL,
  spec TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT 'pending',
  attempts INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  horizon_start INTEGER NOT NULL,
  next_attempt_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  lease_owner TEXT,
  lease_until INTEGER NOT NULL DEFAULT 0,
  last_error TEXT,
  reason TEXT,
  logged INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS outbox_due ON outbox (status, next_attempt_at);
CREATE INDEX IF NOT EXISTS outbox_ordering ON outbox (ordering_key, status, seq);
CREATE INDEX IF NOT EXISTS outbox_unlogged ON outbox (logged, updated_at);
`;

/** The seeded sandbox's alice and bob (src/sandbox/scenario/default.yaml). */
const ALICE = 'DUALICE0000000000000';
const BOB = 'DUBOB000000000000000';

function lockSpec(decisionId: string, userId: string): ActionSpec {
  return {
    id: `${decisionId}:lock_out_user:${userId}`,
    decisionId,
    type: 'lock_out_user',
    target: userId,
    orderingKey: userId,
    call: { method: 'updateUser', userId, update: { status: 'locked_out' } },
  };
}

describe('a former outbox.sqlite in the state directory', () => {
  let h: Harness;
  let state: string;
  const t0 = Date.now() - 60_000;
  const pending = lockSpec('former-1', ALICE);
  const dead = lockSpec('former-2', BOB);

  beforeAll(async () => {
    state = join(mkdtempSync(join(tmpdir(), 'riskgate-drain-')), 'state');
    mkdirSync(state, { mode: 0o700 });
    const old = new DatabaseSync(join(state, 'outbox.sqlite'));
    old.exec('PRAGMA journal_mode = WAL');
    old.exec(FORMER_SCHEMA);
    const insert = old.prepare(`INSERT INTO outbox (id, ordering_key, spec, status, attempts, created_at,
      horizon_start, next_attempt_at, updated_at, lease_owner, lease_until, last_error, reason, logged)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
    // Pending, leased by a process long gone, two attempts failed already.
    insert.run(
      pending.id,
      ALICE,
      JSON.stringify(pending),
      'pending',
      2,
      t0,
      t0,
      t0,
      t0 + 5,
      'gone:1:x',
      t0 + 10,
      'RG_ERR_UPSTREAM_TIMEOUT',
      null,
      1,
    );
    insert.run(
      dead.id,
      BOB,
      JSON.stringify(dead),
      'dead',
      7,
      t0,
      t0,
      t0,
      t0 + 9,
      null,
      0,
      'RG_ERR_UPSTREAM_SERVER_ERROR',
      'horizon_exhausted:RG_ERR_UPSTREAM_SERVER_ERROR',
      1,
    );
    insert.run(
      'former-3:lock_out_user:x',
      'x',
      JSON.stringify(lockSpec('former-3', 'x')),
      'delivered',
      1,
      t0,
      t0,
      t0,
      t0,
      null,
      0,
      null,
      null,
      1,
    );
    insert.run('former-4:broken', 'y', 'not json', 'pending', 0, t0, t0, t0, t0, null, 0, null, null, 1);
    // JSON, with a type, but not an action this version can carry out (a later version's, or damaged).
    const future = JSON.stringify({
      ...lockSpec('former-5', 'z'),
      type: 'teleport_user',
      call: { method: 'x' },
    });
    insert.run('former-5:future', 'z', future, 'pending', 0, t0, t0, t0, t0, null, 0, null, null, 1);
    old.close();
    h = await startHarness({ env: { RISKGATE_STATE_DIR: state } });
  });

  afterAll(() => h?.stop());

  it('is drained into the database: the pending entry delivered, the dead one kept for an operator, the file renamed aside', async () => {
    await eventually(
      async () => ((await adminUserStatus(h.sandbox, ALICE)) === 'locked_out' ? true : undefined),
      {
        what: 'the former pending lock-out delivered',
      },
    );
    type Listed = { id: string; status: string; attempts: number; reason?: string; createdAt: string };
    const listed = async () =>
      new Map(
        ((await (await h.ops('/actions?limit=100')).json()) as { actions: Listed[] }).actions.map((a) => [
          a.id,
          a,
        ]),
      );
    const byId = await eventually(async () => {
      const m = await listed();
      return m.get(pending.id)?.status === 'delivered' ? m : undefined;
    });
    // Its attempts went on from where they were (two before, one now), its creation kept.
    expect(byId.get(pending.id)).toMatchObject({ attempts: 3, createdAt: new Date(t0).toISOString() });
    expect(byId.get(dead.id)).toMatchObject({
      status: 'dead',
      attempts: 7,
      reason: 'horizon_exhausted:RG_ERR_UPSTREAM_SERVER_ERROR',
    });
    expect(await adminUserStatus(h.sandbox, BOB)).toBe('enabled');
    // A delivered entry had nothing left to do; unreadable ones stay in the renamed file.
    expect(byId.has('former-3:lock_out_user:x')).toBe(false);
    expect(byId.has('former-4:broken')).toBe(false);
    expect(byId.has('former-5:future')).toBe(false);
    expect(h.serviceLog).toContainEqual(
      expect.objectContaining({
        msg: 'an outbox.sqlite entry is unreadable: left in the renamed file',
        id: 'former-5:future',
      }),
    );
    expect(existsSync(join(state, 'outbox.sqlite'))).toBe(false);
    const renamed = readdirSync(state).filter((f) => /^outbox\.sqlite\.migrated-\d+$/.test(f));
    expect(renamed).toHaveLength(1);
    expect(h.serviceLog).toContainEqual(
      expect.objectContaining({
        msg: 'the former outbox file was drained into the database and renamed aside',
        moved: 2,
        skipped: 2,
      }),
    );
    const kept = new DatabaseSync(join(state, renamed[0]!));
    try {
      expect(kept.prepare('SELECT count(*) AS n FROM outbox').get()).toEqual({ n: 5 });
    } finally {
      kept.close();
    }
  });
});
