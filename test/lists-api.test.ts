import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../src/cli/main.ts';
import { openDatabase, type RiskgateDatabase } from '../src/database/database.ts';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { collectingEventSink, type RiskgateEvent } from '../src/events/riskgate-event.ts';
import type { AuditEntry } from '../src/operators/audit-trail.ts';
import { ALL_MIGRATIONS } from '../src/service/database-migrations.ts';
import { type Harness, OPS_KEY, startHarness } from './decide-harness.ts';
import { LIST_POLICY } from './support/list-policy.ts';

/**
 * The runtime lists' operator endpoints on the embedded database (SQLite): entries added, shown,
 * removed and imported, each change audited before the answer and told as an event; bad values
 * refused naming the field; a login from a listed network denied at once.
 */

const VIEWER_KEY = 'test-viewer-key-0123456789';
const events: RiskgateEvent[] = [];
let database: RiskgateDatabase;
let h: Harness;

beforeAll(async () => {
  database = await openDatabase({ kind: 'memory' }, { migrations: ALL_MIGRATIONS });
  h = await startHarness({
    policy: { yaml: LIST_POLICY },
    env: { RISKGATE_OPS_KEYS: `adam:admin:${OPS_KEY},vera:viewer:${VIEWER_KEY}` },
    riskgate: { database, events: collectingEventSink(events) },
  });
});
afterAll(async () => {
  await h?.stop();
  await database?.close();
});

/** The audit trail, oldest first (GET /audit). */
async function audited(): Promise<AuditEntry[]> {
  const page = (await (await h.ops('/audit?limit=500')).json()) as { entries: AuditEntry[] };
  return page.entries.reverse();
}

function ops(method: string, path: string, body?: unknown, contentType = 'application/json', key = OPS_KEY) {
  return fetch(`${h.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body !== undefined && { 'content-type': contentType }),
    },
    ...(body !== undefined && { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
}

/** An answer's JSON body, as the list endpoints answer it (docs/openapi.json). */
type ListAnswer = {
  code?: string;
  field?: string;
  createdAt: string;
  expiresAt: string;
  lists: unknown[];
  items: { value: string; reason: string }[];
  nextCursor?: string;
};
const read = async (res: Response): Promise<ListAnswer> => (await res.json()) as ListAnswer;

const login = (ip: string) => ({ ...demoRequest('alice', undefined), ip });

describe('the runtime lists on SQLite', () => {
  it('adds a CIDR, denies a login from inside it at once, and audits the change first', async () => {
    expect((await h.decide(login('203.0.113.9'))).body.verdict).not.toBe('deny');
    const res = await ops('POST', '/lists/blockedNetworks/entries', {
      value: '203.0.113.77/24',
      reason: 'credential stuffing',
    });
    expect(res.status).toBe(201);
    const entry = await read(res);
    expect(entry).toMatchObject({
      list: 'blockedNetworks',
      value: '203.0.113.0/24',
      kind: 'ip',
      reason: 'credential stuffing',
    });
    // The list's ttl (24h) applies when the entry sets none.
    expect(Date.parse(entry.expiresAt) - Date.parse(entry.createdAt)).toBe(24 * 3600 * 1000);
    expect((await audited()).at(-1)).toMatchObject({
      actor: 'adam',
      action: 'list.add',
      target: 'blockedNetworks:203.0.113.0/24',
    });
    expect(events.at(-1)).toMatchObject({
      type: 'list.entry_added',
      data: { list: 'blockedNetworks', value: '203.0.113.0/24' },
    });
    const { body } = await h.decide(login('203.0.113.9'));
    expect(body.verdict).toBe('deny');
    expect((body.reasons as { id: string }[]).map((r) => r.id)).toContain('blocked-network');
    expect((await h.decide(login('203.0.114.9'))).body.verdict).not.toBe('deny');
  });

  it('counts and names a hand-edited entry it cannot read, never dropping it in silence', async () => {
    const metric = async () =>
      Number(/^riskgate_lists_unreadable_rows (\S+)$/m.exec(await (await h.ops('/metrics')).text())?.[1]);
    expect(await metric()).toBe(0);
    // What psql or sqlite3 could do: an `ip` entry whose value is no address, the version bumped.
    await sql`insert into list_entry (list, value, kind, author, reason, created_ms, expires_ms)
      values ('blockedNetworks', 'not-an-address', 'ip', 'dba', 'by hand', ${Date.now()}, ${null})`.execute(
      database.db,
    );
    await sql`update list_version set version = version + 1 where id = 1`.execute(database.db);
    await expect.poll(metric, { timeout: 10_000 }).toBe(1);
    expect(h.serviceLog).toContainEqual(
      expect.objectContaining({
        level: 'warn',
        unreadable: 1,
        rows: ['blockedNetworks:not-an-address'],
      }),
    );
    // Removed: the gauge and the log say so.
    await sql`delete from list_entry where value = 'not-an-address'`.execute(database.db);
    await sql`update list_version set version = version + 1 where id = 1`.execute(database.db);
    await expect.poll(metric, { timeout: 10_000 }).toBe(0);
    expect(h.serviceLog).toContainEqual(expect.objectContaining({ level: 'info', unreadable: 0 }));
  });

  it('lists the declared lists with their counts, and one list by page', async () => {
    await ops('POST', '/lists/blockedNetworks/entries', {
      value: '198.51.100.1',
      reason: 'r',
      ttlSeconds: 60,
    });
    const all = await read(await ops('GET', '/lists'));
    expect(all.lists).toEqual([
      {
        name: 'blockedNetworks',
        key: 'ip',
        ttlSeconds: 86400,
        description: 'Networks attacking us',
        entries: 2,
      },
      { name: 'trustedAccounts', key: 'accountId', ttlSeconds: null, entries: 0 },
    ]);
    const first = await read(await ops('GET', '/lists/blockedNetworks?limit=1'));
    expect(first.items.map((e) => e.value)).toEqual(['198.51.100.1']);
    const second = await read(await ops('GET', `/lists/blockedNetworks?limit=1&cursor=${first.nextCursor}`));
    expect(second.items.map((e) => e.value)).toEqual(['203.0.113.0/24']);
    expect(second.nextCursor).toBeUndefined();
  });

  it.each([
    [
      'an ip list given a host name',
      '/lists/blockedNetworks/entries',
      { value: 'example.com', reason: 'r' },
      'value',
    ],
    ['an entry without a reason', '/lists/blockedNetworks/entries', { value: '192.0.2.1' }, 'reason'],
    // Issue 30: what the database cannot store (every endpoint: test/unstorable-input.test.ts).
    [
      'a value carrying U+0000',
      '/lists/trustedAccounts/entries',
      { value: 'acct\u0000', reason: 'r' },
      'value',
    ],
    [
      'a reason carrying a lone surrogate',
      '/lists/trustedAccounts/entries',
      { value: 'acct-9', reason: '\ud800' },
      'reason',
    ],
    [
      'a ttl of zero',
      '/lists/blockedNetworks/entries',
      { value: '192.0.2.1', reason: 'r', ttlSeconds: 0 },
      'ttlSeconds',
    ],
    [
      'an import line with a bad CIDR',
      '/lists/blockedNetworks/import',
      [
        { value: '192.0.2.0/24', reason: 'r' },
        { value: '10.0.0.0/40', reason: 'r' },
      ],
      '1.value',
    ],
  ])('refuses %s with a 400 naming the field', async (_what, path, body, field) => {
    const before = (await audited()).length;
    const res = await ops('POST', path, body);
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/problem\+json/);
    expect(await read(res)).toMatchObject({ code: 'RG_ERR_INVALID_INPUT', field });
    expect((await audited()).length).toBe(before);
  });

  it('answers 404 for a list the policy does not declare', async () => {
    const res = await ops('POST', '/lists/nope/entries', { value: 'x', reason: 'r' });
    expect(res.status).toBe(404);
    expect((await read(res)).code).toBe('RG_ERR_NOT_FOUND');
  });

  it('refuses a change to a viewer, who may still read the lists', async () => {
    const res = await ops(
      'POST',
      '/lists/trustedAccounts/entries',
      { value: 'acct-9', reason: 'r' },
      undefined,
      VIEWER_KEY,
    );
    expect(res.status).toBe(403);
    // Nor remove one (a deny list emptied by a viewer is a way in).
    const removal = await ops(
      'DELETE',
      `/lists/blockedNetworks/entries/${encodeURIComponent('203.0.113.0/24')}?reason=mine`,
      undefined,
      undefined,
      VIEWER_KEY,
    );
    expect(removal.status).toBe(403);
    expect((await ops('GET', '/lists', undefined, undefined, VIEWER_KEY)).status).toBe(200);
  });

  it('removes an entry with a reason, audited, and the login is no longer denied', async () => {
    const res = await ops(
      'DELETE',
      `/lists/blockedNetworks/entries/${encodeURIComponent('203.0.113.0/24')}?reason=false%20positive`,
    );
    expect(res.status).toBe(200);
    expect((await audited()).at(-1)).toMatchObject({
      action: 'list.remove',
      target: 'blockedNetworks:203.0.113.0/24',
      actor: 'adam',
      role: 'admin',
      detail: { reason: 'false positive' },
    });
    expect(events.at(-1)).toMatchObject({ type: 'list.entry_removed' });
    expect((await h.decide(login('203.0.113.9'))).body.verdict).not.toBe('deny');
    const again = await ops(
      'DELETE',
      `/lists/blockedNetworks/entries/${encodeURIComponent('203.0.113.0/24')}?reason=x`,
    );
    expect(again.status).toBe(404);
    const noReason = await ops('DELETE', '/lists/blockedNetworks/entries/198.51.100.1');
    expect(noReason.status).toBe(400);
    expect((await read(noReason)).field).toBe('reason');
  });

  it('imports JSON lines with the reason from the query, one audit entry and an event per entry', async () => {
    const before = (await audited()).length;
    const lines = '{"value":"acct-1"}\n{"value":"acct-2","reason":"vouched by the help desk"}\n';
    const res = await ops(
      'POST',
      '/lists/trustedAccounts/import?reason=migration',
      lines,
      'application/x-ndjson',
    );
    expect(res.status).toBe(201);
    expect(await read(res)).toEqual({ list: 'trustedAccounts', added: 2 });
    const trail = await audited();
    expect(trail.length).toBe(before + 1);
    expect(trail.at(-1)).toMatchObject({
      action: 'list.add',
      target: 'trustedAccounts:import',
      detail: { entries: 2 },
    });
    const page = await read(await ops('GET', '/lists/trustedAccounts'));
    expect(page.items.map((e) => [e.value, e.reason])).toEqual([
      ['acct-1', 'migration'],
      ['acct-2', 'vouched by the help desk'],
    ]);
  });

  it('round-trips through the CLI: add, show, import from a file, remove', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'riskgate-lists-cli-'));
    const keyFile = join(dir, 'key');
    writeFileSync(keyFile, `${OPS_KEY}\n`);
    const cli = async (...args: string[]) => {
      const out: string[] = [];
      const err: string[] = [];
      const code = await runCli([...args, '--url', h.url, '--key-file', keyFile], {
        out: (l) => out.push(l),
        err: (l) => err.push(l),
      });
      return { code, out, err };
    };
    const added = await cli(
      'lists',
      'add',
      'blockedNetworks',
      '2001:DB8:0::/48',
      '--reason',
      'botnet',
      '--ttl',
      '2h',
    );
    expect(added).toMatchObject({
      code: 0,
      out: [expect.stringMatching(/^added 2001:db8::\/48 to blockedNetworks, expires 20/)],
    });
    const file = join(dir, 'entries.txt');
    writeFileSync(file, '# vouched accounts\nacct-cli-1\n\n{"value":"acct-cli-2","reason":"ticket 42"}\n');
    expect(await cli('lists', 'import', 'trustedAccounts', file, '--reason', 'help desk')).toMatchObject({
      code: 0,
      out: ['imported 2 entries'],
    });
    const shown = await cli('lists', 'show', 'trustedAccounts', '--json');
    const entries = shown.out.map((l) => JSON.parse(l) as { value: string; reason: string; author: string });
    expect(
      entries.filter((e) => e.value.startsWith('acct-cli')).map((e) => [e.value, e.reason, e.author]),
    ).toEqual([
      ['acct-cli-1', 'help desk', 'adam'],
      ['acct-cli-2', 'ticket 42', 'adam'],
    ]);
    const all = await cli('lists', 'show');
    expect(all.out.find((l) => l.startsWith('blockedNetworks'))).toMatch(
      /ip\s+\d+ entries {2}Networks attacking us$/,
    );
    expect(
      await cli('lists', 'remove', 'blockedNetworks', '2001:db8::/48', '--reason', 'cleaned up'),
    ).toMatchObject({
      code: 0,
      out: ['removed 2001:db8::/48 from blockedNetworks'],
    });
    expect((await audited()).at(-1)).toMatchObject({
      actor: 'adam',
      action: 'list.remove',
      detail: { reason: 'cleaned up' },
    });
    const bad = await cli('lists', 'add', 'blockedNetworks', 'example.com', '--reason', 'r');
    expect(bad.code).toBe(1);
    expect(bad.err.join('\n')).toMatch(/400 RG_ERR_INVALID_INPUT: .* \(value\)/);
    expect((await cli('lists', 'add', 'blockedNetworks', '192.0.2.1')).code).toBe(2);
  });

  it('audits every value of an import, not a sample', async () => {
    const values = Array.from({ length: 120 }, (_, i) => `acct-bulk-${i}`);
    const res = await ops(
      'POST',
      '/lists/trustedAccounts/import?reason=bulk%20vouch',
      values.map((value) => ({ value })),
    );
    expect(res.status).toBe(201);
    const entry = (await audited()).at(-1)!;
    expect(entry).toMatchObject({ action: 'list.add', target: 'trustedAccounts:import' });
    expect((entry.detail as { values: string[] }).values).toEqual(values);
  });

  it('refuses a change the audit trail cannot take, and makes none (last: the trail stays broken)', async () => {
    await database.db.schema.dropTable('audit_entry').execute();
    const res = await ops('POST', '/lists/trustedAccounts/entries', { value: 'acct-9', reason: 'r' });
    expect(res.status).toBe(503);
    expect((await read(res)).code).toBe('RG_ERR_AUDIT_UNAVAILABLE');
    const page = await read(await ops('GET', '/lists/trustedAccounts'));
    expect(page.items.map((e) => e.value)).not.toContain('acct-9');
  });
});
