import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { browserPolicy } from './support/browser-policy.ts';
import { eventually } from './support/eventually.ts';
import { type OperatorsHarness, startOperatorsHarness } from './support/operators-harness.ts';

/**
 * Issue 33: the operator API of the policy versions, over real HTTP on the embedded database. A
 * draft is made from YAML (refused when it does not compile), proposed, approved by a second admin
 * (never its author), activated and served; a revert brings the earlier verdicts back; each step is
 * in the audit trail with its operator; a version's content cannot be changed.
 */

let h: OperatorsHarness;
beforeAll(async () => {
  h = await startOperatorsHarness({ policy: { yaml: browserPolicy('challenge') } });
});
afterAll(() => h?.stop());

const as: OperatorsHarness['as'] = (...call) => h.as(...call);

const verdict = async () => (await h.decide(demoRequest('alice', undefined))).body.verdict;

/** Waits until this replica serves `versionId` (GET /policies). */
const served = (versionId: string) =>
  eventually(
    async () => {
      const { body } = await as('vera', 'GET', '/policies');
      return (
        (body.version as { active?: { versionId: string } } | undefined)?.active?.versionId === versionId
      );
    },
    { what: `version ${versionId} served` },
  );

describe('the policy versions API', () => {
  it('takes a draft through a second admin’s approval to every login, and back by a revert', async () => {
    expect(await verdict()).toBe('challenge');
    const draft = await as('alice', 'POST', '/policy-versions', {
      yaml: browserPolicy('deny'),
      message: 'deny browsers',
    });
    expect(draft.status).toBe(201);
    expect(draft.body).toMatchObject({
      state: 'draft',
      author: 'alice',
      name: 'login',
      yaml: browserPolicy('deny'),
    });
    const id = draft.body.id as string;

    expect((await as('alice', 'POST', `/policy-versions/${id}/propose`)).body).toMatchObject({
      state: 'proposed',
    });
    // Four eyes: its author cannot approve it; a viewer cannot either.
    const self = await as('alice', 'POST', `/policy-versions/${id}/approve`);
    expect(self.status).toBe(403);
    expect(self.body).toMatchObject({ code: 'RG_ERR_POLICY_SELF_APPROVAL' });
    expect((await as('vera', 'POST', `/policy-versions/${id}/approve`)).status).toBe(403);
    expect((await as('bob', 'POST', `/policy-versions/${id}/approve`)).body).toMatchObject({
      state: 'approved',
    });
    // A step from the wrong state is a conflict.
    expect((await as('bob', 'POST', `/policy-versions/${id}/propose`)).status).toBe(409);

    expect((await as('bob', 'POST', `/policy-versions/${id}/activate`)).body).toMatchObject({
      state: 'active',
    });
    await served(id);
    expect(await verdict()).toBe('deny');

    // Back to what served before: a first version of the file's policy, then a revert to it.
    const first = await as('alice', 'POST', '/policy-versions', {
      yaml: browserPolicy('challenge'),
      message: 'as the file',
    });
    const firstId = first.body.id as string;
    for (const [who, step] of [
      ['alice', 'propose'],
      ['bob', 'approve'],
      ['bob', 'activate'],
    ] as const)
      expect((await as(who, 'POST', `/policy-versions/${firstId}/${step}`)).status).toBe(200);
    await served(firstId);
    expect(await verdict()).toBe('challenge');
    const revert = await as('alice', 'POST', `/policy-versions/${id}/revert`, { message: 'deny again' });
    expect(revert.status).toBe(201);
    expect(revert.body).toMatchObject({ restoresId: id, state: 'active' });
    await served(revert.body.id as string);
    expect(await verdict()).toBe('deny');

    const list = await as('vera', 'GET', '/policy-versions');
    expect((list.body.versions as { id: string }[]).map((v) => v.id)).toEqual([revert.body.id, firstId, id]);
    expect(list.body.versions).not.toContainEqual(expect.objectContaining({ yaml: expect.anything() }));

    // Every step in the audit trail, with its operator and its outcome.
    expect(await h.auditSteps('vera', id)).toEqual(
      expect.arrayContaining([
        ['policy.propose', 'alice', 'done'],
        ['policy.approve', 'alice', 'refused'],
        ['policy.approve', 'bob', 'done'],
        ['policy.activate', 'bob', 'done'],
        ['policy.revert', 'alice', 'done'],
      ]),
    );
  });

  it('refuses a draft that does not compile, naming the YAML, and keeps nothing', async () => {
    const before = (await as('vera', 'GET', '/policy-versions')).body.versions as unknown[];
    const bad = await as('alice', 'POST', '/policy-versions', {
      yaml: browserPolicy('deny').replace('request.platform', 'request.noSuchField'),
      message: 'broken',
    });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ code: 'RG_ERR_INVALID_INPUT', field: 'yaml' });
    expect(String(bad.body.detail)).toMatch(/noSuchField/);
    const missing = await as('alice', 'POST', '/policy-versions', { yaml: browserPolicy('deny') });
    expect(missing.status).toBe(400);
    expect(missing.body).toMatchObject({ field: 'message' });
    expect((await as('vera', 'GET', '/policy-versions')).body.versions).toHaveLength(before.length);
  });

  it('never changes a version: PUT, PATCH and DELETE answer 405, an unknown id 404', async () => {
    const draft = await as('alice', 'POST', '/policy-versions', {
      yaml: browserPolicy('allow'),
      message: 'x',
    });
    const id = draft.body.id as string;
    for (const method of ['PUT', 'PATCH', 'DELETE'])
      expect(
        (await as('alice', method, `/policy-versions/${id}`, { yaml: browserPolicy('deny') })).status,
      ).toBe(405);
    expect((await as('vera', 'GET', `/policy-versions/${id}`)).body).toMatchObject({
      yaml: browserPolicy('allow'),
    });
    expect((await as('vera', 'GET', '/policy-versions/nope')).status).toBe(404);
    expect(
      (await as('vera', 'POST', '/policy-versions', { yaml: browserPolicy('allow'), message: 'x' })).status,
    ).toBe(403);
  });
});
