import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode, UpstreamError } from '../src/errors/riskgate-error.ts';
import { valueRow } from '../src/policy/inputs/input-row.ts';
import { INPUT_ROWS, inputsNeeded } from '../src/policy/inputs/input-table.ts';
import { compilePolicy } from '../src/policy/policy-compiler.ts';
import type { UpstreamResult } from '../src/upstream/upstream-result.ts';
import { type Harness, OPS_KEY, startHarness } from './decide-harness.ts';
import { type ConsoleClient, consoleSignIn } from './support/console-client.ts';
import { eventually } from './support/eventually.ts';

/**
 * Adding an input is adding a row (issue 31). `ipReputation`, an input riskgate does not have, is
 * defined here as one row of the input table and nothing else: handed to a real riskgate
 * (`StartRiskgateOptions.inputs`), it is read by the policy's CEL, fetched under the decision's
 * deadline, reported in the /decide answer and the decision log, shown on the console's decision
 * page, and makes the answer degraded when riskgate cannot gather it. No file of src/ names it.
 */

/** The reputation of each account's login IP (0-100); an account not here: the lookup fails. */
const reputations = new Map<string, number>([
  ['rep-bad', 90],
  ['rep-good', 10],
]);

function lookUp(accountId: string): Promise<UpstreamResult<{ score: number }>> {
  const score = reputations.get(accountId);
  if (score !== undefined) return Promise.resolve({ ok: true, value: { score }, durationMs: 0.1 });
  const error = new UpstreamError(ErrorCode.UPSTREAM_TIMEOUT, 'ip reputation: no answer in time', {
    upstream: 'features',
  });
  return Promise.resolve({ ok: false, error, durationMs: 0.1 });
}

/** The row: its fetch, its view in CEL (`ipReputation.score`), its report. */
const IP_REPUTATION = valueRow<{ score: number }, { score: number }>({
  name: 'ipReputation',
  description: "The reputation of the login's IP address, 0 (clean) to 100.",
  type: { name: 'IpReputation', fields: { score: 'double' } },
  newView: () => ({ available: false, reason: '', score: 0 }),
  fillView: (view, value) => {
    view.score = value?.score ?? 0;
  },
  fetch: (ctx) => lookUp(ctx.request.accountId),
  result: (value) => ({ score: value.score }),
});

const TABLE = [...INPUT_ROWS, IP_REPUTATION];

const POLICY = `
apiVersion: riskgate/v1
kind: Policy
name: reputation
thresholds: { challenge: 50, deny: 100 }
rules:
  - id: bad-ip
    description: The login comes from an address of bad reputation.
    when: ipReputation.score >= 80
    score: 60
`;

let h: Harness;

beforeAll(async () => {
  h = await startHarness({ policy: { yaml: POLICY }, riskgate: { inputs: TABLE } });
}, 60_000);
afterAll(() => h?.stop());

/** The console's page of a decision, once the decision store has it. */
async function decisionPage(s: ConsoleClient, decisionId: string): Promise<string> {
  return eventually(
    async () => {
      const res = await s.get(`/console/decisions/${decisionId}`);
      return res.status === 200 ? res.text() : undefined;
    },
    { timeoutMs: 10_000, what: `decision ${decisionId} in the decision store` },
  );
}

describe('an input added through one row', () => {
  it("is in the policy's CEL: the policy compiles against the table with the row, and not without it", () => {
    const policy = h.riskgate.policies.current();
    expect(inputsNeeded(policy)).toEqual(['ipReputation']);
    const without = compilePolicy('reputation.yaml', POLICY);
    expect(without.policy).toBeUndefined();
    expect(without.issues[0]?.message).toMatch(/unknown name "ipReputation"/);
  });

  it('is fetched, read by the rule and reported in the answer, the log line and Server-Timing', async () => {
    const bad = await h.decide({ accountId: 'rep-bad' });
    expect(bad.status).toBe(200);
    expect(bad.body).toMatchObject({
      verdict: 'challenge',
      score: 60,
      reasons: [{ id: 'bad-ip' }],
      signals: { ipReputation: { status: 'ok', result: { score: 90 } } },
      degraded: false,
    });
    expect(bad.headers.get('server-timing')).toMatch(/ipReputation;dur=/);
    const good = await h.decide({ accountId: 'rep-good' });
    expect(good.body).toMatchObject({
      verdict: 'allow',
      signals: { ipReputation: { status: 'ok', result: { score: 10 } } },
      degraded: false,
    });
    const line = await eventually(
      () => h.lines.find((l) => l.kind === 'decision' && l.decisionId === bad.body.decisionId),
      { what: 'the decision line' },
    );
    expect(line.inputs).toMatchObject({ extra: { ipReputation: { status: 'ok', value: { score: 90 } } } });
  });

  it('makes the answer degraded when riskgate cannot gather it: the rule is skipped, the verdict held at the floor', async () => {
    const { body } = await h.decide({ accountId: 'rep-unknown' });
    expect(body).toMatchObject({
      verdict: 'challenge',
      signals: { ipReputation: { status: 'unavailable', reason: 'timeout', treatment: 'ignore' } },
      degraded: true,
      explanation: {
        decidedBy: 'degraded',
        degraded: { inputs: [{ input: 'ipReputation', reason: 'timeout' }], floor: true },
        skipped: [{ id: 'bad-ip', reason: 'ipReputation unavailable (timeout)' }],
      },
    });
  });

  it("is on the console's decision page: its value, or why it is unavailable", async () => {
    const s = await consoleSignIn(h.url, OPS_KEY);
    const bad = await h.decide({ accountId: 'rep-bad' });
    const page = await decisionPage(s, bad.body.decisionId as string);
    expect(page).toMatch(/<td>ipReputation<\/td>/);
    expect(page).toMatch(/<dt>score<\/dt><dd class="mono"><bdi>90<\/bdi><\/dd>/);
    const lost = await h.decide({ accountId: 'rep-unknown' });
    const lostPage = await decisionPage(s, lost.body.decisionId as string);
    expect(lostPage).toContain('unavailable: timeout');
    expect(lostPage).toMatch(/<dt>degraded<\/dt><dd class="mono"><bdi>yes<\/bdi><\/dd>/);
  });
});
