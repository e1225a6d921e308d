import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type DatabaseTarget, openDatabase, type RiskgateDatabase } from '../src/database/database.ts';
import { createRuleReport, type ReportedPolicy } from '../src/decision-store/rule-report-query.ts';
import { ALL_MIGRATIONS } from '../src/service/database-migrations.ts';
import { clearDecisions, type SeededDecision, seedDecisions } from './support/decision-rows.ts';
import { describeOnPostgres } from './support/postgres-server.ts';

/**
 * The rule report (issue 25, the Rules page) over the decision store's tables, seeded directly:
 * exact fires per window, rates, hourly buckets, precision and recall against the current labels,
 * rules that never fired, and the shadow-vs-active agreement matrix, the same on SQLite and on
 * PostgreSQL.
 */

const NOW = Date.UTC(2026, 10, 25, 12, 0, 0);
const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;

const active: ReportedPolicy = {
  name: 'login',
  revision: 'rev-a',
  ruleIds: ['new-browser', 'travel', 'silent'],
  ruleDescriptions: new Map([
    ['new-browser', 'A browser never seen'],
    ['travel', 'Impossible travel'],
    ['silent', 'Never matches in 7 d'],
  ]),
};
const shadow: ReportedPolicy = {
  name: 'login-candidate',
  revision: 'rev-s',
  ruleIds: ['new-browser', 'strict'],
  ruleDescriptions: new Map([
    ['new-browser', 'A browser never seen'],
    ['strict', 'Stricter'],
  ]),
};

const S = (verdict: SeededDecision['verdict'], rules: string[] = [], revision = 'rev-s') => ({
  verdict,
  revision,
  rules,
});

/** Decisions around NOW: inside and at the edges of each window, other revisions, the future. */
const DECISIONS: SeededDecision[] = [
  {
    id: 'd1',
    atMs: NOW - 10 * MIN,
    verdict: 'challenge',
    revision: 'rev-a',
    rules: ['new-browser'],
    label: 'fraud',
    shadow: S('deny', ['strict', 'new-browser']),
  },
  {
    id: 'd2',
    atMs: NOW - 30 * MIN,
    verdict: 'allow',
    revision: 'rev-a',
    rules: [],
    label: 'legit',
    shadow: S('allow'),
  },
  {
    id: 'd3',
    atMs: NOW - 2 * HOUR - MIN,
    verdict: 'deny',
    revision: 'rev-a',
    rules: ['new-browser', 'travel'],
    label: 'fraud',
    shadow: S('deny', ['strict']),
  },
  {
    id: 'd4',
    atMs: NOW - 5 * HOUR - MIN,
    verdict: 'allow',
    revision: 'rev-a',
    rules: ['travel'],
    label: 'legit',
    shadow: S('challenge', ['strict']),
  },
  {
    id: 'd5',
    atMs: NOW - 2 * DAY,
    verdict: 'allow',
    revision: 'rev-a',
    rules: [],
    label: 'fraud',
    shadow: S('allow'),
  },
  { id: 'd6', atMs: NOW - 3 * DAY, verdict: 'challenge', revision: 'rev-a', rules: ['new-browser'] },
  // 7 d ago exactly and before: outside every window.
  {
    id: 'd7',
    atMs: NOW - 8 * DAY,
    verdict: 'deny',
    revision: 'rev-a',
    rules: ['new-browser', 'silent'],
    label: 'fraud',
    shadow: S('deny', ['strict']),
  },
  { id: 'd13', atMs: NOW - 7 * DAY, verdict: 'deny', revision: 'rev-a', rules: ['silent'], label: 'fraud' },
  // At now: inside; an hour ago exactly: in 24 h, not in 1 h.
  { id: 'd8', atMs: NOW, verdict: 'allow', revision: 'rev-a', rules: ['travel'] },
  { id: 'd9', atMs: NOW - HOUR, verdict: 'challenge', revision: 'rev-a', rules: ['new-browser'] },
  // Another active revision, the future, an earlier shadow revision.
  {
    id: 'd10',
    atMs: NOW - HOUR,
    verdict: 'deny',
    revision: 'rev-old',
    rules: ['new-browser', 'silent'],
    label: 'fraud',
    shadow: S('deny', ['strict']),
  },
  {
    id: 'd11',
    atMs: NOW + MIN,
    verdict: 'deny',
    revision: 'rev-a',
    rules: ['silent'],
    label: 'fraud',
    shadow: S('deny', ['strict']),
  },
  {
    id: 'd12',
    atMs: NOW - 6 * HOUR - MIN,
    verdict: 'allow',
    revision: 'rev-a',
    rules: ['$internal-error'],
    shadow: S('deny', ['strict'], 'rev-s-old'),
  },
];

/** 24 zeros but for `cells` (index: count), oldest first. */
function hourly(cells: Record<number, number>): number[] {
  return Array.from({ length: 24 }, (_, i) => cells[i] ?? 0);
}

function reportsOn(name: string, target: () => DatabaseTarget) {
  let database: RiskgateDatabase;
  beforeAll(async () => {
    database = await openDatabase(target(), { migrations: ALL_MIGRATIONS });
  });
  afterEach(async () => clearDecisions(database));
  afterAll(async () => database?.close());

  it(`counts each active rule's fires, rates, hours and labels exactly (${name})`, async () => {
    await seedDecisions(database, DECISIONS);
    const report = await createRuleReport({
      database,
      policies: { store: { current: () => active } },
    }).report(NOW);

    expect(report.generatedAt).toBe('2026-11-25T12:00:00.000Z');
    expect(report.shadow).toBeUndefined();
    expect(report.agreement).toBeUndefined();
    const a = report.active;
    expect({ policy: a.policy, name: a.name, revision: a.revision }).toEqual({
      policy: 'active',
      name: 'login',
      revision: 'rev-a',
    });
    // d1 d2 d8 | + d3 d4 d9 d12 | + d5 d6
    expect(a.decisions).toEqual({ h1: 3, h24: 7, d7: 9 });
    expect(a.rules.map((r) => r.ruleId)).toEqual(['new-browser', 'travel', 'silent', '$internal-error']);
    const [newBrowser, travel, silent, internalError] = a.rules;
    expect(newBrowser).toEqual({
      ruleId: 'new-browser',
      description: 'A browser never seen',
      fires: { h1: 1, h24: 3, d7: 4 },
      fireRate: { h1: 0.3333, h24: 0.4286, d7: 0.4444 },
      hourly: hourly({ 23: 1, 22: 1, 21: 1 }),
      // Fraud among the window's labelled decisions: d1, d3, d5 (d5 matched nothing).
      labelled: { truePositives: 2, falsePositives: 0, falseNegatives: 1 },
      precision: 1,
      recall: 0.6667,
      neverFired: false,
    });
    expect(travel).toEqual({
      ruleId: 'travel',
      description: 'Impossible travel',
      fires: { h1: 1, h24: 3, d7: 3 },
      fireRate: { h1: 0.3333, h24: 0.4286, d7: 0.3333 },
      hourly: hourly({ 23: 1, 21: 1, 18: 1 }),
      labelled: { truePositives: 1, falsePositives: 1, falseNegatives: 2 },
      precision: 0.5,
      recall: 0.3333,
      neverFired: false,
    });
    // Fired 8 d ago, 7 d ago exactly, on another revision and in the future: never in the window.
    expect(silent).toEqual({
      ruleId: 'silent',
      description: 'Never matches in 7 d',
      fires: { h1: 0, h24: 0, d7: 0 },
      fireRate: { h1: 0, h24: 0, d7: 0 },
      hourly: hourly({}),
      labelled: { truePositives: 0, falsePositives: 0, falseNegatives: 3 },
      recall: 0,
      neverFired: true,
    });
    // The engine's own failure, a pseudo-rule no policy lists: reported once it fired, no description.
    expect(internalError).toEqual({
      ruleId: '$internal-error',
      fires: { h1: 0, h24: 1, d7: 1 },
      fireRate: { h1: 0, h24: 0.1429, d7: 0.1111 },
      hourly: hourly({ 17: 1 }),
      labelled: { truePositives: 0, falsePositives: 0, falseNegatives: 3 },
      recall: 0,
      neverFired: false,
    });
    for (const r of a.rules) expect(r.hourly.reduce((x, y) => x + y, 0)).toBe(r.fires.h24);
  });

  it(`reports the shadow revision's rules and the agreement matrix of the two (${name})`, async () => {
    await seedDecisions(database, DECISIONS);
    const report = await createRuleReport({
      database,
      policies: { store: { current: () => active }, shadow: { current: () => shadow } },
    }).report(NOW);

    const s = report.shadow!;
    expect({ policy: s.policy, name: s.name, revision: s.revision }).toEqual({
      policy: 'shadow',
      name: 'login-candidate',
      revision: 'rev-s',
    });
    // d1 d2 | + d3 d4 d10 (another active revision, the same candidate) | + d5; not d12 (an earlier candidate)
    expect(s.decisions).toEqual({ h1: 2, h24: 5, d7: 6 });
    expect(s.rules.map((r) => r.ruleId)).toEqual(['new-browser', 'strict']);
    const [newBrowser, strict] = s.rules;
    // The shadow's own matches only: the active policy matched new-browser on four decisions.
    expect(newBrowser).toMatchObject({
      fires: { h1: 1, h24: 1, d7: 1 },
      labelled: { truePositives: 1, falsePositives: 0, falseNegatives: 3 },
      precision: 1,
      recall: 0.25,
      neverFired: false,
    });
    expect(strict).toEqual({
      ruleId: 'strict',
      description: 'Stricter',
      fires: { h1: 1, h24: 4, d7: 4 },
      fireRate: { h1: 0.5, h24: 0.8, d7: 0.6667 },
      hourly: hourly({ 23: 1, 22: 1, 21: 1, 18: 1 }),
      labelled: { truePositives: 3, falsePositives: 1, falseNegatives: 1 },
      precision: 0.75,
      recall: 0.75,
      neverFired: false,
    });
    // Active rev-a against shadow rev-s over 7 d: d1 d2 d3 d4 d5 (not d10: another active revision).
    expect(report.agreement).toEqual({
      allow: { allow: 2, challenge: 1, deny: 0 },
      challenge: { allow: 0, challenge: 0, deny: 1 },
      deny: { allow: 0, challenge: 0, deny: 1 },
    });
  });

  it(`answers every listed rule as never fired over empty tables (${name})`, async () => {
    const report = await createRuleReport({
      database,
      policies: { store: { current: () => active }, shadow: { current: () => shadow } },
    }).report(NOW);
    expect(report.active.decisions).toEqual({ h1: 0, h24: 0, d7: 0 });
    expect(report.active.rules.map((r) => [r.ruleId, r.neverFired, r.precision, r.recall])).toEqual([
      ['new-browser', true, undefined, undefined],
      ['travel', true, undefined, undefined],
      ['silent', true, undefined, undefined],
    ]);
    expect(report.shadow?.rules.every((r) => r.neverFired && r.fireRate.d7 === 0)).toBe(true);
    expect(report.agreement?.deny).toEqual({ allow: 0, challenge: 0, deny: 0 });
  });

  it(`keeps each rule id as one series across the active policy's revisions (${name})`, async () => {
    // rev-old also had a rule rev-a no longer has, fired on a decision labelled legit.
    const gone = { id: 'd14', atMs: NOW - 2 * DAY, verdict: 'deny', revision: 'rev-old', rules: ['gone'] };
    await seedDecisions(database, [...DECISIONS, { ...gone, verdict: 'deny' as const, label: 'legit' }]);
    const reader = createRuleReport({
      database,
      policies: { store: { current: () => active } },
      versions: async () => [
        { id: 'v1', name: 'login', revision: 'rev-old', author: 'ana', message: 'first', state: 'retired' },
      ],
    });
    const { active: a, history } = await reader.report(NOW);
    expect(history.scope).toBe('all');
    expect(history.revisions.map((m) => [m.revision, m.current, m.version?.id])).toEqual([
      ['rev-a', true, undefined],
      ['rev-old', false, 'v1'],
    ]);
    expect(history.revisions[1]).toMatchObject({
      firstDecisionAt: new Date(NOW - 2 * DAY).toISOString(),
      lastDecisionAt: new Date(NOW - HOUR).toISOString(),
      decisions: { h1: 0, h24: 1, d7: 2 },
    });
    // The active revision's rules first (its order), then the removed one.
    expect(history.rules.map((r) => [r.ruleId, r.status])).toEqual([
      ...a.rules.map((r) => [r.ruleId, 'current']),
      ['gone', 'removed'],
    ]);
    // new-browser: rev-a's counts plus d10 (rev-old, fraud) for it.
    const inActive = a.rules.find((r) => r.ruleId === 'new-browser')!;
    const across = history.rules.find((r) => r.ruleId === 'new-browser')!;
    expect(across.labelled.truePositives).toBe(inActive.labelled.truePositives + 1);
    expect(across.fires.d7).toBe(inActive.fires.d7 + 1);
    expect(across.byRevision.map((b) => b.revision)).toEqual(['rev-a', 'rev-old']);
    expect(history.rules.find((r) => r.ruleId === 'gone')).toMatchObject({
      fires: { d7: 1 },
      precision: 0,
      labelled: { truePositives: 0, falsePositives: 1, falseNegatives: 1 },
      byRevision: [{ revision: 'rev-old', fires: 1, truePositives: 0, falsePositives: 1, falseNegatives: 1 }],
    });
    // One earlier revision alone: the rules its rows name.
    const one = (await reader.report(NOW, { revision: 'rev-old' })).history;
    expect(one.scope).toBe('revision');
    expect(one.revisions.map((m) => m.revision)).toEqual(['rev-old']);
    expect(one.rules.map((r) => [r.ruleId, r.status])).toEqual([
      ['gone', 'removed'],
      ['new-browser', 'current'],
      ['silent', 'current'],
    ]);
  });

  it(`leaves the shadow out while the shadow policy is not loaded (${name})`, async () => {
    await seedDecisions(database, DECISIONS);
    const report = await createRuleReport({
      database,
      policies: { store: { current: () => active }, shadow: { current: () => undefined } },
    }).report(NOW);
    expect(Object.keys(report).sort()).toEqual(['active', 'generatedAt', 'history']);
  });
}

describe('the rule report on the embedded SQLite', () => {
  reportsOn('SQLite', () => ({ kind: 'memory' }));
});

describeOnPostgres('the rule report on PostgreSQL', (pg) => {
  reportsOn('PostgreSQL', () => ({ kind: 'postgres', url: pg.url }));
});
