import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import type { ActionOutcome } from '../src/actions/action-dispatcher.ts';
import type { ActionAdmin, ActionJob } from '../src/actions/admin-actions.ts';
import { Outbox } from '../src/outbox/outbox.ts';
import type { CompanionTx, OutboxStore } from '../src/outbox/outbox-store.ts';
import { eventually } from './support/eventually.ts';
import { lockOutSpec, openDatabaseOutbox } from './support/outbox-database.ts';

/**
 * The outbox's deferred actions (issue 22, item 3), on a real SQLite store whose appends are held
 * at a gate (a store that stopped answering): a submit answers by its deadline, what was not
 * acknowledged is held (bounded) and written once the store answers, and whatever is still held at
 * shutdown is reported failed, never dropped silently.
 */

let seq = 0;
function job(user: string): ActionJob {
  seq++;
  const spec = lockOutSpec(seq, user);
  return { key: spec.id, decisionId: spec.decisionId, type: spec.type, target: user, spec };
}

/** `store` with its appends held until `open()`; the held ones then go through in order. */
function gated(store: OutboxStore) {
  let gate: Promise<void> | undefined;
  let release = () => {};
  const append: OutboxStore['append'] = async (specs, nowMs, companions) => {
    if (gate !== undefined) await gate;
    return store.append(specs, nowMs, companions);
  };
  // Every other call goes to the store itself (its private fields need it as `this`).
  const wrapped = new Proxy(store, {
    get: (target, name) => {
      if (name === 'append') return append;
      const value = Reflect.get(target, name) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return {
    store: wrapped,
    close() {
      gate = new Promise((r) => {
        release = r;
      });
    },
    open() {
      gate = undefined;
      release();
    },
  };
}

const opened: OutboxStore[] = [];
afterEach(async () => {
  for (const s of opened.splice(0)) await s.close();
});

async function setUp(options: { maxDeferred?: number } = {}) {
  const sqlite = await openDatabaseOutbox();
  opened.push(sqlite);
  const g = gated(sqlite);
  const outcomes: ActionOutcome[] = [];
  const outbox = new Outbox({
    store: g.store,
    admin: {} as ActionAdmin,
    onOutcome: (o) => outcomes.push(o),
    pollMs: 50,
    ...options,
  });
  return { sqlite, g, outbox, outcomes };
}

/** `store` whose appends never answer while `stalled` (a store that hangs), then answer again. */
function stalling(store: OutboxStore) {
  const state = { stalled: true };
  const wrapped = new Proxy(store, {
    get: (target, name) => {
      if (name === 'append')
        return ((specs, nowMs, companions) =>
          state.stalled
            ? new Promise(() => {})
            : target.append(specs, nowMs, companions)) as OutboxStore['append'];
      const value = Reflect.get(target, name) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { store: wrapped, state };
}

describe('deferred actions', () => {
  it('writes each deferred submit alone: one the database refuses ends failed (queue_refused), the others are written', async () => {
    const sqlite = await openDatabaseOutbox();
    opened.push(sqlite);
    const s = stalling(sqlite);
    const outcomes: ActionOutcome[] = [];
    const outbox = new Outbox({
      store: s.store,
      admin: {} as ActionAdmin,
      onOutcome: (o) => outcomes.push(o),
      pollMs: 50,
      submitTimeoutMs: 30,
    });
    const [fine, refused, alsoFine] = [job('u-fine'), job('u-refused'), job('u-also-fine')];
    // Its lock-out record is a row the database refuses (NOT NULL): SQLITE_CONSTRAINT.
    const companion = {
      write: (tx: CompanionTx) =>
        sql`INSERT INTO outbox_entry (id) VALUES (${'x'})`.execute(tx).then(() => {}),
    };
    expect(await outbox.submit([fine], { timeoutMs: 30 })).toEqual(['deferred']);
    expect(await outbox.submit([refused], { timeoutMs: 30, companion })).toEqual(['deferred']);
    expect(await outbox.submit([alsoFine], { timeoutMs: 30 })).toEqual(['deferred']);
    s.state.stalled = false;
    await eventually(async () => (outbox.deferred === 0 ? true : undefined));
    expect(await sqlite.get(fine.key)).toMatchObject({ status: 'pending' });
    expect(await sqlite.get(alsoFine.key)).toMatchObject({ status: 'pending' });
    expect(await sqlite.get(refused.key)).toBeUndefined();
    expect(outcomes).toEqual([
      expect.objectContaining({ key: refused.key, status: 'failed', reason: 'queue_refused' }),
    ]);
    await outbox.drain(100);
  });

  it('answers deferred by the deadline, then writes the action once when the store answers', async () => {
    const { sqlite, g, outbox } = await setUp();
    g.close();
    const startedAt = performance.now();
    const a = job('u1');
    expect(await outbox.submit([a], { timeoutMs: 30 })).toEqual(['deferred']);
    expect(performance.now() - startedAt).toBeLessThan(2000);
    expect(outbox.deferred).toBe(1);
    expect(await sqlite.get(a.key)).toBeUndefined();

    g.open();
    await eventually(async () => (outbox.deferred === 0 ? true : undefined));
    // The timed-out write and the retry both reached the store: one entry.
    expect(await sqlite.get(a.key)).toMatchObject({ status: 'pending' });
    expect((await sqlite.list({})).filter((e) => e.spec.id === a.key)).toHaveLength(1);
    // A healthy store: queued, as ever.
    expect(await outbox.submit([job('u2')], { timeoutMs: 1000 })).toEqual(['queued']);
    await outbox.drain(100);
  });

  it("writes a deferred submit's companion rows with its entries, and tells it committed once", async () => {
    const { sqlite, g, outbox } = await setUp();
    g.close();
    const a = job('u-companion');
    const event = { ...job('u-companion-event').spec, type: 'deliver_webhook' as const, orderingKey: 'hook' };
    let writes = 0;
    let committed = 0;
    const companion = {
      specs: [event],
      write: async () => {
        writes++;
      },
      committed: () => {
        committed++;
      },
    };
    expect(await outbox.submit([a], { timeoutMs: 30, companion })).toEqual(['deferred']);
    expect(writes).toBe(0);
    g.open();
    await eventually(async () => (outbox.deferred === 0 ? true : undefined));
    // The timed-out write and the retry may both reach the store: each id once, told once.
    expect(writes).toBeGreaterThanOrEqual(1);
    expect(committed).toBe(1);
    expect(await sqlite.get(a.key)).toMatchObject({ status: 'pending' });
    expect(await sqlite.get(event.id)).toMatchObject({ status: 'pending' });
    await outbox.drain(100);
  });

  it('refuses past its bound, and reports what it still holds at shutdown failed (shutdown)', async () => {
    const { g, outbox, outcomes } = await setUp({ maxDeferred: 1 });
    g.close();
    const held = job('u3');
    expect(await outbox.submit([held], { timeoutMs: 20 })).toEqual(['deferred']);
    expect(await outbox.submit([job('u4')], { timeoutMs: 20 })).toEqual(['refused']);
    await outbox.drain(100);
    expect(outcomes).toEqual([
      expect.objectContaining({ key: held.key, status: 'failed', reason: 'shutdown' }),
    ]);
    expect(outbox.deferred).toBe(0);
    expect(await outbox.submit([job('u5')], { timeoutMs: 20 })).toEqual(['refused']);
    g.open();
  });
});
