import { renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { type Harness, startHarness, writePolicy } from './decide-harness.ts';
import { eventually } from './support/eventually.ts';
import { PATIENT_DEADLINE_MS, patientTimeouts } from './support/patient-policy.ts';

/**
 * A policy edited on disk while riskgate serves: decisions keep flowing (none fails), and the edit
 * takes effect without a restart. A broken edit is refused and the last good policy keeps serving.
 * Its timeouts are patient ones: bob's verdicts rest on his new-browser signal, which a busy machine
 * must not leave unavailable.
 */

const policyWith = (rule: string) =>
  patientTimeouts(`
apiVersion: riskgate/v1
kind: Policy
name: reload
thresholds: { challenge: 40, deny: 80 }
signals:
  newBrowser: { timeoutMs: 250 }
rules:
${rule}
`);
const SCORE_RULE = `  - id: new-browser
    description: The browser is new for this account.
    when: signals.newBrowser.success && !signals.newBrowser.known
    score: 40`;
const DENY_RULE = `  - id: new-browser
    description: The browser is new for this account, and new browsers are refused today.
    when: signals.newBrowser.success && !signals.newBrowser.known
    verdict: deny`;

let h: Harness;
let path: string;
beforeAll(async () => {
  path = writePolicy(policyWith(SCORE_RULE));
  h = await startHarness({ policy: path, deadlineMs: PATIENT_DEADLINE_MS });
});
afterAll(() => h?.stop());

/** Replaces the file the way editors save: write a sibling, rename it over the original. */
function saveAtomically(text: string) {
  const tmp = join(dirname(path), '.policy.yaml.swp');
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

describe('policy hot reload while serving', () => {
  it('an edit takes effect with no failed request in between', async () => {
    const bob = demoRequest('bob', undefined); // a new browser: the rule matches
    const before = await h.decide(bob);
    expect(before.body).toMatchObject({ verdict: 'challenge' });
    const oldRevision = (before.body.policy as { revision: string }).revision;

    const statuses: number[] = [];
    const verdicts: string[] = [];
    let stop = false;
    const load = Array.from({ length: 4 }, async () => {
      while (!stop) {
        const answer = await h.decide(bob);
        statuses.push(answer.status);
        verdicts.push(String(answer.body.verdict));
      }
    });
    // The edit lands while decisions are being answered, and some are answered after it.
    await eventually(() => verdicts.length >= 4, { what: 'decisions under the old policy' });
    saveAtomically(policyWith(DENY_RULE));
    await eventually(() => verdicts.at(-1) === 'deny', { what: 'a decision under the edited policy' });
    const atEdit = verdicts.length;
    await eventually(() => verdicts.length >= atEdit + 4, { what: 'decisions after the edit' });
    stop = true;
    await Promise.all(load);

    expect(statuses.length).toBeGreaterThan(8);
    expect(statuses.every((s) => s === 200)).toBe(true);
    // Every decision saw one policy or the other, and the edit is live at the end.
    expect(new Set(verdicts)).toEqual(new Set(['challenge', 'deny']));
    expect(verdicts.at(-1)).toBe('deny');
    const after = await h.decide(bob);
    expect((after.body.policy as { revision: string }).revision).not.toBe(oldRevision);
    const status = (await (await h.ops('/policies')).json()) as Record<string, unknown>;
    expect(status.revision).toBe((after.body.policy as { revision: string }).revision);
  });

  it('a broken edit is refused: the last good policy serves and /policies shows the error', async () => {
    const before = await h.decide(demoRequest('bob', undefined));
    saveAtomically(policyWith(DENY_RULE.replace('!signals.newBrowser.known', '!signals.newBrowser.knwon')));
    const status = await eventually(
      async () => {
        const s = (await (await h.ops('/policies')).json()) as Record<string, unknown>;
        return s.lastError !== undefined && s;
      },
      { what: '/policies showing the reload error' },
    );
    expect(status.lastError).toMatchObject({ message: expect.stringContaining('knwon') });
    const after = await h.decide(demoRequest('bob', undefined));
    expect(after.status).toBe(200);
    expect(after.body.policy).toEqual(before.body.policy);
    expect(after.body.verdict).toBe('deny');
  });
});
