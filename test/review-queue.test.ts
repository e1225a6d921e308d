import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { CALLER_KEY, type Harness, OPS_KEY, startHarness } from './decide-harness.ts';
import { consoleSignIn } from './support/console-client.ts';
import { PATIENT_DEADLINE_MS, patientShippedPolicy } from './support/patient-policy.ts';
import { describeOnPostgres, oneRiskgateOn } from './support/postgres-server.ts';

/**
 * The review queue end to end (issue 34) over real HTTP, on SQLite and PostgreSQL: a policy's
 * `review: true` opens a case after the answer, the sample opens one for an allowed login; two
 * analysts claiming at once get different cases; a disposition becomes the decision's label, which
 * the rule report counts at once; the console's Review page, claim-next, disposition and the
 * decision page's Send to review; release and hand-over of a claim, and a lock-out and unlock of
 * the case's user (role-checked, audited, shown at once on the case page).
 */

/** Named operators beside the harness's plain (admin) key. */
const ANA_KEY = 'ana-analyst-key-0123456789';
const BO_KEY = 'bo-analyst-key-01234567890';
const VIC_KEY = 'vic-viewer-key-01234567890';
const OPERATORS = `${OPS_KEY},ana:analyst:${ANA_KEY},bo:analyst:${BO_KEY},vic:viewer:${VIC_KEY}`;

/**
 * The shipped policy with patient timeouts (alice's allow, bob's challenge, however busy the
 * machine), with `new-browser` asking for review.
 */
const REVIEW_POLICY = patientShippedPolicy().replace(
  '  - id: new-browser\n',
  '  - id: new-browser\n    review: true\n',
);

interface CaseView {
  id: string;
  decisionId: string;
  reason: string;
  status: string;
  assignee: string | null;
  disposition: string | null;
}

function reviewOn(name: string, env: () => Record<string, string>) {
  let h: Harness;
  let ids: Record<string, string | undefined>;
  beforeAll(async () => {
    h = await startHarness({
      apiKeys: [CALLER_KEY],
      policy: { yaml: REVIEW_POLICY },
      deadlineMs: PATIENT_DEADLINE_MS,
      env: { ...env(), RISKGATE_REVIEW_SAMPLE_SHARE: '1', RISKGATE_OPS_KEYS: OPERATORS },
    });
    ids = await lookUpUserIds(h.sandbox, ['alice', 'bob', 'mallory']);
  }, 60_000);
  afterAll(() => h?.stop());

  const post = async (path: string, body?: unknown, key = OPS_KEY) => {
    const res = await fetch(`${h.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const cases = async (view = 'open') =>
    ((await (await h.ops(`/review/cases?view=${view}`)).json()) as { items: CaseView[] }).items;
  const caseOf = async (decisionId: string) =>
    expect
      .poll(async () => (await cases('open')).find((c) => c.decisionId === decisionId), { timeout: 10_000 })
      .toBeDefined()
      .then(async () => (await cases('open')).find((c) => c.decisionId === decisionId)!);
  const newBrowser = async () => {
    const report = (await (await h.ops('/rules/report')).json()) as {
      active: { rules: { ruleId: string; labelled: Record<string, number> }[] };
    };
    return report.active.rules.find((r) => r.ruleId === 'new-browser')!;
  };

  it(`opens a case for a rule with review: true and for a sampled allowed login, after the answer (${name})`, async () => {
    const bob = await h.decide(demoRequest('bob', ids.bob));
    expect(bob.body.verdict).toBe('challenge');
    const alice = await h.decide(demoRequest('alice', ids.alice));
    expect(alice.body.verdict).toBe('allow');
    const policyCase = await caseOf(bob.body.decisionId as string);
    expect(policyCase).toMatchObject({ reason: 'policy', status: 'open' });
    expect(await caseOf(alice.body.decisionId as string)).toMatchObject({ reason: 'sample' });
    const metrics = await (await h.ops('/metrics')).text();
    expect(metrics).toMatch(/riskgate_review_intake_opened_total\S* [1-9]/);
    expect(metrics).toMatch(/riskgate_review_intake_dropped_total\S* 0/);
    expect(metrics).toContain('riskgate_review_queue_oldest_open_age_seconds');
  });

  it(`gives two analysts claiming at once different cases, and a disposition becomes the label the rule report counts (${name})`, async () => {
    const bob = await h.decide(demoRequest('bob', ids.bob));
    await caseOf(bob.body.decisionId as string);
    const open = await cases('open');
    expect(open.length).toBeGreaterThanOrEqual(2);
    const [a, b] = await Promise.all([post('/review/claim-next'), post('/review/claim-next')]);
    const claimedA = a.body.claimed as CaseView;
    const claimedB = b.body.claimed as CaseView;
    expect(claimedA.id).not.toBe(claimedB.id);
    // Drain the queue; a claim then finds nothing.
    for (;;) if ((await post('/review/claim-next')).body.claimed === null) break;
    const mine = await cases('mine');
    const bobCase = mine.find((c) => c.decisionId === bob.body.decisionId)!;
    expect(bobCase).toMatchObject({ status: 'claimed' });

    const before = (await newBrowser()).labelled.truePositives ?? 0;
    const closed = await post(`/review/cases/${bobCase.id}/disposition`, {
      disposition: 'fraud',
      note: 'not him',
    });
    expect(closed.status).toBe(200);
    expect(closed.body).toMatchObject({ status: 'closed', disposition: 'fraud' });
    // No wait: the answer came once the label was in the store and the report stale.
    expect((await newBrowser()).labelled.truePositives).toBe(before + 1);
    const stored = (await (await h.ops(`/decisions/${bob.body.decisionId}`)).json()) as { label?: string };
    expect(stored.label).toBe('fraud');
    expect(h.lines.find((l) => l.kind === 'feedback' && l.decisionId === bob.body.decisionId)).toMatchObject({
      label: 'fraud',
      labelledAs: 'operator',
    });
    const again = await post(`/review/cases/${bobCase.id}/disposition`, { disposition: 'legit' });
    expect(again).toMatchObject({ status: 409, body: { code: 'RG_ERR_CONFLICT' } });
    const bad = await post(`/review/cases/${bobCase.id}/disposition`, { disposition: 'perhaps' });
    expect(bad).toMatchObject({ status: 400, body: { field: 'disposition' } });
    const detail = (await (await h.ops(`/review/cases/${bobCase.id}`)).json()) as {
      notes: { text: string }[];
    };
    expect(detail.notes.map((n) => n.text)).toEqual(['not him']);
    const audit = (await (await h.ops(`/audit?action=review.disposition&target=${bobCase.id}`)).json()) as {
      entries: unknown[];
    };
    expect(audit.entries).toHaveLength(1);
  });

  it(`releases a claim and hands a case over (its assignee, or an admin), audited, one conditional write each (${name})`, async () => {
    const bob = await h.decide(demoRequest('bob', ids.bob));
    const decisionId = bob.body.decisionId as string;
    await expect
      .poll(async () => (await h.ops(`/decisions/${decisionId}`)).status, { timeout: 10_000 })
      .toBe(200);
    const opened = await post('/review/cases', { decisionId }, ANA_KEY);
    expect([200, 201]).toContain(opened.status);
    const id = opened.body.id as string;
    // An open case handed to ana: claimed for her.
    expect(await post(`/review/cases/${id}/assign`, { assignee: 'ana' }, ANA_KEY)).toMatchObject({
      status: 200,
      body: { status: 'claimed', assignee: 'ana' },
    });
    // bo holds nothing of it: neither a release nor a hand-over of ana's case.
    expect(await post(`/review/cases/${id}/release`, undefined, BO_KEY)).toMatchObject({
      status: 403,
      body: { code: 'RG_ERR_FORBIDDEN' },
    });
    expect(await post(`/review/cases/${id}/assign`, { assignee: 'bo' }, BO_KEY)).toMatchObject({
      status: 403,
    });
    // A viewer changes nothing; a name that is not an operator's is named.
    expect((await post(`/review/cases/${id}/release`, undefined, VIC_KEY)).status).toBe(403);
    expect(await post(`/review/cases/${id}/assign`, { assignee: 'a b' }, ANA_KEY)).toMatchObject({
      status: 400,
      body: { field: 'assignee' },
    });
    // ana hands it to bo; bo releases it: open again, nobody's; a second release finds no claim.
    expect(await post(`/review/cases/${id}/assign`, { assignee: 'bo' }, ANA_KEY)).toMatchObject({
      status: 200,
      body: { assignee: 'bo' },
    });
    const boMine = (await (
      await fetch(`${h.url}/review/cases?view=mine`, { headers: { authorization: `Bearer ${BO_KEY}` } })
    ).json()) as { items: CaseView[] };
    expect(boMine.items.map((c) => c.id)).toContain(id);
    expect(await post(`/review/cases/${id}/release`, undefined, BO_KEY)).toMatchObject({
      status: 200,
      body: { status: 'open', assignee: null, claimedAt: null },
    });
    expect(await post(`/review/cases/${id}/release`, undefined, BO_KEY)).toMatchObject({
      status: 409,
      body: { code: 'RG_ERR_CONFLICT' },
    });
    // An admin acts on anyone's claim.
    await post(`/review/cases/${id}/assign`, { assignee: 'ana' }, ANA_KEY);
    expect(await post(`/review/cases/${id}/release`)).toMatchObject({
      status: 200,
      body: { status: 'open' },
    });
    const audit = async (action: string) =>
      (
        (await (await h.ops(`/audit?action=${action}&target=${id}`)).json()) as {
          entries: { actor: string; detail?: Record<string, unknown> }[];
        }
      ).entries;
    const releasedBy = (await audit('review.release')).map((e) => e.actor);
    expect(releasedBy).toHaveLength(2);
    expect(releasedBy).toEqual(expect.arrayContaining(['bo', expect.stringMatching(/^key-/)]));
    expect((await audit('review.assign')).map((e) => e.detail)).toEqual(
      expect.arrayContaining([
        { from: null, to: 'ana' },
        { from: 'ana', to: 'bo' },
      ]),
    );
    // The same from the console's case page: handed over, then released, by its forms.
    const s = await consoleSignIn(h.url, OPS_KEY);
    const form = (action: string, fields: Record<string, string> = {}) =>
      s.post(`/console/review/${id}/${action}`, fields);
    const casePage = async () => (await s.get(`/console/review/${id}`)).text();
    expect(await casePage()).toContain('Hand over');
    expect((await form('assign', { assignee: 'not a name' })).status).toBe(400);
    const handedOver = await form('assign', { assignee: 'bo' });
    expect(handedOver.headers.get('location')).toBe(`/console/review/${id}?done=assigned`);
    expect(await casePage()).toMatch(/<dt>assignee<\/dt><dd><bdi>bo<\/bdi>/);
    expect(await casePage()).toContain('Release to the queue');
    const releasedThere = await form('release');
    expect(releasedThere.headers.get('location')).toBe(`/console/review/${id}?done=released`);
    const after = await casePage();
    expect(after).toContain('nobody yet');
    expect(after).not.toContain('Release to the queue');
    expect((await audit('review.release')).length).toBe(3);
    // The Audit page links each entry to its case.
    const trail = await (await s.get(`/console/audit?action=review.assign`)).text();
    expect(trail).toContain(`href="/console/review/${id}"`);
    // Closed, a case is neither released nor handed over.
    await post(`/review/cases/${id}/disposition`, { disposition: 'unsure' }, ANA_KEY);
    expect((await post(`/review/cases/${id}/assign`, { assignee: 'bo' }, ANA_KEY)).status).toBe(409);
    expect((await post(`/review/cases/${id}/release`)).status).toBe(409);
  });

  it(`locks the case's user out and unlocks them from the case (an admin), through the outbox, audited, shown at once on its page (${name})`, async () => {
    const bob = await h.decide(demoRequest('bob', ids.bob));
    const decisionId = bob.body.decisionId as string;
    await expect
      .poll(async () => (await h.ops(`/decisions/${decisionId}`)).status, { timeout: 10_000 })
      .toBe(200);
    const id = (await post('/review/cases', { decisionId })).body.id as string;
    expect((await h.ops(`/lockouts/${decisionId}`)).status).toBe(404);
    // An analyst may not; a blank reason is named.
    expect((await post(`/review/cases/${id}/lockout`, { reason: 'stolen' }, ANA_KEY)).status).toBe(403);
    expect(await post(`/review/cases/${id}/lockout`, { reason: ' ' })).toMatchObject({
      status: 400,
      body: { field: 'reason' },
    });
    const locked = await post(`/review/cases/${id}/lockout`, { reason: 'confirmed with the bank' });
    expect(locked).toMatchObject({
      status: 202,
      body: { id: decisionId, userId: ids.bob, rule: 'operator', status: 'queued' },
    });
    // One lock-out per decision: a second is refused, nothing done.
    expect(await post(`/review/cases/${id}/lockout`, { reason: 'again' })).toMatchObject({
      status: 409,
      body: { code: 'RG_ERR_CONFLICT' },
    });
    // The console's case page shows it at once (read after the change), with its unlock.
    const s = await consoleSignIn(h.url, OPS_KEY);
    const page = await (await s.get(`/console/review/${id}`)).text();
    expect(page).toMatch(/data-lockout-status="(queued|locked)"/);
    expect(page).toContain('Unlock the user');
    expect(page).not.toContain('Lock the user out');
    // The outbox makes the Admin API call: the record reads locked.
    await expect
      .poll(
        async () => ((await (await h.ops(`/lockouts/${decisionId}`)).json()) as { status: string }).status,
        {
          timeout: 15_000,
        },
      )
      .toBe('locked');
    const lockAudit = (await (await h.ops(`/audit?action=lockout.lock&target=${decisionId}`)).json()) as {
      entries: { detail: Record<string, unknown>; outcome: { status: string } }[];
    };
    // Newest first: the refused second one, then the one made.
    expect(lockAudit.entries.map((e) => [e.detail.reason, e.outcome.status])).toEqual([
      ['again', 'refused'],
      ['confirmed with the bank', 'queued'],
    ]);
    expect(lockAudit.entries[1]?.detail.userId).toBe(ids.bob);
    const unlocked = await post(`/review/cases/${id}/unlock`, { reason: 'the bank was wrong' });
    expect(unlocked).toMatchObject({ status: 202, body: { status: 'unlocked' } });
    const after = await (await s.get(`/console/review/${id}`)).text();
    expect(after).toContain('data-lockout-status="unlocked"');
    expect(after).not.toContain('Unlock the user');
    // Closed, it leaves the queue as the next test finds it.
    expect((await post(`/review/cases/${id}/disposition`, { disposition: 'unsure' })).status).toBe(200);
  });

  it(`serves the Review page: a decision sent to review, claimed next, closed from its form (${name})`, async () => {
    const s = await consoleSignIn(h.url, OPS_KEY);
    const mallory = await h.decide(demoRequest('mallory', ids.mallory));
    const decisionId = mallory.body.decisionId as string;
    await expect
      .poll(async () => (await h.ops(`/decisions/${decisionId}`)).status, { timeout: 10_000 })
      .toBe(200);
    const form = (action: string, fields: Record<string, string> = {}) => s.post(action, fields);
    const decisionPage = await (await s.get(`/console/decisions/${decisionId}`)).text();
    expect(decisionPage).toContain('Send to review');
    const sent = await form(`/console/decisions/${decisionId}/review`);
    expect(sent.status).toBe(303);
    const caseUrl = sent.headers.get('location')!;
    expect(caseUrl).toMatch(/^\/console\/review\/[0-9a-f-]{36}\?done=opened$/);
    // Without the CSRF token nothing happens.
    const forged = await fetch(`${h.url}/console/review/claim-next`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: s.cookie },
      body: '',
    });
    expect(forged.status).toBe(403);
    const queue = await (await s.get(`/console/review`)).text();
    expect(queue).toContain(decisionId.slice(0, 8));
    expect(queue).toContain('Claim next case');
    const claimed = await form('/console/review/claim-next');
    expect(claimed.headers.get('location')).toBe(`${caseUrl.split('?')[0]}?done=claimed`);
    const page = await (await s.get(`${claimed.headers.get('location')}`)).text();
    expect(page).toContain('Close the case');
    expect(page).toContain(`/console/decisions/${decisionId}`);
    expect(page).toContain('Unlock the user');
    const badForm = await form(`${caseUrl.split('?')[0]}/disposition`, { disposition: 'perhaps' });
    expect(badForm.status).toBe(400);
    const closed = await form(`${caseUrl.split('?')[0]}/disposition`, { disposition: 'unsure' });
    expect(closed.status).toBe(303);
    const after = await (await s.get(`${closed.headers.get('location')}`)).text();
    expect(after).toContain('closed: unsure');
    expect(after).not.toContain('Close the case');
    // Unsure labels nothing.
    expect(h.lines.some((l) => l.kind === 'feedback' && l.decisionId === decisionId)).toBe(false);
    const empty = await form('/console/review/claim-next');
    expect(empty.headers.get('location')).toBe('/console/review?empty=1');
  });
}

describe('the review queue on the embedded SQLite', () => {
  reviewOn('SQLite', () => ({}));
});

describeOnPostgres('the review queue on PostgreSQL', (pg) => {
  reviewOn('PostgreSQL', () => oneRiskgateOn(pg.url));
});
