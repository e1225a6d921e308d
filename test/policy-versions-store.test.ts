import { join } from 'node:path';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { type DatabaseTarget, openDatabase, type RiskgateDatabase } from '../src/database/database.ts';
import { ErrorCode } from '../src/errors/riskgate-error.ts';
import { isImmutableRefusal, PolicyVersionStore } from '../src/policy-versions/policy-version-store.ts';
import { policyVersionMigrations } from '../src/policy-versions/policy-version-tables.ts';
import { CONTROL_MIGRATIONS } from '../src/service/database-migrations.ts';
import { systemClock } from '../src/timing/clock.ts';
import { describeOnPostgres } from './support/postgres-server.ts';
import { tempDirForBlock } from './support/temp-dir-for-block.ts';

/**
 * Issue 33's policy versions in the control database: a version's content is written once (no
 * method changes it, and the database refuses a direct UPDATE or DELETE on SQLite and PostgreSQL);
 * only its state moves, along the promotion flow, with four eyes on approval; activation retires
 * the active version and bumps the marker replicas poll; a revert is a new version pointing at
 * the old one.
 */

const V1 = 'name: login\nversion: 1\n';
const V2 = 'name: login\nversion: 2\n';

async function codeOf(promise: Promise<unknown>): Promise<string | undefined> {
  try {
    await promise;
  } catch (error) {
    return (error as { code?: string }).code;
  }
  return undefined;
}

async function refusal(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  return undefined;
}

async function behavesAsPolicyVersions(database: RiskgateDatabase): Promise<void> {
  let nowMs = Date.parse('2026-05-01T10:00:00.000Z');
  const store = new PolicyVersionStore(database, { clock: { ...systemClock, nowMs: () => nowMs } });
  expect(await store.active()).toEqual({ generation: 0, version: undefined });

  const one = await store.create({ name: 'login', yaml: V1, author: 'ana', message: 'first' });
  expect(one).toMatchObject({ state: 'draft', author: 'ana', parentId: null, restoresId: null });
  expect(one.revision).toMatch(/^[0-9a-f]{16}$/);
  // Approving a draft skips a step: refused, nothing moved.
  expect(await codeOf(store.step(one.id, 'approve', 'bob'))).toBe(ErrorCode.POLICY_VERSION_CONFLICT);
  await store.step(one.id, 'propose', 'ana');
  // Four eyes: the author cannot approve.
  expect(await codeOf(store.step(one.id, 'approve', 'ana'))).toBe(ErrorCode.POLICY_SELF_APPROVAL);
  expect((await store.get(one.id))?.state).toBe('proposed');
  nowMs += 1000;
  expect(await store.step(one.id, 'approve', 'bob')).toMatchObject({
    state: 'approved',
    stateChangedBy: 'bob',
    stateChangedMs: nowMs,
  });
  await store.step(one.id, 'activate', 'bob');
  const first = await store.active();
  expect(first.generation).toBe(1);
  expect(first.version).toMatchObject({ id: one.id, yaml: V1, state: 'active' });

  nowMs += 1000;
  const two = await store.create({ name: 'login', yaml: V2, author: 'bob', message: 'v2', parentId: one.id });
  for (const [step, actor] of [
    ['propose', 'bob'],
    ['approve', 'ana'],
    ['activate', 'ana'],
  ] as const)
    await store.step(two.id, step, actor);
  expect((await store.active()).version?.id).toBe(two.id);
  expect((await store.get(one.id))?.state).toBe('retired');
  // An active version is not activated twice.
  expect(await codeOf(store.step(two.id, 'activate', 'ana'))).toBe(ErrorCode.POLICY_VERSION_CONFLICT);

  // Revert: a new version carrying the old YAML, pointing at it; history kept.
  nowMs += 1000;
  const back = await store.revert(one.id, 'ana', 'v2 denies too much');
  expect(back).toMatchObject({
    yaml: V1,
    restoresId: one.id,
    parentId: two.id,
    state: 'active',
    author: 'ana',
  });
  expect((await store.active()).generation).toBe(3);
  expect((await store.get(two.id))?.state).toBe('retired');
  expect((await store.list(10)).map((v) => v.id)).toEqual([back.id, two.id, one.id]);
  // A draft never active cannot be reverted to.
  const draft = await store.create({ name: 'login', yaml: V2, author: 'ana', message: 'later' });
  expect(await codeOf(store.revert(draft.id, 'ana', 'no'))).toBe(ErrorCode.POLICY_VERSION_CONFLICT);
  expect(await codeOf(store.step('nope', 'propose', 'ana'))).toBe(ErrorCode.NOT_FOUND);

  // The database itself: content never changes, rows never go; the state column may move.
  const db = database.db;
  for (const statement of [
    sql`update policy_version set yaml = ${'name: login\nrules: []\n'} where id = ${one.id}`,
    sql`update policy_version set author = ${'mallory'} where id = ${one.id}`,
    sql`update policy_version set message = ${'rewritten'}, state = ${'draft'} where id = ${one.id}`,
    sql`update policy_version set restores_id = ${null} where id = ${back.id}`,
    sql`delete from policy_version where id = ${draft.id}`,
  ]) {
    const error = await refusal(statement.execute(db));
    expect(isImmutableRefusal(error), String(error)).toBe(true);
  }
  expect(await store.get(one.id)).toMatchObject({
    yaml: V1,
    author: 'ana',
    message: 'first',
    state: 'retired',
  });
  expect(await store.get(draft.id)).toBeDefined();
  await sql`update policy_version set state = ${'withdrawn'} where id = ${draft.id}`.execute(db);
  expect((await store.get(draft.id))?.state).toBe('withdrawn');
  // A state outside the flow is refused by the column's check.
  expect(
    await refusal(sql`update policy_version set state = ${'live'} where id = ${draft.id}`.execute(db)),
  ).toBeDefined();
}

describe('policy versions on SQLite', () => {
  const dir = tempDirForBlock('rg-policy-versions-');

  it('keeps each version immutable and moves it along the promotion flow (SQLite file)', async () => {
    const target: DatabaseTarget = { kind: 'sqlite', path: join(dir, 'control.sqlite') };
    const database = await openDatabase(target, { migrations: CONTROL_MIGRATIONS });
    try {
      await behavesAsPolicyVersions(database);
    } finally {
      await database.close();
    }
    // Reopened: the migrations do not run twice, the versions are still there.
    const again = await openDatabase(target, { migrations: CONTROL_MIGRATIONS });
    try {
      expect((await new PolicyVersionStore(again).active()).generation).toBe(3);
    } finally {
      await again.close();
    }
  });

  it('approves its own version only when self-approval is allowed', async () => {
    const database = await openDatabase({ kind: 'memory' }, { migrations: policyVersionMigrations });
    try {
      const store = new PolicyVersionStore(database, { allowSelfApproval: true });
      const v = await store.create({ name: 'login', yaml: V1, author: 'solo', message: 'one operator' });
      await store.step(v.id, 'propose', 'solo');
      expect((await store.step(v.id, 'approve', 'solo')).state).toBe('approved');
    } finally {
      await database.close();
    }
  });
});

describeOnPostgres('policy versions on PostgreSQL', (pg) => {
  it('keeps each version immutable and moves it along the promotion flow (PostgreSQL)', async () => {
    const database = await openDatabase(
      { kind: 'postgres', url: pg.url },
      { migrations: CONTROL_MIGRATIONS },
    );
    try {
      await behavesAsPolicyVersions(database);
      const error = await refusal(sql`truncate policy_version cascade`.execute(database.db));
      expect(isImmutableRefusal(error), String(error)).toBe(true);
    } finally {
      await database.close();
    }
  });
});
