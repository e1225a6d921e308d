import { Worker } from 'node:worker_threads';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ActionOutcome } from '../src/actions/action-dispatcher.ts';
import type { ActionAdmin, ActionJob, ActionSpec } from '../src/actions/admin-actions.ts';
import { type DatabaseTarget, openDatabase, type RiskgateDatabase } from '../src/database/database.ts';
import { DatabaseOutboxStore, UNREADABLE_SPEC_REASON } from '../src/outbox/database-outbox-store.ts';
import { Outbox } from '../src/outbox/outbox.ts';
import { outboxMigrations } from '../src/outbox/outbox-tables.ts';
import { eventually } from './support/eventually.ts';
import { lockOutSpec, outboxSqliteFile } from './support/outbox-database.ts';
import { describeOnPostgres } from './support/postgres-server.ts';
import { allowUpdate, refuseUpdate } from './support/refused-update.ts';

/**
 * The database outbox store against what its rows and its database can do to it (the reviewer's
 * findings on issue 30): a row whose spec cannot be read, a database that refuses a row against
 * one that is down, and entries committed out of their `seq` order (PostgreSQL). On the embedded
 * SQLite file and on a real PostgreSQL.
 */

let n = 0;
function spec(user: string): ActionSpec {
  n++;
  return lockOutSpec(n, user);
}

const T0 = 1_800_000_000_000;
const LEASE = 10_000;

interface Opened {
  store: DatabaseOutboxStore;
  database: RiskgateDatabase;
  unreadable: string[];
}

async function open(target: DatabaseTarget): Promise<Opened> {
  const database = await openDatabase(target, { migrations: outboxMigrations });
  const unreadable: string[] = [];
  const store = new DatabaseOutboxStore(database, {
    ownsDatabase: true,
    onUnreadable: (id) => unreadable.push(id),
  });
  return { store, database, unreadable };
}

/** Overwrites the stored spec of `id` (a damaged row, or one a later version wrote). */
async function damage(database: RiskgateDatabase, id: string, text: string): Promise<void> {
  await sql`UPDATE outbox_entry SET spec = ${text} WHERE id = ${id}`.execute(database.db);
}

async function rowOf(database: RiskgateDatabase, id: string) {
  const { rows } = await sql<{ status: string; reason: string | null; logged: number }>`
    SELECT status, reason, logged FROM outbox_entry WHERE id = ${id}`.execute(database.db);
  return rows[0] && { ...rows[0], logged: Number(rows[0].logged) };
}

/** A companion whose row the database refuses (NOT NULL): SQLITE_CONSTRAINT, SQLSTATE 23502. */
const refusedRow = {
  write: (tx: RiskgateDatabase['db']) =>
    sql`INSERT INTO outbox_entry (id) VALUES (${'x'})`.execute(tx).then(() => {}),
};

/**
 * The same refused row as statements known up front: on the SQLite file the store sends the
 * group's entries and these in one script (`RiskgateDatabase.script`), elsewhere `write` runs.
 */
const refusedStatement = {
  ...refusedRow,
  statements: (db: RiskgateDatabase['db']) => [
    sql`INSERT INTO outbox_entry (id) VALUES (${'x'})`.compile(db),
  ],
};

/** A companion statement whose row can be seen: it notes itself (`text`) on the entry `id` just written. */
function notingStatement(id: string, text = 'noted') {
  const note = sql`UPDATE outbox_entry SET last_error = ${text} WHERE id = ${id}`;
  return {
    write: (tx: RiskgateDatabase['db']) => note.execute(tx).then(() => {}),
    statements: (db: RiskgateDatabase['db']) => [note.compile(db)],
  };
}

/** A trigger refusing any lease to `owner` (a claim that fails in the database, mid-transaction). */
const refuseLeases = (database: RiskgateDatabase, owner: string) =>
  refuseUpdate(database, {
    name: 'refuse_leases',
    table: 'outbox_entry',
    column: 'lease_owner',
    value: owner,
  });

const allowLeases = (database: RiskgateDatabase) => allowUpdate(database, 'refuse_leases', 'outbox_entry');

function faults(name: string, target: () => DatabaseTarget) {
  describe(`outbox store faults: ${name}`, () => {
    let o: Opened;
    beforeAll(async () => {
      o = await open(target());
    });
    afterAll(() => o?.store.close());

    it('sets aside a row whose spec cannot be read (dead, unreadable_spec, logged) and claims the rest of its batch', async () => {
      const [a, b, c, d] = [spec('ua'), spec('ub'), spec('uc'), spec('ud')];
      await o.store.append([a, b, c, d], T0);
      await damage(o.database, b.id, '{"truncat');
      await damage(
        o.database,
        c.id,
        JSON.stringify({ ...c, type: 'teleport_user', call: { method: 'beam' } }),
      );
      const claimed = await o.store.claim('w1', 10, T0, LEASE);
      expect(claimed.map((e) => e.spec.id)).toEqual([a.id, d.id]);
      for (const id of [b.id, c.id])
        expect(await rowOf(o.database, id)).toEqual({
          status: 'dead',
          reason: UNREADABLE_SPEC_REASON,
          logged: 1,
        });
      expect(o.unreadable).toEqual([b.id, c.id]);
      expect(o.store.unreadableSpecs).toBe(2);
      // Never claimed again, never told twice, and the readable ones go on.
      expect(await o.store.claim('w1', 10, T0 + LEASE + 1, LEASE)).toEqual(
        expect.not.arrayContaining([
          expect.objectContaining({ spec: expect.objectContaining({ id: b.id }) }),
        ]),
      );
      expect(await o.store.complete(a.id, 'w1', T0 + 1)).toBe(true);
      expect(await o.store.list({ limit: 100 })).toEqual(
        expect.not.arrayContaining([
          expect.objectContaining({ spec: expect.objectContaining({ id: c.id }) }),
        ]),
      );
      expect(o.store.unreadableSpecs).toBe(2);
    });

    it('passes over an ended row whose spec cannot be read when telling outcome lines, and tells the others', async () => {
      const [a, b] = [spec('ue'), spec('uf')];
      await o.store.append([a, b], T0);
      await o.store.claim('w2', 10, T0, LEASE);
      await o.store.complete(a.id, 'w2', T0 + 1);
      await o.store.complete(b.id, 'w2', T0 + 1);
      await damage(o.database, a.id, 'null');
      const told = (await o.store.unlogged(100)).map((e) => e.spec.id);
      expect(told).toContain(b.id);
      expect(told).not.toContain(a.id);
      expect(await rowOf(o.database, a.id)).toEqual({
        status: 'dead',
        reason: UNREADABLE_SPEC_REASON,
        logged: 1,
      });
      expect(o.unreadable).toContain(a.id);
    });

    it('fails only the append whose companion row the database refuses, not the others of its turn', async () => {
      const [a, b] = [spec('ug'), spec('uh')];
      const refused = o.store.append([a], T0, [refusedRow]);
      const taken = o.store.append([b], T0);
      await expect(refused).rejects.toThrow();
      expect(await taken).toEqual([true]);
      expect(await o.store.get(a.id)).toBeUndefined();
      expect((await o.store.get(b.id))?.status).toBe('pending');
    });

    it('rolls back the whole group when a companion statement in its middle is refused, then fails only that append', async () => {
      const [a, b] = [spec('uj'), spec('uk')];
      // One transaction: both entries, the refused statement, then b's note.
      const refused = o.store.append([a], T0, [refusedStatement]);
      const taken = o.store.append([b], T0, [notingStatement(b.id)]);
      await expect(refused).rejects.toMatchObject({ message: expect.stringMatching(/NOT NULL|null value/) });
      expect(await taken).toEqual([true]);
      // a's entry, inserted before the refused statement, went with it; b's, alone, with its note.
      expect(await o.store.get(a.id)).toBeUndefined();
      expect(await o.store.get(b.id)).toMatchObject({ status: 'pending', lastError: 'noted' });
    });

    it('keeps the completions of a settle-and-claim step whose claim fails, and claims at the next step', async () => {
      const [first, next] = [spec('u-settle'), spec('u-settle')];
      await o.store.append([first, next], T0);
      expect((await o.store.claim('w-settle', 10, T0, LEASE)).map((e) => e.spec.id)).toContain(first.id);
      // From now on the database refuses to lease an entry to w-settle: the claim fails mid-step.
      await refuseLeases(o.database, 'w-settle');
      const step = {
        owner: 'w-settle',
        logged: [],
        limit: 10,
        leaseMs: LEASE,
      };
      try {
        const settled = await o.store.settleAndClaim({
          ...step,
          completed: [{ id: first.id, nowMs: T0 + 1 }],
          nowMs: T0 + 1,
        });
        // The completion landed (on SQLite its script rolled back, then it went alone); the claim
        // did not, and says why.
        expect(settled).toMatchObject({ completed: [true], logged: true, claimed: [] });
        expect(settled.errors.length).toBeGreaterThan(0);
        for (const error of settled.errors) expect(String(error)).toContain('refuse_leases: refused');
        expect(await o.store.get(first.id)).toMatchObject({ status: 'delivered' });
        expect(await o.store.get(next.id)).toMatchObject({ status: 'pending', attempts: 0 });
      } finally {
        await allowLeases(o.database);
      }
      // The next step's claim takes the user's next entry.
      const again = await o.store.settleAndClaim({ ...step, completed: [], nowMs: T0 + 2 });
      expect(again.claimed.map((e) => e.spec.id)).toEqual([next.id]);
    });

    it('fails a group once when the database is down, without trying each append again', async () => {
      const writes = [0, 0, 0];
      // What a dead connection throws (PostgreSQL's class 08, or no code at all).
      const down = Object.assign(new Error('Connection terminated unexpectedly'), { code: '08006' });
      const appends = [0, 1, 2].map((i) =>
        o.store.append([spec(`ui${i}`)], T0, [
          {
            write: async () => {
              writes[i]!++;
              if (i === 0) throw down;
            },
          },
        ]),
      );
      const settled = await Promise.allSettled(appends);
      expect(settled.map((s) => s.status)).toEqual(['rejected', 'rejected', 'rejected']);
      // The group's one transaction, stopped at the first companion: not one more per append.
      expect(writes).toEqual([1, 0, 0]);
    });
  });
}

faults('SQLite', () => outboxSqliteFile('outbox-faults-'));

describe('a group commit on the SQLite file', () => {
  it('sends the entries and the companions’ statements of a turn to the database thread in one message', async () => {
    const o = await open(outboxSqliteFile('outbox-script-'));
    const specs = [spec('ul'), spec('um'), spec('un')];
    const { sent } = await postedDuring(async () => {
      const added = await Promise.all(specs.map((s) => o.store.append([s], T0, [notingStatement(s.id)])));
      expect(added).toEqual([[true], [true], [true]]);
    });
    try {
      // One script: the three entries in one insert, then the three notes; no begin or commit alone.
      expect(sent).toEqual([expect.objectContaining({ type: 'script' })]);
      expect((sent[0] as { statements: unknown[] }).statements).toHaveLength(4);
      for (const s of specs)
        expect(await o.store.get(s.id)).toMatchObject({ status: 'pending', lastError: 'noted' });
    } finally {
      await o.store.close();
    }
  });
  it('rolls a group back whole when the disk fills in its script: nothing promised, the failure told, the next group committed once space is back', async () => {
    const o = await open(outboxSqliteFile('outbox-full-'));
    const told: unknown[] = [];
    // The outbox component logs what `onError` is told ('outbox store failed'); a decision answers
    // a refused action failed (queue_refused), counted in riskgate_action_answers_total.
    const outbox = new Outbox({
      store: o.store,
      admin: {} as ActionAdmin,
      onOutcome: () => {},
      onError: (error) => told.push(error),
    });
    const jobOf = (s: ActionSpec): ActionJob => ({
      key: s.id,
      decisionId: s.decisionId,
      type: s.type,
      target: s.target,
      spec: s,
    });
    try {
      // The file may not grow: an entry fits a page it has, a 200 kB note needs pages it cannot have.
      const { rows } = await sql<{ page_count: number }>`pragma page_count`.execute(o.database.db);
      await sql.raw(`pragma max_page_count = ${Number(rows[0]!.page_count)}`).execute(o.database.db);
      const [a, b] = [spec('full-a'), spec('full-b')];
      const big = 'x'.repeat(200_000);
      // Two decisions of one turn: one group, one script (both entries, then both notes).
      const answers = await Promise.all([
        outbox.submit([jobOf(a)], { companion: notingStatement(a.id) }),
        outbox.submit([jobOf(b)], { companion: notingStatement(b.id, big) }),
      ]);
      expect(answers).toEqual([['refused'], ['refused']]);
      // Each submit told (the log line of each): the same error, the group's one script tried once
      // (not again per append: the disk would refuse each again). Its third statement (the
      // entries' insert, a's note, b's note) met the full disk.
      expect(told).toHaveLength(2);
      expect(told[0]).toBe(told[1]);
      expect(told[0]).toMatchObject({
        message: expect.stringMatching(/database or disk is full/),
        errcode: 13,
        statement: 2,
      });
      // Nothing of the script: neither entry, nor a's note that ran before the failing one.
      expect(await o.store.get(a.id)).toBeUndefined();
      expect(await o.store.get(b.id)).toBeUndefined();
      // Space again: the next group commits whole.
      await sql.raw('pragma max_page_count = 1073741823').execute(o.database.db);
      expect(await outbox.submit([jobOf(b)], { companion: notingStatement(b.id, big) })).toEqual(['queued']);
      expect(await o.store.get(b.id)).toMatchObject({ status: 'pending', lastError: big });
      expect(told).toHaveLength(2);
    } finally {
      await outbox.drain(100);
      await o.store.close();
    }
  });
});

describe('a delivery turn on the SQLite file', () => {
  it('sends the completions, the confirmed lines and the claim to the database thread in one message', async () => {
    const o = await open(outboxSqliteFile('outbox-turn-'));
    const [first, next, told] = [spec('ut'), spec('ut'), spec('ut-told')];
    try {
      await o.store.append([first, next, told], T0);
      await o.store.claim('w-turn', 10, T0, LEASE);
      await o.store.complete(told.id, 'w-turn', T0 + 1);
      const { sent, result: settled } = await postedDuring(() =>
        o.store.settleAndClaim({
          owner: 'w-turn',
          completed: [{ id: first.id, nowMs: T0 + 2 }],
          logged: [told.id],
          limit: 10,
          nowMs: T0 + 2,
          leaseMs: LEASE,
        }),
      );
      expect(settled.claimed.map((e) => e.spec.id)).toEqual([next.id]);
      expect(sent).toEqual([expect.objectContaining({ type: 'script' })]);
      expect((sent[0] as { statements: unknown[] }).statements).toHaveLength(3);
      expect(await rowOf(o.database, told.id)).toMatchObject({ logged: 1 });
    } finally {
      await o.store.close();
    }
  });

  it('tells an outcome done when the claim that carries its completion fails, and claims again at the next poll', async () => {
    const o = await open(outboxSqliteFile('outbox-turn-fail-'));
    const [first, next] = [spec('uf'), spec('uf')];
    const errors: unknown[] = [];
    const outcomes: ActionOutcome[] = [];
    let calls = 0;
    let release = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    // The first lock-out is held until the database refuses leases: its completion's step fails.
    const admin = {
      updateUser: async () => {
        if (++calls === 1) await held;
        return { ok: true, value: {}, durationMs: 0 };
      },
    } as unknown as ActionAdmin;
    const outbox = new Outbox({
      store: o.store,
      admin,
      owner: 'w-outbox',
      onOutcome: (outcome) => outcomes.push(outcome),
      onError: (error) => errors.push(error),
      pollMs: 50,
    });
    try {
      await o.store.append([first], Date.now());
      outbox.start();
      await eventually(() => calls === 1, { what: 'the first attempt' });
      // Its completion goes with a claim the database refuses; the user's next action waits behind it.
      await refuseLeases(o.database, 'w-outbox');
      await o.store.append([next], Date.now());
      release();
      await eventually(() => outcomes.length === 1, { what: 'the first outcome' });
      expect(outcomes[0]).toMatchObject({ key: first.id, status: 'done' });
      expect(await o.store.get(first.id)).toMatchObject({ status: 'delivered' });
      expect(errors.length).toBeGreaterThan(0);
      await allowLeases(o.database);
      await eventually(() => outcomes.length === 2, { what: 'the next action, claimed at a later poll' });
      expect(outcomes[1]).toMatchObject({ key: next.id, status: 'done' });
      expect(calls).toBe(2);
    } finally {
      release();
      await outbox.drain(0);
      await o.store.close();
    }
  });
});

describeOnPostgres('with PostgreSQL', (pg) => {
  faults('PostgreSQL', () => ({ kind: 'postgres', url: pg.url }));

  it('makes a process’s appends visible in the order they were made: a later group waits for the one in flight', async () => {
    const [writer, reader] = [
      await open({ kind: 'postgres', url: pg.url }),
      await open({ kind: 'postgres', url: pg.url }),
    ];
    let release = () => {};
    try {
      const [lock, unlock] = [spec('order-1'), spec('order-1')];
      const held = new Promise<void>((r) => {
        release = r;
      });
      let started = () => {};
      const inTransaction = new Promise<void>((r) => {
        started = r;
      });
      // The lock-out's group holds its transaction open (its seq taken) ...
      const first = writer.store.append([lock], T0, [
        {
          write: async () => {
            started();
            await held;
          },
        },
      ]);
      await inTransaction;
      // ... while the user's next action is appended by the same process.
      const second = writer.store.append([unlock], T0);
      // Read from another connection as many times as a commit takes many times over.
      let seen = false;
      for (let i = 0; i < 30 && !seen; i++) seen = (await reader.store.get(unlock.id)) !== undefined;
      expect(seen).toBe(false);
      expect((await reader.store.claim('r', 10, T0, LEASE)).map((e) => e.spec.id)).not.toContain(unlock.id);
      release();
      expect(await first).toEqual([true]);
      expect(await second).toEqual([true]);
      expect((await reader.store.claim('r', 10, T0, LEASE)).map((e) => e.spec.id)).toEqual([lock.id]);
    } finally {
      release();
      await writer.store.close();
      await reader.store.close();
    }
  });

  it('never runs two of a user’s actions at once when the earlier one commits after the later was claimed (two replicas)', async () => {
    const [a, b] = [
      await open({ kind: 'postgres', url: pg.url }),
      await open({ kind: 'postgres', url: pg.url }),
    ];
    let release = () => {};
    try {
      const [early, late] = [spec('order-2'), spec('order-2')];
      const held = new Promise<void>((r) => {
        release = r;
      });
      let started = () => {};
      const inTransaction = new Promise<void>((r) => {
        started = r;
      });
      // Replica A takes the lower seq and commits last; replica B's later entry commits first.
      const slow = a.store.append([early], T0, [
        {
          write: async () => {
            started();
            await held;
          },
        },
      ]);
      await inTransaction;
      await b.store.append([late], T0);
      expect((await b.store.claim('rb', 10, T0, LEASE)).map((e) => e.spec.id)).toEqual([late.id]);
      release();
      await slow;
      // The late-committed earlier entry waits while the other is leased, then goes.
      expect((await a.store.claim('ra', 10, T0, LEASE)).map((e) => e.spec.id)).not.toContain(early.id);
      expect(await b.store.complete(late.id, 'rb', T0 + 1)).toBe(true);
      expect((await a.store.claim('ra', 10, T0 + 2, LEASE)).map((e) => e.spec.id)).toEqual([early.id]);
    } finally {
      release();
      await a.store.close();
      await b.store.close();
    }
  });
});

/** What the main thread posts to worker threads (the SQLite query thread) while `step` runs. */
async function postedDuring<T>(step: () => Promise<T>): Promise<{ sent: unknown[]; result: T }> {
  const sent: unknown[] = [];
  const post = Worker.prototype.postMessage;
  Worker.prototype.postMessage = function (
    this: Worker,
    message: unknown,
    transfer?: Parameters<Worker['postMessage']>[1],
  ) {
    sent.push(message);
    return post.call(this, message, transfer);
  };
  try {
    return { sent, result: await step() };
  } finally {
    Worker.prototype.postMessage = post;
  }
}
