import { existsSync, utimesSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import type { ActionAdmin, ActionJob, ActionSpec } from '../src/actions/admin-actions.ts';
import { FileWatermark } from '../src/database/file-watermark.ts';
import { Outbox } from '../src/outbox/outbox.ts';
import type { OutboxStore } from '../src/outbox/outbox-store.ts';
import { DrivenClock } from '../src/timing/driven-clock.ts';
import { eventually } from './support/eventually.ts';
import { openDatabaseOutbox, outboxSqliteFile } from './support/outbox-database.ts';

/**
 * When the outbox looks at its store (issue 32: the lock-out delay): a submit or a finished attempt
 * that comes while a claim is running is claimed as soon as that claim ends, never left for the
 * next poll interval.
 */

function job(user: string): ActionJob {
  const spec: ActionSpec = {
    id: `w1:lock_out_user:${user}`,
    decisionId: 'w1',
    type: 'lock_out_user',
    target: user,
    orderingKey: user,
    call: { method: 'updateUser', userId: user, update: { status: 'locked_out' } },
  };
  return { key: spec.id, decisionId: spec.decisionId, type: spec.type, target: user, spec };
}

const opened: OutboxStore[] = [];
afterEach(async () => {
  for (const s of opened.splice(0)) await s.close();
});

describe('the outbox wakes up', () => {
  it('claims what was submitted during a claim when that claim ends, not at the next poll', async () => {
    const sqlite = await openDatabaseOutbox();
    opened.push(sqlite);
    let claims = 0;
    let release = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    let inClaim = () => {};
    const claiming = new Promise<void>((r) => {
      inClaim = r;
    });
    // The first claim reads the store, then is held (a slow database) before it answers.
    const store = new Proxy(sqlite, {
      get: (target, name) => {
        if (name === 'claim')
          return (async (...args) => {
            const entries = await target.claim(...args);
            if (++claims === 1) {
              inClaim();
              await held;
            }
            return entries;
          }) as OutboxStore['claim'];
        const value = Reflect.get(target, name) as unknown;
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    // Every attempt fails at once (no Admin API): only whether it started matters here.
    const outbox = new Outbox({ store, admin: {} as ActionAdmin, onOutcome: () => {}, pollMs: 600_000 });
    outbox.start();
    await claiming;
    expect(await outbox.submit([job('u-during')], { timeoutMs: 5000 })).toEqual(['queued']);
    release();
    await eventually(() => outbox.attemptsStarted >= 1, { what: 'the submitted action attempted' });
    expect(claims).toBeGreaterThanOrEqual(2);
    await outbox.drain(100);
  });
});

describe('a completion at a low rate', () => {
  /** An outbox on the driven clock, a 50 ms claim delay, every lock-out succeeding at once. */
  function lowRateOutbox(store: OutboxStore) {
    const clock = new DrivenClock();
    const seen = { adminCalls: 0, outcomes: [] as string[] };
    const outbox = new Outbox({
      store,
      admin: {
        updateUser: async () => {
          seen.adminCalls++;
          return { ok: true, value: {}, durationMs: 0 };
        },
      } as unknown as ActionAdmin,
      onOutcome: (o) => seen.outcomes.push(`${o.key} ${o.status}`),
      pollMs: 1000,
      claimDelayMs: 50,
      clock,
    });
    return { clock, seen, outbox };
  }

  it("rides with the next submit's claim when nothing is queued behind it: one store transaction fewer", async () => {
    const sqlite = await openDatabaseOutbox();
    opened.push(sqlite);
    const calls: string[] = [];
    const store = new Proxy(sqlite, {
      get(t, name) {
        const value = Reflect.get(t, name) as unknown;
        if (typeof value !== 'function') return value;
        if (name === 'claim' || name === 'settleAndClaim' || name === 'complete')
          return (...args: unknown[]) => {
            calls.push(name);
            return (value as (...a: unknown[]) => unknown).apply(t, args);
          };
        return value.bind(t);
      },
    });
    const { clock, seen, outbox } = lowRateOutbox(store);
    outbox.start();
    await eventually(() => clock.pendingTimers === 1 && calls.length === 0, {
      what: 'the first wake-up set',
    });
    await clock.advance(50);
    await eventually(() => clock.pendingTimers === 1 && calls.length === 1, { what: 'the first poll done' });
    calls.length = 0;
    expect(await outbox.submit([job('u-a')], { timeoutMs: 5000 })).toEqual(['queued']);
    await clock.advance(50);
    await eventually(() => seen.adminCalls === 1, { what: "u-a's lock-out called" });
    // The attempt's end (its completion queued) is a few turns after the call.
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    await clock.advance(20);
    expect(await outbox.submit([job('u-b')], { timeoutMs: 5000 })).toEqual(['queued']);
    await clock.advance(50);
    await eventually(() => seen.adminCalls === 2 && seen.outcomes.length === 1, {
      what: "u-b's lock-out called",
    });
    // u-a's completion went with the claim of u-b: no transaction of its own in between.
    expect(calls).toEqual(['claim', 'settleAndClaim']);
    await eventually(
      async () => {
        await clock.advance(50);
        return seen.outcomes.length === 2;
      },
      { what: "u-b's outcome" },
    );
    expect(seen.outcomes).toEqual([`${job('u-a').key} done`, `${job('u-b').key} done`]);
    await outbox.drain(0);
  });

  it("is sent at once when the user's next action waits behind it: no claim delay per action of a queue", async () => {
    const store = await openDatabaseOutbox();
    opened.push(store);
    const { clock, seen, outbox } = lowRateOutbox(store);
    outbox.start();
    await eventually(() => clock.pendingTimers === 1, { what: 'the first wake-up set' });
    const first = job('u-q');
    const second = { ...job('u-q'), key: 'w2:lock_out_user:u-q' };
    second.spec = { ...second.spec, id: second.key, decisionId: 'w2' };
    expect(await outbox.submit([first, second], { timeoutMs: 5000 })).toEqual(['queued', 'queued']);
    await clock.advance(50);
    // The clock stands still from here: the second action needs no timer of the claim delay.
    await eventually(
      async () => {
        await clock.advance(0);
        return seen.adminCalls === 2;
      },
      { what: "the user's second action called" },
    );
    // Nothing behind the second: its completion waits for a claim, at most the claim delay.
    await eventually(
      async () => {
        await clock.advance(50);
        return seen.outcomes.length === 2;
      },
      { what: "the second's outcome" },
    );
    expect(seen.outcomes).toEqual([`${first.key} done`, `${second.key} done`]);
    await outbox.drain(0);
  });
});

describe('an idle outbox on the SQLite file', () => {
  /** The file's (and its WAL's) times an hour back: older than any tick of the file system's clock. */
  const ageFile = (path: string) => {
    const past = new Date(Date.now() - 3_600_000);
    for (const p of [path, `${path}-wal`]) if (existsSync(p)) utimesSync(p, past, past);
  };

  it('skips its queries while nobody writes to the file, and claims at the next poll what another process appended', async () => {
    const target = outboxSqliteFile();
    const path = (target as { path: string }).path;
    const mine = await openDatabaseOutbox(target);
    const other = await openDatabaseOutbox(target);
    opened.push(mine, other);
    let claims = 0;
    const store = new Proxy(mine, {
      get(t, name) {
        if (name === 'claim')
          return ((...args: Parameters<OutboxStore['claim']>) => {
            claims++;
            return t.claim(...args);
          }) as OutboxStore['claim'];
        const value = Reflect.get(t, name) as unknown;
        return typeof value === 'function' ? value.bind(t) : value;
      },
    });
    const clock = new DrivenClock();
    // The lock-out succeeds: nothing is left for a retry (the drain waits on the driven clock).
    const admin = {
      updateUser: async () => ({ ok: true, value: {}, durationMs: 0 }),
    } as unknown as ActionAdmin;
    let outcomes = 0;
    const outbox = new Outbox({
      store,
      admin,
      onOutcome: () => {
        outcomes++;
      },
      pollMs: 1000,
      quietFullPollMs: 10_000,
      claimDelayMs: 10,
      clock,
      watermark: new FileWatermark(path),
    });
    ageFile(path);
    outbox.start();
    // Each poll ends by setting the next: the poll timer is the one timer left once it has run.
    const polled = () => eventually(() => clock.pendingTimers === 1, { what: 'the poll done' });
    await eventually(() => clock.pendingTimers === 1 && claims === 0, { what: 'the first wake-up set' });
    await clock.advance(10);
    await polled();
    expect(claims).toBe(1);
    for (let i = 0; i < 3; i++) {
      await clock.advance(1000);
      await polled();
    }
    expect({ claims, quietPolls: outbox.quietPolls }).toEqual({ claims: 1, quietPolls: 3 });
    // Another process sharing the file (a cluster's worker) appends an action.
    expect(await other.append([job('u-other').spec], clock.nowMs())).toEqual([true]);
    await clock.advance(1000);
    await eventually(() => outbox.attemptsStarted === 1, { what: 'the other process’s action attempted' });
    expect(claims).toBe(2);
    // Its completion goes with the next claim, within the claim delay (nothing queued behind it).
    await eventually(
      async () => {
        await clock.advance(10);
        return outcomes === 1;
      },
      { what: 'its outcome' },
    );
    // Nothing left to deliver (a drain's grace would wait on the driven clock).
    await outbox.drain(0);
  });

  it('stats the file once per poll interval under a stream of submits, not at every wake-up', async () => {
    const target = outboxSqliteFile();
    const path = (target as { path: string }).path;
    const store = await openDatabaseOutbox(target);
    opened.push(store);
    /** The real watermark, its marks counted (each is a `stat` of the file and of its WAL). */
    class CountedWatermark extends FileWatermark {
      marks = 0;
      override mark(): string | undefined {
        this.marks++;
        return super.mark();
      }
    }
    const watermark = new CountedWatermark(path);
    const clock = new DrivenClock();
    let outcomes = 0;
    const outbox = new Outbox({
      store,
      admin: { updateUser: async () => ({ ok: true, value: {}, durationMs: 0 }) } as unknown as ActionAdmin,
      onOutcome: () => {
        outcomes++;
      },
      pollMs: 1000,
      quietFullPollMs: 10_000,
      claimDelayMs: 10,
      clock,
      watermark,
    });
    outbox.start();
    const polled = () => eventually(() => clock.pendingTimers === 1, { what: 'the poll done' });
    await polled();
    await clock.advance(10);
    await polled();
    const before = watermark.marks;
    // Five lock-outs 100 ms apart: each submit and each completion wakes a poll that claims.
    for (let i = 0; i < 5; i++) {
      expect(await outbox.submit([job(`u-stream-${i}`)], { timeoutMs: 5000 })).toEqual(['queued']);
      await clock.advance(10);
      await eventually(
        async () => {
          await clock.advance(10);
          return outcomes === i + 1;
        },
        { what: `lock-out ${i} done` },
      );
      await clock.advance(90);
    }
    // Within one poll interval of the first housekeeping: at most the one poll that housekeeps.
    expect(watermark.marks - before).toBeLessThanOrEqual(1);
    await outbox.drain(0);
  });

  it('queries the store at least every quietFullPollMs, the file untouched', async () => {
    const target = outboxSqliteFile();
    const path = (target as { path: string }).path;
    const store = await openDatabaseOutbox(target);
    opened.push(store);
    const clock = new DrivenClock();
    const outbox = new Outbox({
      store,
      admin: {} as ActionAdmin,
      onOutcome: () => {},
      pollMs: 1000,
      quietFullPollMs: 3000,
      clock,
      watermark: new FileWatermark(path),
    });
    ageFile(path);
    outbox.start();
    const polled = () => eventually(() => clock.pendingTimers === 1, { what: 'the poll done' });
    await polled();
    await clock.advance(10);
    await polled();
    for (let i = 0; i < 6; i++) {
      await clock.advance(1000);
      await polled();
    }
    // Polls at 1 and 2 s skip, the one at 3 s queries; then 4 and 5 s skip, 6 s queries.
    expect(outbox.quietPolls).toBe(4);
    await outbox.drain(0);
  });
});
