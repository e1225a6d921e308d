import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { keyIdOf } from '../src/edge/caller-auth.ts';
import { loadPolicy } from '../src/policy/policy-loader.ts';
import { readLabels } from '../src/replay/replay-labels.ts';
import { replayDecisions } from '../src/replay/replay-run.ts';
import { CALLER_KEY, type Harness, OPS_KEY, startHarness, writePolicy } from './decide-harness.ts';
import { PATIENT_DEADLINE_MS, patientShippedPolicy } from './support/patient-policy.ts';

/**
 * Analyst feedback end to end: decisions over real HTTP, `POST /feedback` labels them, the labels
 * land in the decision log beside the decisions, and replaying that log with `--labels` scores
 * each rule's precision and recall against them. The shipped policy runs with patient timeouts:
 * the scores rest on mallory's deny and bob's challenge, which a busy machine must not degrade.
 */

describe('POST /feedback and replay --labels', () => {
  let h: Harness;
  let work: string;
  const policy = patientShippedPolicy();
  beforeAll(async () => {
    h = await startHarness({ policy: { yaml: policy }, deadlineMs: PATIENT_DEADLINE_MS });
    work = mkdtempSync(join(tmpdir(), 'riskgate-labels-'));
  });
  afterAll(async () => {
    await h?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  async function feedback(
    body: unknown,
    key = CALLER_KEY,
  ): Promise<{ status: number; body: Record<string, unknown> }> {
    const res = await fetch(`${h.url}/feedback`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  it('refuses a label it cannot keep: 400 naming the field, 401 without a caller key', async () => {
    const badLabel = await feedback({ decisionId: crypto.randomUUID(), label: 'maybe' });
    expect(badLabel.status).toBe(400);
    expect(JSON.stringify(badLabel.body)).toContain('label');
    const badId = await feedback({ decisionId: 'not-a-uuid', label: 'fraud' });
    expect(badId.status).toBe(400);
    expect(JSON.stringify(badId.body)).toContain('decisionId');
    // Issue 30: a note PostgreSQL cannot store once halted the decision store's writer for everyone.
    const nul = await feedback({ decisionId: crypto.randomUUID(), label: 'fraud', note: 'a\u0000b' });
    expect(nul.status).toBe(400);
    expect(nul.body).toMatchObject({ code: 'RG_ERR_INVALID_INPUT', field: 'note' });
    const unknownField = await feedback({ decisionId: crypto.randomUUID(), label: 'fraud', score: 1 });
    expect(unknownField.status).toBe(400);
    expect((await feedback({ decisionId: crypto.randomUUID(), label: 'fraud' }, 'wrong-key')).status).toBe(
      401,
    );
  });

  it('keeps each label in the decision log, and replay scores every rule against them', async () => {
    const ids = await lookUpUserIds(h.sandbox, ['alice', 'bob', 'mallory']);
    const decided: Record<string, string> = {};
    for (const user of ['alice', 'bob', 'mallory'] as const) {
      const r = await h.decide(demoRequest(user, ids[user]));
      expect(r.status).toBe(200);
      decided[user] = r.body.decisionId as string;
    }
    // mallory's remote-controlled session was fraud; bob's new browser was really bob.
    const labels = { alice: 'legit', bob: 'legit', mallory: 'fraud' } as const;
    for (const user of ['alice', 'bob', 'mallory'] as const) {
      const r = await feedback({ decisionId: decided[user], label: labels[user], note: `case ${user}` });
      expect(r.status).toBe(202);
      expect(r.body).toMatchObject({ decisionId: decided[user], label: labels[user] });
    }
    await expect.poll(() => h.lines.filter((l) => l.kind === 'feedback').length).toBe(3);
    expect(h.lines.find((l) => l.kind === 'feedback' && l.decisionId === decided.mallory)).toMatchObject({
      label: 'fraud',
      note: 'case mallory',
    });
    await expect.poll(() => h.lines.filter((l) => l.kind === 'decision').length).toBeGreaterThanOrEqual(3);

    // The decision log as a file: decisions and feedback lines together.
    const log = join(work, 'decisions.jsonl');
    writeFileSync(log, `${h.lines.map((l) => JSON.stringify(l)).join('\n')}\n`);
    const report = await replayDecisions(await loadPolicy(writePolicy(policy)), [log], {
      labels: await readLabels([log]),
    });
    expect(report.labels?.labelled).toEqual({ fraud: 1, legit: 2 });
    expect(report.labels?.rules['rat-confirmed']).toEqual({
      fraudFlagged: 1,
      legitFlagged: 0,
      precision: 1,
      recall: 1,
    });
    expect(report.labels?.rules['new-browser']).toMatchObject({
      fraudFlagged: 0,
      legitFlagged: 1,
      precision: 0,
    });
    expect(report.labels?.verdicts.deny).toMatchObject({ precision: 1, recall: 1 });
    // bob's challenge flagged a legit login: stepping up found the fraud at half precision.
    expect(report.labels?.verdicts.challengeOrDeny).toMatchObject({ precision: 0.5, recall: 1 });
    // A rule that matched nothing labelled has no precision to speak of.
    expect(report.labels?.rules['impossible-travel']?.precision).toBeNull();
  });
});

const OTHER_KEY = 'another-caller-key-0123456789';

/** POST /feedback with `key`; checks that no key ever comes back, whoever asks. */
async function sendFeedback(h: Harness, body: unknown, key: string) {
  const res = await fetch(`${h.url}/feedback`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  for (const k of [CALLER_KEY, OTHER_KEY, OPS_KEY]) expect(text).not.toContain(k);
  return { status: res.status, headers: res.headers, body: JSON.parse(text) as Record<string, unknown> };
}

/** A decision for `user`, asked with `key`; its id. */
async function decidedId(h: Harness, user: 'alice' | 'mallory', key = CALLER_KEY): Promise<string> {
  const ids = await lookUpUserIds(h.sandbox, [user]);
  const r = await h.decide(demoRequest(user, ids[user]), { headers: { authorization: `Bearer ${key}` } });
  expect(r.status).toBe(200);
  return r.body.decisionId as string;
}

describe('who may label what (issue 22, item 9)', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ apiKeys: [CALLER_KEY, OTHER_KEY] });
  });
  afterAll(() => h?.stop());

  it('takes a label only from the key that asked for the decision, or an operator: others get 404', async () => {
    const id = await decidedId(h, 'mallory');
    const other = await sendFeedback(h, { decisionId: id, label: 'legit' }, OTHER_KEY);
    expect(other.status).toBe(404);
    expect(other.headers.get('content-type')).toBe('application/problem+json');
    expect(other.body).toMatchObject({ code: 'RG_ERR_NOT_FOUND' });
    // A made-up id is 404 too: nothing is recorded against it.
    const unknown = await sendFeedback(h, { decisionId: crypto.randomUUID(), label: 'fraud' }, CALLER_KEY);
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ code: 'RG_ERR_NOT_FOUND' });
    expect(h.lines.filter((l) => l.kind === 'feedback')).toEqual([]);

    const own = await sendFeedback(h, { decisionId: id, label: 'fraud' }, CALLER_KEY);
    expect(own.status).toBe(202);
    expect(own.body).toMatchObject({ decisionId: id, label: 'fraud', labelledBy: keyIdOf(CALLER_KEY) });
  });

  it('lets a label change and keeps its history: who labelled, when, what it was before', async () => {
    const id = await decidedId(h, 'alice');
    const first = await sendFeedback(h, { decisionId: id, label: 'legit' }, CALLER_KEY);
    expect(first.status).toBe(202);
    const second = await sendFeedback(h, { decisionId: id, label: 'fraud', note: 'chargeback' }, OPS_KEY);
    expect(second.status).toBe(202);
    expect(second.body).toMatchObject({ label: 'fraud', labelledBy: keyIdOf(OPS_KEY) });
    expect(second.body.history).toEqual([
      { label: 'legit', labelledBy: keyIdOf(CALLER_KEY), at: first.body.recordedAt },
      { label: 'fraud', labelledBy: keyIdOf(OPS_KEY), at: second.body.recordedAt },
    ]);
    const lines = h.lines.filter((l) => l.kind === 'feedback' && l.decisionId === id);
    expect(lines).toEqual([
      expect.objectContaining({ label: 'legit', labelledBy: keyIdOf(CALLER_KEY), labelledAs: 'caller' }),
      expect.objectContaining({
        label: 'fraud',
        labelledBy: keyIdOf(OPS_KEY),
        labelledAs: 'operator',
        previousLabel: 'legit',
        note: 'chargeback',
      }),
    ]);
    expect(JSON.stringify(h.lines)).not.toContain(CALLER_KEY);
    expect(JSON.stringify(h.lines)).not.toContain(OPS_KEY);
  });

  it('lets an operator label a decision this process does not remember, marked as such', async () => {
    const id = crypto.randomUUID();
    const r = await sendFeedback(h, { decisionId: id, label: 'fraud' }, OPS_KEY);
    expect(r.status).toBe(202);
    expect(h.lines.find((l) => l.kind === 'feedback' && l.decisionId === id)).toMatchObject({
      decisionKnown: false,
      labelledAs: 'operator',
    });
  });
});

describe('feedback rate limit (issue 22, item 9)', () => {
  const BURST = 4;
  let h: Harness;
  beforeAll(async () => {
    // One label per 100 s after the burst: none comes back while the test runs.
    h = await startHarness({
      apiKeys: [CALLER_KEY, OTHER_KEY],
      env: { RISKGATE_FEEDBACK_RATE: '0.01', RISKGATE_FEEDBACK_BURST: String(BURST) },
    });
  });
  afterAll(() => h?.stop());

  it("refuses a key past its burst with 429 and Retry-After, recording nothing; another key's budget is its own", async () => {
    const id = await decidedId(h, 'alice');
    const statuses: number[] = [];
    let refused: Awaited<ReturnType<typeof sendFeedback>> | undefined;
    for (let i = 0; i < BURST + 2; i++) {
      const r = await sendFeedback(h, { decisionId: id, label: i % 2 === 0 ? 'fraud' : 'legit' }, CALLER_KEY);
      statuses.push(r.status);
      if (r.status === 429) refused ??= r;
    }
    expect(statuses).toEqual([...Array<number>(BURST).fill(202), 429, 429]);
    expect(refused!.headers.get('content-type')).toBe('application/problem+json');
    expect(refused!.body).toMatchObject({ code: 'RG_ERR_RATE_LIMITED', status: 429 });
    expect(Number(refused!.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(h.lines.filter((l) => l.kind === 'feedback' && l.decisionId === id)).toHaveLength(BURST);
    const theirs = await decidedId(h, 'alice', OTHER_KEY);
    expect((await sendFeedback(h, { decisionId: theirs, label: 'legit' }, OTHER_KEY)).status).toBe(202);
  });
});
