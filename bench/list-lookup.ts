import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { openDatabase, type RiskgateDatabase } from '../src/database/database.ts';
import { ListSnapshot } from '../src/lists/list-snapshot.ts';
import { type ListEntry, ListStore, listMigrations } from '../src/lists/list-store.ts';
import { normaliseListValue } from '../src/lists/list-values.ts';
import { compilePolicy } from '../src/policy/policy-compiler.ts';
import type { PolicyInput } from '../src/policy/policy-types.ts';
import { LIST_POLICY } from '../test/support/list-policy.ts';
import { startPostgres } from '../test/support/postgres-server.ts';
import { median } from './bench-median.ts';

/**
 * What runtime lists cost. A decision reads them from this process's in-memory snapshot, so its
 * cost is the lookup (timed per call, and as the difference a `lists.<name>.contains` rule makes
 * to one evaluation of a small policy); what the database pays is the refresh: the change-marker
 * poll every 500 ms and, after a change, the reload of every entry. Both timed on SQLite (a file
 * under a temp dir) and PostgreSQL (Debian's, started here on a free port). Redis keeps no lists.
 * The lists: `--entries` CIDRs (/16 to /32, IPv4 and IPv6) in the ip list and as many ids in an
 * exact one.
 *
 *   npx tsx bench/list-lookup.ts [--entries 10000] [--lookups 200000] [--runs 5] [--json]
 */

function entriesOf(n: number, nowMs: number): ListEntry[] {
  const out: ListEntry[] = [];
  const bits = [16, 20, 24, 28, 32];
  for (let i = 0; i < n; i++) {
    const v4 = i % 4 !== 0;
    const raw = v4
      ? `${10 + (i % 200)}.${(i >> 3) & 255}.${(i * 7) & 255}.${i & 255}/${bits[i % bits.length]}`
      : `2001:db8:${(i & 0xffff).toString(16)}::/${48 + (i % 5) * 16}`;
    const value = (normaliseListValue('ip', raw) as { value: string }).value;
    const common = {
      author: 'bench',
      reason: 'bench',
      createdMs: nowMs,
      expiresMs: i % 2 ? nowMs + 3_600_000 : null,
    };
    out.push({ list: 'blockedNetworks', value, kind: 'ip', ...common });
    out.push({ list: 'trustedAccounts', value: `acct-${i}`, kind: 'accountId', ...common });
  }
  return out;
}

function timeLookups(
  snapshot: ListSnapshot,
  lookups: number,
  nowMs: number,
): { ipNs: number; exactNs: number } {
  const ips = Array.from(
    { length: 1024 },
    (_, i) => `${10 + (i % 250)}.${i & 255}.${(i * 3) & 255}.${(i * 11) & 255}`,
  );
  const ids = Array.from({ length: 1024 }, (_, i) => `acct-${i * 13}`);
  let hits = 0;
  let t = process.hrtime.bigint();
  for (let i = 0; i < lookups; i++) if (snapshot.contains('blockedNetworks', ips[i & 1023]!, nowMs)) hits++;
  const ipNs = Number(process.hrtime.bigint() - t) / lookups;
  t = process.hrtime.bigint();
  for (let i = 0; i < lookups; i++) if (snapshot.contains('trustedAccounts', ids[i & 1023]!, nowMs)) hits++;
  const exactNs = Number(process.hrtime.bigint() - t) / lookups;
  if (hits < 0) console.log(hits);
  return { ipNs, exactNs };
}

/** One evaluation of the list policy, and of the same policy with the list rules made `false`. */
function timeEvaluation(snapshot: ListSnapshot, n: number): { withListsNs: number; withoutNs: number } {
  const withLists = compilePolicy('p.yaml', LIST_POLICY).policy!;
  const without = compilePolicy(
    'p.yaml',
    LIST_POLICY.replace('lists.blockedNetworks.contains(request.ip)', 'request.ip == "192.0.2.1"').replace(
      'lists.trustedAccounts.contains(request.accountId)',
      'request.accountId == "x"',
    ),
  ).policy!;
  const input = (i: number): PolicyInput => ({
    signals: {},
    devices: [],
    request: { accountId: `acct-${i * 13}`, ip: `${10 + (i % 250)}.${i & 255}.3.4`, context: {} },
    now: new Date(),
    lists: snapshot,
  });
  const inputs = Array.from({ length: 1024 }, (_, i) => input(i));
  const run = (p: typeof withLists) => {
    for (let i = 0; i < 20_000; i++) p.evaluate(inputs[i & 1023]!);
    const t = process.hrtime.bigint();
    for (let i = 0; i < n; i++) p.evaluate(inputs[i & 1023]!);
    return Number(process.hrtime.bigint() - t) / n;
  };
  return { withListsNs: run(withLists), withoutNs: run(without) };
}

async function timeRefresh(db: RiskgateDatabase, entries: ListEntry[], polls: number) {
  const store = new ListStore(db);
  await store.add(entries);
  const pollUs: number[] = [];
  for (let i = 0; i < polls; i++) {
    const t = performance.now();
    await store.version();
    pollUs.push((performance.now() - t) * 1000);
  }
  const reloadMs: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t = performance.now();
    const loaded = await store.loadActive(Date.now());
    new ListSnapshot(loaded.entries);
    reloadMs.push(performance.now() - t);
  }
  const addT = performance.now();
  await store.add([{ ...entries[0]!, value: '192.0.2.0/24' }]);
  const addMs = performance.now() - addT;
  return { pollP50Us: median(pollUs), reloadMs: median(reloadMs), addMs };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      entries: { type: 'string', default: '10000' },
      lookups: { type: 'string', default: '200000' },
      runs: { type: 'string', default: '5' },
      json: { type: 'boolean', default: false },
    },
  });
  const n = Number(values.entries);
  const runs = Number(values.runs);
  const nowMs = Date.now();
  const entries = entriesOf(n, nowMs);
  const snapshot = new ListSnapshot(entries);
  const memory = Array.from({ length: runs }, () => ({
    ...timeLookups(snapshot, Number(values.lookups), nowMs),
    ...timeEvaluation(snapshot, 100_000),
  }));
  const buildT = performance.now();
  new ListSnapshot(entries);
  const buildMs = performance.now() - buildT;

  const dir = mkdtempSync(join(tmpdir(), 'riskgate-bench-lists-'));
  const sqlite = await openDatabase(
    { kind: 'sqlite', path: join(dir, 'riskgate.sqlite') },
    { migrations: listMigrations },
  );
  const onSqlite = [];
  for (let r = 0; r < runs; r++) onSqlite.push(await timeRefresh(sqlite, entries, 500));
  await sqlite.close();
  rmSync(dir, { recursive: true, force: true });
  const pg = await startPostgres();
  const postgres = await openDatabase({ kind: 'postgres', url: pg.url }, { migrations: listMigrations });
  const onPostgres = [];
  for (let r = 0; r < runs; r++) onPostgres.push(await timeRefresh(postgres, entries, 500));
  await postgres.close();
  await pg.stop();

  const m = (xs: Record<string, number>[], k: string) => Math.round(median(xs.map((x) => x[k]!)) * 100) / 100;
  const result = {
    entries: { ip: n, exact: n },
    memory: {
      ipLookupNs: m(memory, 'ipNs'),
      exactLookupNs: m(memory, 'exactNs'),
      evaluationWithListsNs: m(memory, 'withListsNs'),
      evaluationWithoutNs: m(memory, 'withoutNs'),
      snapshotBuildMs: Math.round(buildMs * 10) / 10,
    },
    sqlite: {
      pollP50Us: m(onSqlite, 'pollP50Us'),
      reloadMs: m(onSqlite, 'reloadMs'),
      addMs: m(onSqlite, 'addMs'),
    },
    postgres: {
      pollP50Us: m(onPostgres, 'pollP50Us'),
      reloadMs: m(onPostgres, 'reloadMs'),
      addMs: m(onPostgres, 'addMs'),
    },
    runs,
  };
  console.log(values.json ? JSON.stringify(result) : JSON.stringify(result, null, 2));
}

await main();
