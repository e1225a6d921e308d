import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RuleReport } from '../src/decision-store/rule-report.ts';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { CALLER_KEY, type Harness, OPS_KEY, startHarness } from './decide-harness.ts';
import { consoleSignIn } from './support/console-client.ts';
import { eventually } from './support/eventually.ts';
import { PATIENT_DEADLINE_MS, patientShippedPolicy } from './support/patient-policy.ts';

/**
 * Issue 33, "The Rules page shows a rule's precision from labels given under the previous version
 * after an activation": a real riskgate watching a copy of the shipped policy decides mallory's
 * login (denied), an analyst labels it fraud through POST /feedback, then the watched file changes
 * (a rule's description: a new revision keeping every rule id). After the switch `GET /rules/report`
 * and the console's Rules page give the rule that fired its precision from that label, with the
 * previous revision as a marker, while the new revision alone has no labelled fire.
 */

let h: Harness;
let work: string;
let policyFile: string;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'riskgate-rule-history-'));
  mkdirSync(join(work, 'policies'));
  policyFile = join(work, 'policies', 'login.yaml');
  // Patient timeouts and deadline: what is counted, not the timing, is tested (a degraded verdict
  // names no rule).
  writeFileSync(policyFile, patientShippedPolicy());
  h = await startHarness({ policy: join(work, 'policies'), deadlineMs: PATIENT_DEADLINE_MS });
});
afterAll(async () => {
  await h?.stop();
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

const revisionNow = async () => ((await (await h.ops('/policies')).json()) as { revision: string }).revision;

async function ruleReport(query = ''): Promise<RuleReport> {
  const res = await h.ops(`/rules/report${query}`);
  expect(res.status, await res.clone().text()).toBe(200);
  return (await res.json()) as RuleReport;
}

describe('rule quality across policy revisions', () => {
  it('keeps a rule’s precision from labels given under the previous revision after a switch', async () => {
    const before = await revisionNow();
    const ids = await lookUpUserIds(h.sandbox, ['mallory']);
    const decided = await h.decide(demoRequest('mallory', ids.mallory));
    expect(decided.status).toBe(200);
    expect(decided.body.degraded).toBe(false);
    const decisionId = decided.body.decisionId as string;
    const fired = (decided.body.reasons as { id: string }[]).map((r) => r.id);
    const ruleId = fired[0]!;

    const label = await fetch(`${h.url}/feedback`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ decisionId, label: 'fraud' }),
    });
    expect(label.status).toBe(202);
    // The decision and its label in the store.
    await eventually(
      async () => {
        const res = await h.ops(`/decisions/${decisionId}`);
        if (res.status !== 200) return undefined;
        const d = (await res.json()) as { label?: string; labels?: unknown[] };
        return JSON.stringify(d).includes('"fraud"') ? true : undefined;
      },
      { timeoutMs: 15_000, what: 'the labelled decision in the store' },
    );

    // A new revision keeping every rule id: another description of a rule that did not fire.
    const yaml = readFileSync(policyFile, 'utf8');
    const edited = yaml.replace(
      'The login comes from a network an operator blocked (the blockedNetworks list).',
      'The login comes from a network an operator blocked (the blockedNetworks list), edited.',
    );
    expect(edited).not.toBe(yaml);
    writeFileSync(policyFile, edited);
    const after = await eventually(
      async () => {
        const r = await revisionNow();
        return r !== before ? r : undefined;
      },
      { timeoutMs: 15_000, what: 'the edited policy served' },
    );

    const report = await ruleReport();
    expect(report.active.revision).toBe(after);
    // The new revision alone knows no labelled fire of the rule: what the page showed before.
    expect(report.active.rules.find((r) => r.ruleId === ruleId)?.precision).toBeUndefined();
    const rule = report.history.rules.find((r) => r.ruleId === ruleId);
    expect(rule).toMatchObject({
      status: 'current',
      precision: 1,
      recall: 1,
      labelled: { truePositives: 1, falsePositives: 0, falseNegatives: 0 },
      fires: { d7: 1 },
    });
    // The current revision counts too (its rules, no decision yet): no marker until it decides.
    expect(rule?.byRevision).toEqual([
      { revision: before, fires: 1, truePositives: 1, falsePositives: 0, falseNegatives: 0, precision: 1 },
      { revision: after, fires: 0, truePositives: 0, falsePositives: 0, falseNegatives: 0 },
    ]);
    expect(report.history.revisions.map((m) => [m.revision, m.current])).toEqual([[before, false]]);
    // The active revision's rule ids first, in file order.
    expect(report.history.rules.slice(0, report.active.rules.length).map((r) => r.ruleId)).toEqual(
      report.active.rules.map((r) => r.ruleId),
    );

    // The earlier revision alone, on request; a revision that is no revision is a 400 naming it.
    const earlier = await ruleReport(`?revision=${before}`);
    expect(earlier.history.scope).toBe('revision');
    expect(earlier.history.rules.map((r) => r.ruleId).sort()).toEqual([...new Set(fired)].sort());
    const bad = await h.ops('/rules/report?revision=%20');
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { field?: string }).field).toBe('revision');

    // The console's Rules page: the rule's row across revisions with its precision, and the age.
    const page = await (await consoleSignIn(h.url, OPS_KEY)).get('/console/rules');
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toMatch(/Computed \d+ s ago/);
    const history = html.slice(
      html.indexOf('id="h-history"'),
      html.indexOf('</section>', html.indexOf('id="h-history"')),
    );
    const row = history
      .split('<tr>')
      .find((r) => r.includes(`rule=${encodeURIComponent(ruleId)}"`) || r.includes(`>${ruleId}</a>`));
    expect(row).toBeDefined();
    // Precision and recall 1.00 from the label given under the previous revision.
    expect(row!.match(/<td class="num">1\.00<\/td>/g)).toHaveLength(2);
    expect(history).toContain(before.slice(0, 12));
  });
});
