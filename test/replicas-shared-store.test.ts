import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pgClient from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, OPS_KEY, startHarness } from './decide-harness.ts';
import { eventually } from './support/eventually.ts';
import { LIST_POLICY } from './support/list-policy.ts';
import { postgresAvailable, postgresForSuite } from './support/postgres-server.ts';
import { type RunningRedis, redisAvailable, startRedis } from './support/redis-server.ts';

/**
 * Two replicas as docs/operations.md ("Replicated means shared") sets them up: the database and its
 * role created with the SQL the document gives, then two riskgates (in process, each on port 0) on
 * that one PostgreSQL and one Redis. They see one store: a decision answered by one is read through
 * the other, a list entry added on one is listed and denies on the other, the audit trail is one.
 */

const ROOT = join(import.meta.dirname, '..');

/** The SQL block of the step-by-step in docs/operations.md, "Replicated means shared". */
function documentedSql(): string[] {
  const doc = readFileSync(join(ROOT, 'docs/operations.md'), 'utf8');
  const section = doc.slice(doc.indexOf('### Replicated means shared'));
  const block = /```sql\n([\s\S]*?)```/.exec(section)?.[1];
  if (block === undefined) throw new Error('docs/operations.md: no SQL in "Replicated means shared"');
  return block
    .split(';')
    .map((statement) => statement.trim())
    .filter((statement) => statement !== '');
}

describe.runIf(postgresAvailable() && redisAvailable())(
  'two replicas on one PostgreSQL and one Redis',
  () => {
    const pg = postgresForSuite();
    let redis: RunningRedis;
    let one: Harness;
    let two: Harness;

    beforeAll(async () => {
      redis = await startRedis();
      // Step 1, as an administrator: the role and the database it owns.
      const admin = new pgClient.Client({ connectionString: pg.url });
      await admin.connect();
      try {
        for (const statement of documentedSql()) await admin.query(statement);
      } finally {
        await admin.end();
      }
      // Step 2: the URL names that role and its database (the test server trusts loopback: the
      // password is not checked, the role and its rights are).
      const url = `postgres://riskgate:replace-with-the-role-password@127.0.0.1:${pg.port}/riskgate`;
      const env = {
        RISKGATE_DATABASE: url,
        RISKGATE_FEATURE_STORE: redis.url,
        // As deploy/ ships them: the outbox in the shared database (its default), and a state dir
        // nobody can write (/proc: the pods mount nothing writable), so any state kept on disk
        // fails the start.
        RISKGATE_STATE_DIR: '/proc/riskgate-no-state-here',
        RISKGATE_OPS_KEYS: `olga:admin:${OPS_KEY}`,
      };
      // Step 3: both start together, so both migrate the fresh database at once (it happens once).
      one = await startHarness({ policy: { yaml: LIST_POLICY }, env });
      two = await startHarness({ policy: { yaml: LIST_POLICY }, env, sharedSandbox: one.sandbox });
    }, 90_000);
    afterAll(async () => {
      await two?.stop();
      await one?.stop();
      await redis?.stop();
    });

    const ops = (h: Harness, method: string, path: string, body?: unknown) =>
      fetch(`${h.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${OPS_KEY}`, 'content-type': 'application/json' },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      });

    it('both say they are on PostgreSQL, in the role the document creates', async () => {
      for (const h of [one, two]) {
        const health = (await (await fetch(`${h.url}/healthz`)).json()) as Record<string, unknown>;
        expect(health.database).toEqual({ engine: 'postgres' });
        // Nothing it keeps tried the unwritable state dir.
        expect(h.serviceLog.filter((l) => l.level === 'error')).toEqual([]);
      }
      const check = new pgClient.Client({ connectionString: pg.databaseUrl('riskgate') });
      await check.connect();
      try {
        const owners = await check.query(
          "select distinct tableowner from pg_tables where schemaname = 'public' order by tableowner",
        );
        expect(owners.rows).toEqual([{ tableowner: 'riskgate' }]);
      } finally {
        await check.end();
      }
    });

    it('reads through either a decision answered by the other', async () => {
      const answered = await one.decide({ accountId: 'replica-check', ip: '203.0.113.9' });
      expect(answered.status).toBe(200);
      const id = answered.body.decisionId as string;
      // The store writes in batches off the request path (every 100 ms).
      const read = await eventually(
        async () => {
          const res = await ops(two, 'GET', `/decisions/${id}`);
          return res.status === 200 ? ((await res.json()) as Record<string, unknown>) : undefined;
        },
        { what: "the first replica's decision through the second" },
      );
      expect(read).toMatchObject({ decisionId: id, verdict: answered.body.verdict });
      const listed = async (h: Harness) =>
        (
          (await (await ops(h, 'GET', '/decisions?accountId=replica-check')).json()) as {
            decisions: unknown[];
          }
        ).decisions;
      expect(await listed(two)).toEqual(await listed(one));
    });

    it('lists on the other an entry added on one, denies from it there, and keeps one audit trail', async () => {
      const added = await ops(one, 'POST', '/lists/blockedNetworks/entries', {
        value: '192.0.2.0/24',
        reason: 'replica check',
        ttlSeconds: 600,
      });
      expect(added.status).toBe(201);
      const listing = (await (await ops(two, 'GET', '/lists/blockedNetworks')).json()) as {
        items: { value: string }[];
      };
      expect(listing.items.map((e) => e.value)).toContain('192.0.2.0/24');
      await eventually(
        async () =>
          (await two.decide({ accountId: 'replica-check', ip: '192.0.2.7' })).body.verdict === 'deny',
        { what: 'the second replica denying the range added on the first' },
      );
      // Removed through the second: both trails hold both changes, in one order.
      const removed = await ops(
        two,
        'DELETE',
        `/lists/blockedNetworks/entries/${encodeURIComponent('192.0.2.0/24')}`,
        {
          reason: 'done checking',
        },
      );
      expect(removed.status).toBe(200);
      const trail = async (h: Harness) =>
        ((await (await ops(h, 'GET', '/audit')).json()) as { entries: { action: string; target: string }[] })
          .entries;
      const seenByOne = await trail(one);
      expect(seenByOne.map((e) => e.action)).toEqual(expect.arrayContaining(['list.add', 'list.remove']));
      expect(await trail(two)).toEqual(seenByOne);
    });
  },
);
