/**
 * The rule report's cost (issue 25): `npx tsx bench/rule-report.ts [--decisions 1000000] [--runs 7]
 * [--keep <dir>]`. Seeds the embedded SQLite decision store (the same file and migrations riskgate
 * opens) with N decisions spread evenly over the last 7 days: the shipped policy's rules matched at
 * about 1.2 per decision, a shadow revision on every decision with its own matches, 1 % labelled
 * (a third of those fraud), and the first tenth on an older active revision. Then times
 * `createRuleReport(...).report()` for the active and the shadow revision, as `GET /rules/report`
 * runs it: one warm-up, then the median of `--runs`. `--keep <dir>` reuses (or leaves) the seeded
 * file there; `--plan` prints SQLite's plan of each query; `--analyze` runs ANALYZE first (riskgate
 * never does: by default the planner goes without statistics, as in production);
 * `--without-report-indexes` seeds and reports without the report's migration (the cost before it,
 * and what its indexes cost the inserts).
 */

import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { DatabaseSync, type SQLInputValue } from 'node:sqlite';
import { parseArgs } from 'node:util';
import { type CompiledQuery, Kysely, SqliteDialect } from 'kysely';
import { openDatabase, type RiskgateDatabase } from '../src/database/database.ts';
import { openNodeSqlite } from '../src/database/node-sqlite-database.ts';
import { stateFiles } from '../src/database/state-files.ts';
import { decisionMigrations } from '../src/decision-store/decision-tables.ts';
import { RECOUNT_HOURS } from '../src/decision-store/hour-counts.ts';
import { createRuleReport, type ReportedPolicy } from '../src/decision-store/rule-report-query.ts';
import { loadPolicy } from '../src/policy/policy-loader.ts';
import { ALL_MIGRATIONS } from '../src/service/database-migrations.ts';
import { median } from './bench-median.ts';
import { mulberry32 } from './seeded-random.ts';

const { values } = parseArgs({
  options: {
    decisions: { type: 'string', default: '1000000' },
    runs: { type: 'string', default: '7' },
    keep: { type: 'string' },
    plan: { type: 'boolean', default: false },
    analyze: { type: 'boolean', default: false },
    'without-report-indexes': { type: 'boolean', default: false },
  },
});
const n = Number(values.decisions);
const runs = Number(values.runs);
const root = resolve(import.meta.dirname, '..');
const dir = values.keep ?? mkdtempSync(join(tmpdir(), 'riskgate-rule-report-bench-'));
const path = stateFiles(dir).decisions;
const DAY_MS = 86_400_000;
// `--without-report-indexes`: the decision store's own tables and indexes only (the "before").
const migrations = values['without-report-indexes'] ? decisionMigrations : ALL_MIGRATIONS;
// A fixed `now` and seed: every run reports over the same rows.
const NOW = Date.UTC(2026, 10, 25, 12, 0, 0);

const policy = await loadPolicy(join(root, 'policies'));
// Revisions as long as real ones (a content hash): index entries are as wide as in production.
const active: ReportedPolicy = { ...pick(policy), revision: policy.revision };
const shadow: ReportedPolicy = { ...pick(policy), revision: `${policy.revision.slice(0, -6)}shadow` };
const previous = `${policy.revision.slice(0, -8)}previous`;
const ruleIds = [...(policy.ruleIds ?? [])];

function pick(p: ReportedPolicy): ReportedPolicy {
  return {
    name: p.name,
    revision: p.revision,
    ruleIds: p.ruleIds ?? [],
    ruleDescriptions: p.ruleDescriptions ?? new Map(),
  };
}

/** Rule ids matched by one decision: skewed (a few rules fire often, most rarely), about 1.2 each. */
function matched(next: () => number): string[] {
  const out = new Set<string>();
  const count = next() < 0.3 ? 0 : next() < 0.7 ? 1 : next() < 0.8 ? 2 : 3;
  while (out.size < count) out.add(ruleIds[Math.floor(next() ** 2 * ruleIds.length)]!);
  return [...out];
}

async function seed(): Promise<void> {
  const opened = await openDatabase({ kind: 'sqlite', path }, { migrations });
  await opened.close();
  const db = new DatabaseSync(path);
  db.exec('PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF');
  const insertDecision = db.prepare(
    `insert into decision (decision_id, at_ms, verdict, score, degraded, policy_name, policy_revision,
       account_id, user_id, ip, unit_id, shadow_verdict, shadow_revision, shadow_disagrees, label, total_ms, line, line_bytes)
     values (?, ?, ?, ?, 0, 'login', ?, ?, ?, ?, null, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const insertRule = db.prepare(
    'insert into decision_rule (decision_id, policy, policy_revision, rule_id, at_ms) values (?, ?, ?, ?, ?)',
  );
  const next = mulberry32(25);
  const verdictOf = (x: number) => (x < 0.85 ? 'allow' : x < 0.95 ? 'challenge' : 'deny');
  const startedAt = performance.now();
  let rules = 0;
  const batch = 20_000;
  for (let from = 0; from < n; from += batch) {
    db.exec('begin');
    for (let i = from; i < Math.min(n, from + batch); i++) {
      // Oldest first, evenly over 7 d; the first tenth on an older active revision.
      const atMs = NOW - 7 * DAY_MS + Math.floor(((i + 0.5) / n) * 7 * DAY_MS);
      const revision = i < n / 10 ? previous : active.revision;
      const id = `d-${i.toString(36).padStart(8, '0')}`;
      const verdict = verdictOf(next());
      const shadowVerdict = next() < 0.9 ? verdict : verdictOf(next());
      const label = next() < 0.01 ? (next() < 0.33 ? 'fraud' : 'legit') : null;
      const line = `{"kind":"decision","decisionId":"${id}"}`;
      insertDecision.run(
        id,
        atMs,
        verdict,
        Math.floor(next() * 100),
        revision,
        `acct-${i % 5000}`,
        `user-${i % 50_000}`,
        `10.0.${i % 256}.${(i >> 8) % 256}`,
        shadowVerdict,
        shadow.revision,
        shadowVerdict === verdict ? 0 : 1,
        label,
        12.5,
        line,
        line.length,
      );
      for (const rule of matched(next))
        rules += Number(insertRule.run(id, 'active', revision, rule, atMs).changes);
      for (const rule of matched(next))
        rules += Number(insertRule.run(id, 'shadow', shadow.revision, rule, atMs).changes);
    }
    db.exec('commit');
  }
  // Raw inserts: the hour counts (which the writers keep on SQLite) from the rows, once.
  if ('decisions-006-hour-counts' in migrations) for (const statement of RECOUNT_HOURS) db.exec(statement);
  db.close();
  const seconds = (performance.now() - startedAt) / 1000;
  console.log(
    `seeded ${n} decisions, ${rules} rule rows, in ${seconds.toFixed(1)} s (${Math.round(n / seconds)} decisions/s with their rule rows)`,
  );
}

if (!existsSync(path)) await seed();
// The migrations (the report's indexes too, on a file seeded before them).
await (await openDatabase({ kind: 'sqlite', path }, { migrations })).close();
// What SQLite's planner knows: nothing (riskgate never runs ANALYZE), or the tables' statistics.
const raw = new DatabaseSync(path);
raw.exec(values.analyze ? 'analyze' : 'drop table if exists sqlite_stat1; drop table if exists sqlite_stat4');
raw.close();
const queries: CompiledQuery[] = [];
/** Milliseconds per query of the timed runs, by the query's first words. */
const queryMs = new Map<string, number[]>();
// Opened as riskgate opens it, with every query kept for `--plan`.
// biome-ignore lint/complexity/noBannedTypes: kysely's empty schema, as src/database/database.ts.
const db = new Kysely<{}>({
  dialect: new SqliteDialect({ database: openNodeSqlite(path) }),
  log: (event) => {
    if (event.level !== 'query') return;
    queries.push(event.query);
    const key = event.query.sql.replace(/\s+/g, ' ').slice(0, 70);
    queryMs.set(key, [...(queryMs.get(key) ?? []), event.queryDurationMillis]);
  },
});
const database: RiskgateDatabase = { db, engine: 'sqlite', close: () => db.destroy() };
const reader = createRuleReport({
  database,
  policies: { store: { current: () => active }, shadow: { current: () => shadow } },
});
const first = await reader.report(NOW);
if (values.plan) {
  const explain = new DatabaseSync(path);
  for (const q of queries.filter((q) => q.sql.startsWith('select'))) {
    const plan = explain.prepare(`explain query plan ${q.sql}`).all(...(q.parameters as SQLInputValue[]));
    console.log(q.sql.replace(/\s+/g, ' ').slice(0, 100), '\n   ', plan.map((p) => p.detail).join(' | '));
  }
  explain.close();
}
queryMs.clear();
const timesMs: number[] = [];
const cpuMs: number[] = [];
for (let i = 0; i < runs; i++) {
  const startedAt = performance.now();
  const cpuAt = process.cpuUsage();
  await reader.report(NOW);
  timesMs.push(performance.now() - startedAt);
  const cpu = process.cpuUsage(cpuAt);
  cpuMs.push((cpu.user + cpu.system) / 1000);
}
if (values.plan) for (const [q, ms] of queryMs) console.log(`${median(ms).toFixed(0).padStart(5)} ms  ${q}`);
await database.close();
timesMs.sort((a, b) => a - b);
const medianMs = median(timesMs);
console.log(
  `report over ${first.active.decisions.d7} active + ${first.shadow?.decisions.d7} shadow decisions (7 d), ` +
    `${first.active.rules.length} + ${first.shadow?.rules.length} rules${values.analyze ? ', after ANALYZE' : ''}: ` +
    `median ${medianMs.toFixed(0)} ms of ${runs} (min ${timesMs[0]!.toFixed(0)}, max ${timesMs.at(-1)!.toFixed(0)}), ` +
    `CPU ${median(cpuMs).toFixed(0)} ms`,
);
if (values.keep === undefined) rmSync(dir, { recursive: true, force: true });
