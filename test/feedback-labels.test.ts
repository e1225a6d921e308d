import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { loadPolicy } from '../src/policy/policy-loader.ts';
import { readLabels } from '../src/replay/replay-labels.ts';
import { replayDecisions } from '../src/replay/replay-run.ts';
import { CALLER_KEY, type Harness, startHarness } from './decide-harness.ts';

/**
 * Analyst feedback end to end: decisions over real HTTP, `POST /feedback` labels them, the labels
 * land in the decision log beside the decisions, and replaying that log with `--labels` scores
 * each rule's precision and recall against them.
 */

describe('POST /feedback and replay --labels', () => {
  let h: Harness;
  let work: string;
  beforeAll(async () => {
    h = await startHarness();
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
    const report = await replayDecisions(await loadPolicy('policies/'), [log], {
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
