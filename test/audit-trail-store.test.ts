import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { auditMigrations, databaseAuditTrail } from '../src/audit/database-audit-trail.ts';
import { type DatabaseTarget, openDatabase } from '../src/database/database.ts';
import { stateFiles } from '../src/database/state-files.ts';
import type { AuditEntry } from '../src/operators/audit-trail.ts';
import { DrivenClock } from '../src/timing/driven-clock.ts';
import { failingDatabase } from './support/failing-database.ts';
import { describeOnPostgres } from './support/postgres-server.ts';
import { tempDirForBlock } from './support/temp-dir-for-block.ts';

/**
 * The audit trail's store (issue 25): the same entries, order, filters and pages on SQLite and on
 * PostgreSQL; ids sort by time, also within one millisecond. Issue 30: each entry's outcome is
 * written after it and read beside it, `unknown` until then.
 */

const change = (actor: string, action: AuditEntry['action'], target: string) =>
  ({
    actor,
    role: 'admin',
    keyId: 'key-0123456789ab',
    action,
    target,
    from: '192.0.2.1',
  }) as const;

async function behavesAsAnAuditTrail(target: DatabaseTarget): Promise<void> {
  const database = await openDatabase(target, { migrations: auditMigrations });
  try {
    // Three entries in one millisecond, then one in the next: the order they were written.
    const clock = new DrivenClock({ nowMs: Date.parse('2026-05-01T10:00:00.000Z') });
    const audit = databaseAuditTrail(database, { clock });
    const first = await audit.record({
      ...change('ana', 'decision.label', 'd-1'),
      detail: { label: 'fraud', note: 'é ✓' },
    });
    await audit.record(change('adam', 'action.drop', 'a-1'));
    await audit.record(change('ana', 'decision.label', 'd-2'));
    clock.tick(1);
    const last = await audit.record(change('adam', 'action.retry', 'a-1'));

    expect(first).toEqual({
      id: expect.stringMatching(/^[0-9a-f]{24}$/),
      at: '2026-05-01T10:00:00.000Z',
      ...change('ana', 'decision.label', 'd-1'),
      detail: { label: 'fraud', note: 'é ✓' },
    });
    expect(last.at).toBe('2026-05-01T10:00:00.001Z');

    const all = await audit.list({});
    expect(all.entries.map((e) => `${e.actor} ${e.action} ${e.target}`)).toEqual([
      'adam action.retry a-1',
      'ana decision.label d-2',
      'adam action.drop a-1',
      'ana decision.label d-1',
    ]);
    expect(all.nextCursor).toBeUndefined();
    // Nothing settled yet: each entry is an intent, its outcome unknown.
    expect(all.entries[3]).toEqual({ ...first, outcome: { status: 'unknown' } });
    expect(all.entries[0]).not.toHaveProperty('detail');

    expect((await audit.list({ actor: 'ana' })).entries.map((e) => e.target)).toEqual(['d-2', 'd-1']);
    expect((await audit.list({ action: 'action.drop' })).entries.map((e) => e.actor)).toEqual(['adam']);
    expect((await audit.list({ target: 'a-1' })).entries.map((e) => e.action)).toEqual([
      'action.retry',
      'action.drop',
    ]);

    // Pages of two, newest first, each cursor continuing where the last page ended.
    const page1 = await audit.list({ limit: 2 });
    const page2 = await audit.list({ limit: 2, cursor: page1.nextCursor! });
    expect([...page1.entries, ...page2.entries]).toEqual(all.entries);
    expect(page1.nextCursor).toBe(page1.entries[1]!.id);
    expect(page2.nextCursor).toBeUndefined(); // the last page
    expect(await audit.list({ limit: 2, cursor: page2.entries[1]!.id })).toEqual({ entries: [] });

    // Outcomes: written after, beside their entry; the first stands; the others stay unknown.
    clock.tick(5);
    await audit.settle(first.id, { status: 'failed', code: 'RG_ERR_DATABASE_UNAVAILABLE' });
    await audit.settle(first.id, { status: 'done' });
    await audit.settle(last.id, { status: 'done' });
    const settled = await audit.list({});
    expect(settled.entries.map((e) => e.outcome)).toEqual([
      { status: 'done', at: '2026-05-01T10:00:00.006Z' },
      { status: 'unknown' },
      { status: 'unknown' },
      { status: 'failed', code: 'RG_ERR_DATABASE_UNAVAILABLE', at: '2026-05-01T10:00:00.006Z' },
    ]);
    // The filters and pages are the entries', with their outcomes.
    expect((await audit.list({ actor: 'ana', limit: 1, cursor: settled.entries[2]!.id })).entries).toEqual([
      settled.entries[3],
    ]);
  } finally {
    await database.close();
  }
}

const dir = tempDirForBlock('riskgate-audit-');

describe('the audit trail store', () => {
  it('keeps, orders, filters and pages entries on SQLite', async () => {
    await behavesAsAnAuditTrail({ kind: 'sqlite', path: stateFiles(join(dir, 'state')).control });
  });

  it('rejects a record once its database is closed (the change is then refused)', async () => {
    const audit = databaseAuditTrail(await failingDatabase(auditMigrations));
    await expect(audit.record(change('ana', 'decision.label', 'd-1'))).rejects.toThrow();
  });

  describeOnPostgres('on PostgreSQL', (pg) => {
    it('keeps, orders, filters and pages entries the same', async () => {
      await behavesAsAnAuditTrail({ kind: 'postgres', url: pg.url });
    });
  });
});
