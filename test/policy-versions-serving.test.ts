import { readFileSync } from 'node:fs';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type RiskgateDatabase } from '../src/database/database.ts';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { PolicyVersionStore } from '../src/policy-versions/policy-version-store.ts';
import { type PolicyVersionSync, rolloutBucket } from '../src/policy-versions/policy-version-sync.ts';
import { CONTROL_MIGRATIONS, DECISION_MIGRATIONS } from '../src/service/database-migrations.ts';
import { systemClock } from '../src/timing/clock.ts';
import type { Harness } from './decide-harness.ts';
import { eventually } from './support/eventually.ts';
import { createAnswerValidator, type OpenApiDocument } from './support/openapi-validator.ts';
import { postgresAvailable, type RunningPostgres } from './support/postgres-server.ts';
import { startTwoReplicasOnPostgres, type TwoReplicas } from './support/two-replicas.ts';

/**
 * Issue 33's serving: two riskgates on one PostgreSQL. A version activated in the control
 * database is served by the other replica within 2 s (GET /policies says which, and the verdicts
 * follow); staged to 10 %, an account in its buckets gets the staged verdict and one outside the
 * active one's, each with the other's verdict recorded beside it; a staged version that fails to
 * evaluate answers the active one's verdict; a version that does not compile is never served (the
 * last good one stays, alarmed); a version's content still cannot be changed.
 */

const policy = (name: string, rule: string) => `
apiVersion: riskgate/v1
kind: Policy
name: ${name}
thresholds: { challenge: 50, deny: 100 }
rules:
${rule}
`;

/** Serves allow to every browser login (no signal read). */
const CONTROL = policy(
  'login',
  '  - id: browser\n    description: d\n    when: request.platform == "browser"\n    score: 0\n',
);
/** Denies every browser login. */
const CANDIDATE = policy(
  'login',
  '  - id: browser\n    description: d\n    when: request.platform == "browser"\n    verdict: deny\n',
);
/** Compiles, but its rule fails on every login (int() of a word): an evaluation error. */
const FAILING = policy(
  'login',
  '  - id: broken\n    description: d\n    when: int(request.platform) > 0\n    verdict: deny\n',
);
/** Does not compile: the field does not exist. */
const BROKEN = policy(
  'login',
  '  - id: nope\n    description: d\n    when: request.noSuchField == "x"\n    verdict: deny\n',
);
/** The file both replicas start with: challenges every browser login. */
const FILE = policy(
  'file',
  '  - id: browser\n    description: d\n    when: request.platform == "browser"\n    verdict: challenge\n',
);

const login = (accountId: string) => demoRequest(accountId, undefined);

interface PoliciesAnswer {
  source: string;
  revision: string;
  version?: {
    generation: number;
    active?: { versionId: string; revision: string; since: string };
    staged?: { versionId: string; stage: string; percent: number };
    lastError?: { versionId: string; message: string };
  };
}

/**
 * An unstage or an unschedule naming a version (as the console's, from that version's page) ends
 * only that version's rollout or schedule: another version's is refused (409) and left in place.
 */
async function undoneByVersionOnly(
  store: PolicyVersionStore,
  approved: (yaml: string, message: string) => Promise<{ id: string }>,
  nowMs: number,
): Promise<void> {
  const v = await approved(CANDIDATE, 'staged, then scheduled');
  const w = await approved(CANDIDATE, 'another approved version');
  await store.stage(v.id, { stage: 'percent', percent: 10 });
  await expect(store.unstage(w.id)).rejects.toMatchObject({
    code: 'RG_ERR_POLICY_VERSION_CONFLICT',
    message: `policy version ${w.id} is not staged`,
  });
  expect((await store.served()).staged?.version.id).toBe(v.id);
  await store.unstage(v.id);
  expect((await store.served()).staged).toBeUndefined();
  await store.schedule(v.id, nowMs + 3_600_000, 'bob');
  await expect(store.unschedule(w.id)).rejects.toMatchObject({ code: 'RG_ERR_POLICY_VERSION_CONFLICT' });
  expect((await store.served()).scheduled?.versionId).toBe(v.id);
  await store.unschedule(v.id);
  expect((await store.served()).scheduled).toBeUndefined();
}

describe.runIf(postgresAvailable())('policy versions served by two riskgates on PostgreSQL', () => {
  let replicas: TwoReplicas;
  let pg: RunningPostgres;
  let one: Harness;
  let two: Harness;
  let database: RiskgateDatabase;
  let store: PolicyVersionStore;

  beforeAll(async () => {
    replicas = await startTwoReplicasOnPostgres(FILE);
    ({ pg, one, two } = replicas);
    // What the versions API does, on the shared database (the replicas only read it).
    // One PostgreSQL holds both kinds of state: open it with every migration riskgate ran.
    database = await openDatabase(
      { kind: 'postgres', url: pg.url },
      { migrations: { ...CONTROL_MIGRATIONS, ...DECISION_MIGRATIONS } },
    );
    store = new PolicyVersionStore(database);
  }, 60_000);
  afterAll(async () => {
    await database?.close();
    await replicas?.stop();
  });

  const violations = createAnswerValidator(
    JSON.parse(readFileSync(new URL('../docs/openapi.json', import.meta.url), 'utf8')) as OpenApiDocument,
  );
  /** GET /policies, checked against the OpenAPI document (its database fields included). */
  const policies = async (h: Harness) => {
    const res = await h.ops('/policies');
    const text = await res.text();
    const answer = {
      method: 'GET',
      path: '/policies',
      status: res.status,
      contentType: res.headers.get('content-type'),
      text,
    };
    expect(violations(answer)).toEqual([]);
    return JSON.parse(text) as PoliciesAnswer;
  };
  const approved = async (yaml: string, message: string) => {
    const v = await store.create({ name: 'login', yaml, author: 'ana', message });
    await store.step(v.id, 'propose', 'ana');
    return store.step(v.id, 'approve', 'bob');
  };
  const serving = (h: Harness, check: (p: PoliciesAnswer) => boolean, what: string) =>
    eventually(async () => check(await policies(h)), { timeoutMs: 10_000, intervalMs: 25, what });

  it('serves the file until a version is activated, then the other replica serves it within 2 s', async () => {
    expect(await policies(two)).toMatchObject({ source: 'file', version: { generation: 0 } });
    expect((await two.decide(login('alice'))).body.verdict).toBe('challenge');

    const v1 = await approved(CONTROL, 'allow browsers');
    const activatedAt = performance.now();
    await store.step(v1.id, 'activate', 'bob');
    await serving(two, (p) => p.version?.active?.versionId === v1.id, 'the second replica serving v1');
    expect(performance.now() - activatedAt).toBeLessThan(2000);
    const answer = await policies(two);
    expect(answer).toMatchObject({ source: 'database', revision: v1.revision });
    expect(answer.version?.active).toMatchObject({ revision: v1.revision });
    expect(Date.parse(answer.version?.active?.since ?? '')).not.toBeNaN();
    expect((await two.decide(login('alice'))).body.verdict).toBe('allow');
    await serving(one, (p) => p.version?.active?.versionId === v1.id, 'the first replica serving v1');
    const metrics = await (await two.ops('/metrics')).text();
    expect(metrics).toMatch(
      new RegExp(`riskgate_policy_version_info\\{[^}]*source="database"[^}]*version_id="${v1.id}"`),
    );
  });

  it('serves a version staged to 10 % to the accounts in its buckets only, recording the other verdict beside it', async () => {
    const v2 = await approved(CANDIDATE, 'deny browsers');
    await store.stage(v2.id, { stage: 'percent', percent: 10 });
    await serving(two, (p) => p.version?.staged?.versionId === v2.id, 'the second replica staging v2');
    expect((await policies(two)).version?.staged).toMatchObject({ stage: 'percent', percent: 10 });
    const accounts = Array.from({ length: 200 }, (_, i) => `acct-${i}`);
    const inside = accounts.find((a) => rolloutBucket(a, v2.id) < 1000)!;
    const outside = accounts.find((a) => rolloutBucket(a, v2.id) >= 1000)!;

    const staged = await two.decide(login(inside));
    expect(staged.body.verdict).toBe('deny');
    expect(two.lines.at(-1)).toMatchObject({ shadow: { verdict: 'allow' } });
    const control = await two.decide(login(outside));
    expect(control.body.verdict).toBe('allow');
    expect(two.lines.at(-1)).toMatchObject({ shadow: { verdict: 'deny' } });
    // Stable: the same account meets the same version on every login.
    expect((await two.decide(login(inside))).body.verdict).toBe('deny');

    await store.step(v2.id, 'activate', 'bob');
    await serving(
      two,
      (p) => p.version?.active?.versionId === v2.id && p.version.staged === undefined,
      'v2 active',
    );
    expect((await two.decide(login(outside))).body.verdict).toBe('deny');
  });

  it("answers the active version's verdict when the staged one fails to evaluate", async () => {
    const v1 = await approved(CONTROL, 'allow browsers again');
    await store.step(v1.id, 'activate', 'bob');
    const v3 = await approved(FAILING, 'a rule that errors');
    await store.stage(v3.id, { stage: 'percent', percent: 50 });
    await serving(two, (p) => p.version?.staged?.versionId === v3.id, 'the second replica staging v3');
    const inside = Array.from({ length: 200 }, (_, i) => `acct-${i}`).find(
      (a) => rolloutBucket(a, v3.id) < 5000,
    )!;
    const answer = await two.decide(login(inside));
    expect(answer.body.verdict).toBe('allow');
    expect(two.lines.at(-1)).toMatchObject({
      policy: { revision: v1.revision },
      staged: { versionId: v3.id, fellBack: true },
    });
    await store.unstage();
    await serving(two, (p) => p.version?.staged === undefined, 'the stage ended');
  });

  it('never serves a version that does not compile: the last good one stays, alarmed', async () => {
    const good = (await policies(two)).version?.active?.versionId;
    const bad = await approved(BROKEN, 'a field that does not exist');
    await store.step(bad.id, 'activate', 'bob');
    await serving(two, (p) => p.version?.lastError?.versionId === bad.id, 'the refusal reported');
    const answer = await policies(two);
    expect(answer.version?.active?.versionId).toBe(good);
    expect(answer.version?.lastError?.message).toMatch(/noSuchField/);
    expect((await two.decide(login('alice'))).body.verdict).toBe('allow');
    expect(await (await two.ops('/metrics')).text()).toMatch(/riskgate_policy_version_refused 1/);
    expect(
      two.serviceLog.some((l) => l.msg === 'policy version refused; the last good policy stays served'),
    ).toBe(true);
  });

  it('makes a scheduled activation once when two replicas find it due together', async () => {
    const { DrivenClock } = await import('../src/timing/driven-clock.ts');
    const { PolicyVersionSync } = await import('../src/policy-versions/policy-version-sync.ts');
    const clock = new DrivenClock({ nowMs: Date.now() });
    const made: string[] = [];
    const replica = () =>
      new PolicyVersionSync({
        store: new PolicyVersionStore(database, { clock }),
        clock,
        pollMs: 60_000,
        onScheduledActivation: async (v, by) => {
          made.push(`${v.id} by ${by}`);
        },
      });
    const [a, b] = [replica(), replica()];
    const v = await approved(CONTROL, 'at ten');
    await store.schedule(v.id, clock.nowMs() + 60_000, 'bob');
    await Promise.all([a.start(), b.start()]);
    try {
      await clock.advance(60_000);
      await Promise.all([a.refresh(), b.refresh()]);
      expect(made).toEqual([`${v.id} by bob`]);
      expect(a.active()?.version.id).toBe(v.id);
      expect(b.active()?.version.id).toBe(v.id);
      await serving(two, (p) => p.version?.active?.versionId === v.id, 'the server replica serving it');
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });

  it("ends a rollout or a schedule named by version only when it is that version's", async () => {
    await undoneByVersionOnly(store, approved, Date.now());
  });

  it("still refuses a change to a version's content", async () => {
    const [v] = await store.list(1);
    await expect(
      sql`update policy_version set yaml = 'name: x' where id = ${v!.id}`.execute(database.db),
    ).rejects.toThrow(/immutable/);
  });
});

describe('policy version serving and rollout on one database: the schedule, the guards, an unreadable database', () => {
  it('is made when the driven clock passes its time, once, in the name of who scheduled it', async () => {
    const { DrivenClock } = await import('../src/timing/driven-clock.ts');
    const { PolicyVersionSync } = await import('../src/policy-versions/policy-version-sync.ts');
    const clock = new DrivenClock();
    const database = await openDatabase({ kind: 'memory' }, { migrations: CONTROL_MIGRATIONS });
    const store = new PolicyVersionStore(database, { clock });
    const made: string[] = [];
    const sync: PolicyVersionSync = new PolicyVersionSync({
      store,
      clock,
      pollMs: 60_000,
      onScheduledActivation: async (v, by) => {
        made.push(`${v.id} by ${by}`);
      },
    });
    try {
      const v = await store.create({ name: 'login', yaml: CONTROL, author: 'ana', message: 'at nine' });
      await store.step(v.id, 'propose', 'ana');
      await store.step(v.id, 'approve', 'bob');
      await store.schedule(v.id, clock.nowMs() + 60_000, 'bob');
      await sync.start();
      expect(sync.status().scheduled).toMatchObject({ versionId: v.id, by: 'bob' });
      await clock.advance(59_999);
      await sync.refresh();
      expect(sync.active()).toBeUndefined();
      await clock.advance(1);
      await sync.refresh();
      expect(sync.active()?.version.id).toBe(v.id);
      expect(made).toEqual([`${v.id} by bob`]);
      expect(await store.get(v.id)).toMatchObject({ state: 'active', stateChangedBy: 'bob' });
      // Done once: a later poll finds nothing scheduled.
      await sync.refresh();
      expect(made).toHaveLength(1);
      expect(sync.status().scheduled).toBeUndefined();
    } finally {
      await sync.stop();
      await database.close();
    }
  });

  it('keeps serving the last version read while the database cannot be read, and says since when', async () => {
    const { PolicyVersionSync } = await import('../src/policy-versions/policy-version-sync.ts');
    const database = await openDatabase({ kind: 'memory' }, { migrations: CONTROL_MIGRATIONS });
    const store = new PolicyVersionStore(database);
    const log: Record<string, unknown>[] = [];
    const sync = new PolicyVersionSync({ store, pollMs: 60_000, log: (l) => log.push(l) });
    const v = await store.create({ name: 'login', yaml: CONTROL, author: 'ana', message: 'one' });
    await store.step(v.id, 'propose', 'ana');
    await store.step(v.id, 'approve', 'bob');
    await store.step(v.id, 'activate', 'bob');
    await sync.start();
    expect(sync.active()?.version.id).toBe(v.id);
    await database.close();
    await expect(sync.refresh()).rejects.toThrow();
    await expect(sync.refresh()).rejects.toThrow();
    expect(sync.active()?.version.id).toBe(v.id);
    expect(sync.status().failingSince).toBeDefined();
    // Once per failure streak, not once per poll.
    expect(log.filter((l) => l.level === 'warn')).toHaveLength(1);
    await sync.stop();
  });

  it('refuses to schedule or stage a version that is not approved, and a time in the past', async () => {
    const clock = { now: Date.parse('2026-05-01T10:00:00Z') };
    const database = await openDatabase({ kind: 'memory' }, { migrations: CONTROL_MIGRATIONS });
    const store = new PolicyVersionStore(database, { clock: { ...systemClock, nowMs: () => clock.now } });
    try {
      const v = await store.create({ name: 'login', yaml: CONTROL, author: 'ana', message: 'draft' });
      await expect(store.schedule(v.id, clock.now + 1000, 'bob')).rejects.toMatchObject({
        code: 'RG_ERR_POLICY_VERSION_CONFLICT',
      });
      await expect(store.stage(v.id, { stage: 'shadow' })).rejects.toMatchObject({
        code: 'RG_ERR_POLICY_VERSION_CONFLICT',
      });
      await store.step(v.id, 'propose', 'ana');
      await store.step(v.id, 'approve', 'bob');
      await expect(store.schedule(v.id, clock.now, 'bob')).rejects.toMatchObject({
        code: 'RG_ERR_INVALID_INPUT',
      });
      await expect(store.stage(v.id, { stage: 'percent', percent: 100 })).rejects.toMatchObject({
        code: 'RG_ERR_INVALID_INPUT',
      });
      const before = await store.generation();
      await store.stage(v.id, { stage: 'shadow' });
      expect(await store.generation()).toBe(before + 1);
      expect((await store.served()).staged).toMatchObject({ stage: 'shadow', basisPoints: 0 });
      const w = await store.create({ name: 'login', yaml: CANDIDATE, author: 'ana', message: 'another' });
      await store.step(w.id, 'propose', 'ana');
      await store.step(w.id, 'approve', 'bob');
      await expect(store.stage(w.id, { stage: 'shadow' })).rejects.toMatchObject({
        code: 'RG_ERR_POLICY_VERSION_CONFLICT',
      });
      // Withdrawing the staged version ends its stage.
      await store.step(v.id, 'withdraw', 'ana');
      expect((await store.served()).staged).toBeUndefined();
      await expect(store.unstage()).rejects.toMatchObject({ code: 'RG_ERR_POLICY_VERSION_CONFLICT' });
    } finally {
      await database.close();
    }
  });

  it("ends a rollout or a schedule named by version only when it is that version's", async () => {
    const database = await openDatabase({ kind: 'memory' }, { migrations: CONTROL_MIGRATIONS });
    const store = new PolicyVersionStore(database);
    const approved = async (yaml: string, message: string) => {
      const v = await store.create({ name: 'login', yaml, author: 'ana', message });
      await store.step(v.id, 'propose', 'ana');
      return store.step(v.id, 'approve', 'bob');
    };
    try {
      await undoneByVersionOnly(store, approved, Date.now());
    } finally {
      await database.close();
    }
  });
});
