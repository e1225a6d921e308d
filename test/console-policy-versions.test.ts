import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConsoleClient } from './support/console-client.ts';
import { type OperatorsHarness, startOperatorsHarness } from './support/operators-harness.ts';

/**
 * Issue 33: the console's Policies pages over real HTTP against a real riskgate (embedded
 * database): the versions newest first, a draft uploaded from the page (one that does not compile
 * shows its errors and is not kept), a version's page with its escaped YAML and its diff against
 * the active version by rule, the steps an admin's role allows (four eyes refused on the page with
 * the store's words, never a 500), a viewer who sees no form, and a revert, each step audited; an
 * approved version staged, unstaged, scheduled and unscheduled from its page.
 */

const policy = (o: { verdict: string; challenge?: number; extra?: string }) => `apiVersion: riskgate/v1
kind: Policy
name: login
thresholds: { challenge: ${o.challenge ?? 50}, deny: 100 }
rules:
  - id: browser
    description: every browser login <b>bold</b> & more
    when: request.platform == "browser"
    verdict: ${o.verdict}
  - id: steady
    description: never changes
    when: request.accountId == "nobody"
    score: 5
${o.extra ?? ''}`;

const FRESH_RULE = `  - id: fresh
    description: a rule the draft adds
    when: request.accountId == "mallory"
    verdict: deny
`;

let h: OperatorsHarness;
beforeAll(async () => {
  h = await startOperatorsHarness({ policy: { yaml: policy({ verdict: 'challenge' }) } });
}, 60_000);
afterAll(() => h?.stop());

const signIn: OperatorsHarness['signIn'] = (who) => h.signIn(who);

async function apiVersions(): Promise<{ id: string; state: string }[]> {
  return (await h.as('vera', 'GET', '/policy-versions')).body.versions as { id: string; state: string }[];
}

/** Uploads a draft from the Policies page; its id (from the redirect to its page). */
async function upload(s: ConsoleClient, yaml: string, message: string): Promise<string> {
  const res = await s.post('/console/policies', { yaml, message });
  expect(res.status, await res.clone().text()).toBe(303);
  const location = res.headers.get('location')!;
  expect(location).toMatch(/^\/console\/policies\/[0-9a-f]+\?done=create$/);
  return location.split('/').at(-1)!.split('?')[0]!;
}

/** Takes a step from a version's page; the redirect's target page is returned. */
async function step(s: ConsoleClient, id: string, name: string): Promise<string> {
  const res = await s.post(`/console/policies/${id}/${name}`);
  expect(res.status, await res.clone().text()).toBe(303);
  return (await s.get(res.headers.get('location')!)).text();
}

describe('the Policies pages', () => {
  it('upload a draft, refuse one that does not compile, and move it through four eyes to active', async () => {
    const alice = await signIn('alice');
    const before = (await apiVersions()).length;
    // A CRLF textarea and a field the inputs do not have: the compile error is on the page.
    const broken = policy({ verdict: 'deny' }).replace('request.platform', 'request.noSuchField');
    const refused = await alice.post('/console/policies', {
      yaml: broken.replace(/\n/g, '\r\n'),
      message: 'broken',
    });
    expect(refused.status).toBe(400);
    const refusedPage = await refused.text();
    expect(refusedPage).toContain('The draft was not saved.');
    expect(refusedPage).toMatch(/noSuchField/);
    // The form comes back as sent, for fixing.
    expect(refusedPage).toContain('request.noSuchField');
    expect(await apiVersions()).toHaveLength(before);

    const id = await upload(alice, policy({ verdict: 'challenge' }).replace(/\n/g, '\r\n'), 'as the file');
    const page = await (await alice.get(`/console/policies/${id}?done=create`)).text();
    expect(page).toContain('Draft saved.');
    // The YAML as text: escaped, with the line endings a file has.
    expect(page).toContain('every browser login &lt;b&gt;bold&lt;/b&gt; &amp; more');
    expect(page).not.toContain('<b>bold</b>');
    expect(page).not.toContain('\r\n');
    // Nothing was ever active: every rule is new against nothing.
    expect(page).toContain('2 rule(s) added');
    expect(page).toMatch(/Propose for review/);
    expect(page).not.toMatch(/>Approve</);

    const list = await (await alice.get('/console/policies')).text();
    expect(list).toContain(id);
    expect(list).toMatch(/<span class="tag">draft<\/span>/);
    expect(list).toContain('as the file');

    expect(await step(alice, id, 'propose')).toContain('Proposed: another admin can review');
    // Four eyes: the author's approval is refused on the page, with why, and audited as refused.
    const self = await alice.post(`/console/policies/${id}/approve`);
    expect(self.status).toBe(403);
    const selfPage = await self.text();
    expect(selfPage).toContain('Refused.');
    expect(selfPage).toContain('an admin other than its author must approve it');
    expect((await apiVersions()).find((v) => v.id === id)?.state).toBe('proposed');

    const bob = await signIn('bob');
    expect(await step(bob, id, 'approve')).toContain('Approved: it can be activated.');
    // A step from the wrong state is a clear conflict, not a 500.
    const again = await bob.post(`/console/policies/${id}/approve`);
    expect(again.status).toBe(409);
    expect(await again.text()).toMatch(/is approved: approve needs it proposed/);
    expect(await step(bob, id, 'activate')).toContain('Activated: every replica serves it');
    expect(await (await bob.get('/console/policies')).text()).toMatch(
      new RegExp(`Active: <a href="/console/policies/${id}"`),
    );

    expect(await h.auditSteps('vera', id)).toEqual(
      expect.arrayContaining([
        ['policy.propose', 'alice', 'done'],
        ['policy.approve', 'alice', 'refused'],
        ['policy.approve', 'bob', 'done'],
        ['policy.activate', 'bob', 'done'],
      ]),
    );
  });

  it('stage, unstage, schedule and unschedule an approved version from its page, for an admin only', async () => {
    const alice = await signIn('alice');
    const bob = await signIn('bob');
    const vera = await signIn('vera');
    const id = await upload(alice, policy({ verdict: 'deny', extra: FRESH_RULE }), 'staged');
    await step(alice, id, 'propose');
    const proposed = await (await bob.get(`/console/policies/${id}`)).text();
    // Only an approved version is staged or scheduled: no form before.
    expect(proposed).not.toContain(`action="/console/policies/${id}/stage"`);
    await step(bob, id, 'approve');
    const approved = await (await bob.get(`/console/policies/${id}`)).text();
    expect(approved).toContain('Share of accounts (%)');
    expect(approved).toContain('Stage in shadow');
    expect(approved).toContain('Activate at (UTC)');
    expect(approved).not.toContain('End the rollout');
    // A viewer sees none of the forms, and a post from one is refused.
    const seen = await (await vera.get(`/console/policies/${id}`)).text();
    expect(seen).not.toContain(`action="/console/policies/${id}/stage"`);
    expect(seen).not.toContain(`action="/console/policies/${id}/schedule"`);
    for (const change of ['stage', 'unstage', 'schedule', 'unschedule'])
      expect((await vera.post(`/console/policies/${id}/${change}`, { percent: '10' })).status).toBe(403);

    // A share out of range is refused on the page, naming the field, and nothing is staged.
    const tooMuch = await bob.post(`/console/policies/${id}/stage`, { percent: '100' });
    expect(tooMuch.status).toBe(400);
    expect(await tooMuch.text()).toContain('Refused.');
    const staged = await bob.post(`/console/policies/${id}/stage`, { percent: '10' });
    expect(staged.status).toBe(303);
    const stagedPage = await (await bob.get(staged.headers.get('location')!)).text();
    expect(stagedPage).toContain('Staged: every replica serves it to its share of accounts');
    expect(stagedPage).toContain('staged: 10 % of accounts');
    expect(stagedPage).toContain('End the rollout');
    const shadow = await bob.post(`/console/policies/${id}/stage`, { shadow: '1' });
    expect(shadow.status).toBe(303);
    expect(await (await bob.get(shadow.headers.get('location')!)).text()).toContain('staged: shadow');
    const ended = await bob.post(`/console/policies/${id}/unstage`);
    expect(ended.status).toBe(303);
    const endedPage = await (await bob.get(ended.headers.get('location')!)).text();
    expect(endedPage).toContain('Rollout ended');
    expect(endedPage).not.toContain('staged:');
    // The page was out of date: this version is no longer staged.
    const stale = await bob.post(`/console/policies/${id}/unstage`);
    expect(stale.status).toBe(409);
    expect(await stale.text()).toContain(`policy version ${id} is not staged`);

    // A browser's datetime-local field: read as UTC.
    const inAnHour = new Date(Date.now() + 3_600_000);
    const local = inAnHour.toISOString().slice(0, 16);
    const past = await bob.post(`/console/policies/${id}/schedule`, { at: '2020-01-01T00:00' });
    expect(past.status).toBe(400);
    expect(await past.text()).toContain('the activation time must be in the future');
    expect((await bob.post(`/console/policies/${id}/schedule`, { at: 'soon' })).status).toBe(400);
    const scheduled = await bob.post(`/console/policies/${id}/schedule`, { at: local });
    expect(scheduled.status).toBe(303);
    const scheduledPage = await (await bob.get(scheduled.headers.get('location')!)).text();
    expect(scheduledPage).toContain('Scheduled: the first replica to poll after that time activates it.');
    expect(scheduledPage).toContain(`${local}:00.000Z`);
    expect(scheduledPage).toContain('Cancel the scheduled activation');
    const cancelled = await alice.post(`/console/policies/${id}/unschedule`);
    expect(cancelled.status).toBe(303);
    const cancelledPage = await (await alice.get(cancelled.headers.get('location')!)).text();
    expect(cancelledPage).toContain('Scheduled activation cancelled');
    expect(cancelledPage).not.toContain('Cancel the scheduled activation');

    const steps = (await h.auditSteps('vera', id))
      .filter(([action]) => /stage|schedule/.test(action))
      .reverse();
    expect(steps).toEqual([
      ['policy.stage', 'bob', 'done'],
      ['policy.stage', 'bob', 'done'],
      ['policy.unstage', 'bob', 'done'],
      ['policy.unstage', 'bob', 'refused'],
      ['policy.schedule', 'bob', 'refused'],
      ['policy.schedule', 'bob', 'done'],
      ['policy.unschedule', 'alice', 'done'],
    ]);
  });

  it('show a version’s diff against the active one by rule, to a viewer without a form, and revert', async () => {
    const alice = await signIn('alice');
    const bob = await signIn('bob');
    const active = (await apiVersions()).find((v) => v.state === 'active')!.id;
    const id = await upload(
      alice,
      policy({ verdict: 'deny', challenge: 40, extra: FRESH_RULE }),
      'deny browsers <script>',
    );
    const page = await (await alice.get(`/console/policies/${id}`)).text();
    expect(page).toContain(`Changes against the active version ${active}`);
    expect(page).toContain('1 rule(s) added, 0 removed, 1 changed, 1 unchanged.');
    const added = page.slice(page.indexOf('Rules added'), page.indexOf('Rules changed'));
    expect(added).toContain('fresh');
    expect(added).toContain('request.accountId == &quot;mallory&quot;');
    const changed = page.slice(page.indexOf('Rules changed'), page.indexOf('Other parts of the policy'));
    expect(changed).toMatch(/browser<\/span> <span class="muted">verdict<\/span>/);
    expect(changed).toMatch(
      /<td class="before"><pre class="wrap">challenge<\/pre><\/td><td class="after"><pre class="wrap">deny<\/pre>/,
    );
    expect(changed).not.toContain('steady');
    const sections = page.slice(page.indexOf('Other parts of the policy'));
    expect(sections).toMatch(/thresholds<\/span> <span class="tag">score/);
    expect(sections).toContain('&quot;challenge&quot;: 40');
    expect(page).toContain('deny browsers &lt;script&gt;');
    expect(page).toContain('No evidence is attached to this version.');

    const vera = await signIn('vera');
    const seen = await (await vera.get(`/console/policies/${id}`)).text();
    expect(seen).toContain('The steps of a version take the admin role.');
    expect(seen).not.toContain(`action="/console/policies/${id}/propose"`);
    expect(await (await vera.get('/console/policies')).text()).toContain(
      'Uploading a draft takes the admin role.',
    );
    expect((await vera.post(`/console/policies/${id}/propose`)).status).toBe(403);

    for (const [who, name] of [
      [alice, 'propose'],
      [bob, 'approve'],
      [bob, 'activate'],
    ] as const)
      await step(who, id, name);
    // The earlier version, now retired, offers the revert.
    const retired = await (await bob.get(`/console/policies/${active}`)).text();
    expect(retired).toContain('Revert to this version');
    const missing = await bob.post(`/console/policies/${active}/revert`, { message: ' ' });
    expect(missing.status).toBe(400);
    const reverted = await bob.post(`/console/policies/${active}/revert`, { message: 'back to challenge' });
    expect(reverted.status).toBe(303);
    const revertPage = await (await bob.get(reverted.headers.get('location')!)).text();
    expect(revertPage).toContain('Reverted: this new version carries');
    expect(revertPage).toContain(`href="/console/policies/${active}"`);
    const now = (await apiVersions())[0]!;
    expect(now.state).toBe('active');
    expect(revertPage).toContain(now.id);
  });
});
