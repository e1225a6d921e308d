import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databaseAuditTrail } from '../src/audit/database-audit-trail.ts';
import { openDatabase, type RiskgateDatabase } from '../src/database/database.ts';
import type { AuditEntry } from '../src/operators/audit-trail.ts';
import { ALL_MIGRATIONS } from '../src/service/database-migrations.ts';
import { type Harness, OPS_KEY, startHarness } from './decide-harness.ts';
import { LIST_POLICY } from './support/list-policy.ts';
import { describeOnPostgres, oneRiskgateOn } from './support/postgres-server.ts';

/**
 * Issue 30: the audit trail records what happened. A list add is written to the trail before it is
 * made (the intent), and its outcome after: `done` once the entry is in the database, `failed` with
 * the code when the database refused the write (the trail once showed such an add as made). An
 * intent whose outcome was never written (the process stopped in between) reads `unknown`, on
 * `GET /audit` (the console's Audit page: test/console.test.ts), as does one whose outcome could not
 * be written (counted and logged). On SQLite and on PostgreSQL.
 */

interface Setup {
  h: Harness;
  /** A handle on the harness's database, for the faults and the crash's lone intent. */
  database: RiskgateDatabase;
  stop(): Promise<void>;
}

function recordsWhatHappened(start: () => Promise<Setup>) {
  let s: Setup;
  beforeAll(async () => {
    s = await start();
  }, 60_000);
  afterAll(() => s?.stop());

  const ops = (method: string, path: string, body?: unknown) =>
    fetch(`${s.h.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${OPS_KEY}`, 'content-type': 'application/json' },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
  const trail = async (target?: string) =>
    (
      (await (
        await ops('GET', `/audit${target === undefined ? '' : `?target=${encodeURIComponent(target)}`}`)
      ).json()) as {
        entries: AuditEntry[];
      }
    ).entries;

  it('says done beside a list add that was made', async () => {
    const res = await ops('POST', '/lists/trustedAccounts/entries', {
      value: 'acct-made',
      reason: 'vouched',
    });
    expect(res.status).toBe(201);
    const [entry] = await trail('trustedAccounts:acct-made');
    expect(entry).toMatchObject({
      action: 'list.add',
      outcome: { status: 'done', at: expect.any(String) },
    });
  });

  it('says failed, with the code, beside a list add whose database write failed after its intent', async () => {
    const refuse =
      s.database.engine === 'postgres'
        ? [
            sql`CREATE FUNCTION refuse_list_entry() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'no space left on device (test)'; END $$ LANGUAGE plpgsql`,
            sql`CREATE TRIGGER refuse_list_entry BEFORE INSERT ON list_entry FOR EACH ROW EXECUTE FUNCTION refuse_list_entry()`,
          ]
        : [
            sql`CREATE TRIGGER refuse_list_entry BEFORE INSERT ON list_entry BEGIN SELECT RAISE(ABORT, 'no space left on device (test)'); END`,
          ];
    for (const statement of refuse) await statement.execute(s.database.db);
    try {
      const res = await ops('POST', '/lists/trustedAccounts/entries', {
        value: 'acct-lost',
        reason: 'vouched',
      });
      expect(res.status).toBe(503);
      const [entry] = await trail('trustedAccounts:acct-lost');
      expect(entry).toMatchObject({
        action: 'list.add',
        outcome: { status: 'failed', code: 'RG_ERR_DATABASE_UNAVAILABLE' },
      });
      const page = (await (await ops('GET', '/lists/trustedAccounts')).json()) as {
        items: { value: string }[];
      };
      expect(page.items.map((e) => e.value)).not.toContain('acct-lost');
    } finally {
      await sql`DROP TRIGGER refuse_list_entry${sql.raw(s.database.engine === 'postgres' ? ' ON list_entry' : '')}`.execute(
        s.database.db,
      );
    }
  });

  it('answers a change whose outcome cannot be written: the entry reads unknown, counted and logged', async () => {
    const pg = s.database.engine === 'postgres';
    const refuse = pg
      ? [
          sql`CREATE FUNCTION refuse_outcome() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'no space left on device (test)'; END $$ LANGUAGE plpgsql`,
          sql`CREATE TRIGGER refuse_outcome BEFORE INSERT ON audit_outcome FOR EACH ROW EXECUTE FUNCTION refuse_outcome()`,
        ]
      : [
          sql`CREATE TRIGGER refuse_outcome BEFORE INSERT ON audit_outcome BEGIN SELECT RAISE(ABORT, 'no space left on device (test)'); END`,
        ];
    for (const statement of refuse) await statement.execute(s.database.db);
    try {
      const res = await ops('POST', '/lists/trustedAccounts/entries', {
        value: 'acct-unsettled',
        reason: 'r',
      });
      expect(res.status).toBe(201);
    } finally {
      await sql`DROP TRIGGER refuse_outcome${sql.raw(pg ? ' ON audit_outcome' : '')}`.execute(s.database.db);
    }
    const [entry] = await trail('trustedAccounts:acct-unsettled');
    expect(entry!.outcome).toEqual({ status: 'unknown' });
    const metrics = await (await ops('GET', '/metrics')).text();
    expect(metrics).toMatch(/^riskgate_audit_outcomes_lost_total 1$/m);
    expect(s.h.serviceLog).toContainEqual(
      expect.objectContaining({
        msg: 'audit outcome write failed: the entry reads unknown',
        entryId: entry!.id,
      }),
    );
  });

  it('shows an intent whose outcome was never written (a crash in between) as unknown', async () => {
    // What a process that died between the intent and the change leaves: the entry alone.
    await databaseAuditTrail(s.database).record({
      actor: 'adam',
      role: 'admin',
      keyId: 'key-0123456789ab',
      action: 'list.remove',
      target: 'trustedAccounts:acct-crash',
      from: '127.0.0.1',
      detail: { reason: 'r' },
    });
    const [entry] = await trail('trustedAccounts:acct-crash');
    expect(entry!.outcome).toEqual({ status: 'unknown' });
  });
}

describe('the audit trail’s outcomes on SQLite', () => {
  recordsWhatHappened(async () => {
    const database = await openDatabase({ kind: 'memory' }, { migrations: ALL_MIGRATIONS });
    const h = await startHarness({
      policy: { yaml: LIST_POLICY },
      env: { RISKGATE_OPS_KEYS: `adam:admin:${OPS_KEY}` },
      riskgate: { database },
    });
    return {
      h,
      database,
      stop: async () => {
        await h.stop();
        await database.close();
      },
    };
  });
});

describeOnPostgres('the audit trail’s outcomes on PostgreSQL', (pg) => {
  recordsWhatHappened(async () => {
    const h = await startHarness({
      policy: { yaml: LIST_POLICY },
      env: { ...oneRiskgateOn(pg.url), RISKGATE_OPS_KEYS: `adam:admin:${OPS_KEY}` },
    });
    // A second connection to the same database: the test's hand on it, riskgate's own untouched.
    const database = await openDatabase({ kind: 'postgres', url: pg.url }, { migrations: ALL_MIGRATIONS });
    return {
      h,
      database,
      stop: async () => {
        await h.stop();
        await database.close();
      },
    };
  });
});
