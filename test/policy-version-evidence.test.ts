import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type RiskgateDatabase } from '../src/database/database.ts';
import type { DecisionTables } from '../src/decision-store/decision-tables.ts';
import { Lifecycle } from '../src/lifecycle/lifecycle.ts';
import { computeEvidence, type PolicyEvidence } from '../src/policy-evidence/policy-evidence.ts';
import {
  EVIDENCE_STOPPED,
  PolicyEvidenceRunner,
  PolicyEvidenceStore,
  policyEvidenceComponent,
} from '../src/policy-versions/policy-version-evidence-store.ts';
import { PolicyVersionStore } from '../src/policy-versions/policy-version-store.ts';
import { EVIDENCE_IMMUTABLE_MESSAGE } from '../src/policy-versions/policy-version-tables.ts';
import { ALL_MIGRATIONS } from '../src/service/database-migrations.ts';
import { systemClock } from '../src/timing/clock.ts';
import { browserPolicy } from './support/browser-policy.ts';
import { describeOnPostgres } from './support/postgres-server.ts';
import { type ReplayableDecision, storeReplayable } from './support/stored-decisions.ts';

/**
 * Issue 33: the evidence a proposal carries. Over a real decision store: the draft's check, its
 * own suites from the policies directory, and a backtest of the window's stored decisions (changes
 * by verdict pair and by rule, with sample ids), bounded by a cap on decisions; written once in
 * the control database (SQLite and PostgreSQL refuse a change to written evidence).
 */

const ACTIVE = browserPolicy('challenge');

/** Denies browsers (was challenge) and challenges mobile logins of some accounts (new rule). */
const DRAFT = `${ACTIVE.replace('verdict: challenge', 'verdict: deny')}  - id: mobile
    description: mobile logins of the accounts under watch
    when: request.platform == "mobile" && request.accountId != "b"
    verdict: challenge
`;

const SUITE = `apiVersion: riskgate/v1
kind: PolicyTest
policy: login.yaml
now: 2026-11-20T12:00:00Z
cases:
  - name: a browser login is denied
    given: { request: { accountId: a, platform: browser } }
    expect: { verdict: deny }
  - name: a mobile login is allowed
    given: { request: { accountId: b, platform: mobile } }
    expect: { verdict: allow }
`;

const T0 = Date.parse('2026-11-28T00:00:00.000Z');
const HOUR = 3_600_000;

/** 6 browser logins (challenged by `browser`), 4 mobile (allowed) in the window; 2 browser logins before it. */
function stored(): ReplayableDecision[] {
  const out: ReplayableDecision[] = [];
  const d = (i: number, atMs: number, platform: 'browser' | 'mobile'): ReplayableDecision => ({
    id: `d-${String(i).padStart(3, '0')}`,
    atMs,
    accountId: `acct-${i}`,
    platform,
    verdict: platform === 'browser' ? 'challenge' : 'allow',
    score: 0,
    rules: platform === 'browser' ? ['browser'] : [],
    revision: 'r1',
  });
  for (let i = 0; i < 2; i++) out.push(d(i, T0 - 2 * HOUR, 'browser'));
  for (let i = 2; i < 12; i++) out.push(d(i, T0 + i * 60_000, i < 8 ? 'browser' : 'mobile'));
  return out;
}

/**
 * A hang guard, not a measure: these tests start seven replay threads, each compiling the draft
 * from source (Node's type stripping loads the compiler's modules), which takes seconds apiece on
 * a loaded 2-core machine.
 */
const THREADED_TEST_TIMEOUT_MS = 90_000;

let dir: string;
let policies: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'rg-evidence-'));
  policies = join(dir, 'policies');
  mkdirSync(policies);
  writeFileSync(join(policies, 'login.yaml'), ACTIVE);
  writeFileSync(join(policies, 'login.test.yaml'), SUITE);
  // Another policy's suite is not the draft's: it is not run.
  writeFileSync(join(policies, 'other.yaml'), ACTIVE.replace('name: login', 'name: other'));
  writeFileSync(join(policies, 'other.test.yaml'), SUITE.replace('login.yaml', 'other.yaml'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function behavesAsEvidence(database: RiskgateDatabase, file?: string): Promise<void> {
  const decisions = database.db.withTables<DecisionTables>();
  // What a replay thread opens by itself: the SQLite file, or a PostgreSQL client of its own.
  const source = { db: decisions, file, postgres: database.postgres };
  await storeReplayable(decisions, stored());
  const window = { fromMs: T0, toMs: T0 + HOUR };
  const evidence = await computeEvidence(DRAFT, window, {
    policyPath: policies,
    decisions: () => source,
    batchSize: 3,
    // The window cut in three stretches, each replayed on a thread of its own, merged in order.
    threads: 3,
    minPerThread: 2,
    clock: { ...systemClock, nowMs: () => T0 + HOUR },
  });
  expect(evidence.check).toEqual({ ok: true, issues: [] });
  expect(evidence.tests).toEqual({
    ran: true,
    suites: [{ file: 'login.test.yaml', passed: 2, failed: 0, issues: [], failures: [] }],
  });
  const b = evidence.backtest!;
  expect(b).toMatchObject({ decisions: 10, unreadable: 0, changed: 10, truncated: null });
  expect(b.threads).toBe(file === undefined && database.postgres === undefined ? 0 : 3);
  expect(b.byPair).toEqual([
    { from: 'challenge', to: 'deny', count: 6, samples: ['d-002', 'd-003', 'd-004', 'd-005', 'd-006'] },
    { from: 'allow', to: 'challenge', count: 4, samples: ['d-008', 'd-009', 'd-010', 'd-011'] },
  ]);
  expect(b.byRule).toEqual([
    { rule: 'mobile', fires: 4, stops: 0, samples: ['d-008', 'd-009', 'd-010', 'd-011'] },
  ]);

  // The cap on decisions read: the counts cover what was read, and it says so.
  const capped = await computeEvidence(DRAFT, window, {
    decisions: () => source,
    batchSize: 3,
    maxDecisions: 4,
    threads: 2,
    minPerThread: 1,
  });
  expect(capped.backtest).toMatchObject({
    decisions: 4,
    changed: 4,
    // The fifth decision of the window (d-006) is the first one left out.
    truncated: { reason: 'max-decisions', atMs: T0 + 6 * 60_000 },
  });
  expect(capped.backtest?.byPair).toEqual([
    { from: 'challenge', to: 'deny', count: 4, samples: ['d-002', 'd-003', 'd-004', 'd-005'] },
  ]);

  // The time limit: a stretch reads no page past its deadline, and the evidence says where it was.
  const late = await computeEvidence(DRAFT, window, {
    decisions: () => source,
    batchSize: 3,
    timeLimitMs: -1,
  });
  expect(late.backtest).toMatchObject({ decisions: 0, truncated: { reason: 'time-limit', atMs: T0 } });
  expect(capped.tests).toMatchObject({ ran: false, note: 'no policies directory configured' });

  // Written once, beside its version.
  const versions = new PolicyVersionStore(database);
  const v = await versions.create({ name: 'login', yaml: DRAFT, author: 'ana', message: 'deny browsers' });
  const runner = new PolicyEvidenceRunner({
    store: new PolicyEvidenceStore(database),
    compute: (yaml, w) => computeEvidence(yaml, w, { policyPath: policies, decisions: () => source }),
  });
  expect(await runner.request(v, window, 'ana')).toBe(true);
  expect(await runner.request(v, window, 'ana')).toBe(false);
  await runner.settled();
  const written = await runner.store.get(v.id);
  expect(written).toMatchObject({ state: 'complete', requestedBy: 'ana' });
  expect((written?.evidence as PolicyEvidence | undefined)?.backtest?.changed).toBe(10);
  const db = database.db;
  for (const change of [
    sql`update policy_version_evidence set evidence = '{}' where version_id = ${v.id}`,
    sql`update policy_version_evidence set state = 'pending' where version_id = ${v.id}`,
    sql`delete from policy_version_evidence where version_id = ${v.id}`,
  ]) {
    const refused = await change.execute(db).then(
      () => undefined,
      (e: Error) => e.message,
    );
    expect(refused).toContain(EVIDENCE_IMMUTABLE_MESSAGE);
  }
  expect(await runner.store.finish(v.id, { error: 'late' })).toBe(false);
}

describe('policy version evidence on SQLite', () => {
  it(
    'checks, tests and backtests a draft against the stored decisions of a window, then keeps it unchanged',
    async () => {
      const database = await openDatabase(
        { kind: 'sqlite', path: join(dir, 'state.sqlite') },
        { migrations: ALL_MIGRATIONS },
      );
      try {
        await behavesAsEvidence(database, join(dir, 'state.sqlite'));
      } finally {
        await database.close();
      }
    },
    THREADED_TEST_TIMEOUT_MS,
  );

  it('backtests a process-private database in process, page by page, with the same evidence', async () => {
    const database = await openDatabase({ kind: 'memory' }, { migrations: ALL_MIGRATIONS });
    try {
      await behavesAsEvidence(database);
    } finally {
      await database.close();
    }
  });

  it('ends a backtest in progress when riskgate stops, and writes its evidence as incomplete: stopped', async () => {
    const file = join(dir, 'stopping.sqlite');
    const database = await openDatabase({ kind: 'sqlite', path: file }, { migrations: ALL_MIGRATIONS });
    try {
      const decisions = database.db.withTables<DecisionTables>();
      await storeReplayable(decisions, stored());
      const v = await new PolicyVersionStore(database).create({
        name: 'login',
        yaml: DRAFT,
        author: 'ana',
        message: 'deny browsers',
      });
      const l = new Lifecycle({ registry: () => undefined, log: () => {} });
      let aborted: AbortSignal | undefined;
      const runner = await l.start(
        policyEvidenceComponent(
          new PolicyEvidenceRunner({
            store: new PolicyEvidenceStore(database),
            compute: (yaml, w, signal) => {
              aborted = signal;
              return computeEvidence(yaml, w, {
                decisions: () => ({ db: decisions, file }),
                threads: 2,
                minPerThread: 1,
                signal,
              });
            },
          }),
        ),
      );
      expect(await runner.request(v, { fromMs: T0, toMs: T0 + HOUR }, 'ana')).toBe(true);
      // The computation started and awaits its first step: the stop meets it in progress.
      expect(aborted?.aborted).toBe(false);
      await l.stop(Date.now() + 10_000);
      expect(aborted?.aborted).toBe(true);
      const written = await runner.store.get(v.id);
      expect(written).toMatchObject({ state: 'failed', error: EVIDENCE_STOPPED });
      expect(written?.error).toMatch(/^evidence incomplete: stopped/);
      // Nothing more is computed once stopped: a later proposal is refused, the row stays as written.
      await expect(runner.request(v, { fromMs: T0, toMs: T0 + HOUR }, 'ana')).rejects.toThrow('stopped');
      await runner.settled();
      expect(await runner.store.get(v.id)).toEqual(written);
    } finally {
      await database.close();
    }
  });

  it('says why there is no suite and no backtest for a draft that does not compile', async () => {
    const evidence = await computeEvidence(
      'name: login\nrules: [',
      { fromMs: T0, toMs: T0 + HOUR },
      {
        policyPath: policies,
      },
    );
    expect(evidence.check.ok).toBe(false);
    expect(evidence.check.issues.length).toBeGreaterThan(0);
    expect(evidence.tests).toMatchObject({ ran: false, note: 'the policy does not compile: no suite ran' });
    expect(evidence.backtest).toBeNull();
    expect(evidence.backtestNote).toBe('the policy does not compile: nothing replayed');
  });

  it('closes evidence left pending by a stopped replica as failed on the first read after it is stale', async () => {
    const database = await openDatabase({ kind: 'memory' }, { migrations: ALL_MIGRATIONS });
    try {
      let nowMs = T0;
      const versions = new PolicyVersionStore(database);
      const v = await versions.create({ name: 'login', yaml: DRAFT, author: 'ana', message: 'm' });
      const store = new PolicyEvidenceStore(database, {
        clock: { ...systemClock, nowMs: () => nowMs },
        staleAfterMs: 1000,
      });
      await store.begin(v.id, { fromMs: T0 - HOUR, toMs: T0 }, 'ana');
      expect((await store.get(v.id))?.state).toBe('pending');
      nowMs += 1001;
      expect(await store.get(v.id)).toMatchObject({
        state: 'failed',
        error: expect.stringContaining('interrupted'),
      });
    } finally {
      await database.close();
    }
  });
});

describeOnPostgres('policy version evidence on PostgreSQL', (pg) => {
  it(
    'checks, tests and backtests a draft against the stored decisions of a window, then keeps it unchanged (PostgreSQL)',
    async () => {
      const database = await openDatabase({ kind: 'postgres', url: pg.url }, { migrations: ALL_MIGRATIONS });
      try {
        await behavesAsEvidence(database);
      } finally {
        await database.close();
      }
    },
    THREADED_TEST_TIMEOUT_MS,
  );
});
