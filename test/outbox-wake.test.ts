import { afterEach, describe, expect, it } from 'vitest';
import type { ActionAdmin, ActionJob, ActionSpec } from '../src/actions/admin-actions.ts';
import { Outbox } from '../src/outbox/outbox.ts';
import type { OutboxStore } from '../src/outbox/outbox-store.ts';
import { eventually } from './support/eventually.ts';
import { openDatabaseOutbox } from './support/outbox-database.ts';

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
