import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { SteppedClock } from '../src/timing/driven-clock.ts';
import { CALLER_KEY, type Harness, startHarness } from './decide-harness.ts';
import { type ConsoleBrowser, type ConsoleSession, openConsoleBrowser } from './support/console-browser.ts';
import { eventually } from './support/eventually.ts';
import { snoozePolicy } from './support/snooze-policy.ts';

/**
 * Issue 34's first "Done when", in Debian's chromium: the loop an analyst's day closes. A
 * challenged login's failed step-up, reported by the test as the login backend
 * (`POST /decisions/{id}/outcome`), labels it, and the Rules page's precision reflects it on its
 * first load (no cached report, no wait); two analysts, each in a browser context of their own,
 * press "Claim next case" at once and get different cases; a disposition from the queue is the
 * decision's label on its page and on the Rules page; a CSV export of a filter has exactly the
 * rows the Decisions page counts; a snooze made from a decision page stops its rule for that
 * account only, and its end (the service's clock stepped, no sleep) brings the rule back.
 */

const ANA_KEY = 'ana-analyst-key-0123456789';
const BO_KEY = 'bo-analyst-key-01234567890';
const OPERATORS = `ana:analyst:${ANA_KEY},bo:analyst:${BO_KEY}`;

/**
 * The snooze tests' rules (`backend-flagged` denies: the one snoozed; `new-region` challenges), its
 * `new-region` opening a review case, and `new-device` challenging without one.
 */
const LOOP_POLICY = snoozePolicy({
  reviewNewRegion: true,
  moreRules: `  - id: new-device
    description: A device the account never used.
    when: '"newDevice" in request.context && request.context.newDevice == true'
    score: 60
`,
});

const clock = new SteppedClock();

let h: Harness;
let browser: ConsoleBrowser;
let ana: ConsoleSession;
let bo: ConsoleSession;

const login = (account: string, context: Record<string, boolean>) => ({
  ...demoRequest(account, undefined),
  ip: '192.0.2.20',
  context,
});

const opsGet = (path: string) =>
  fetch(`${h.url}${path}`, { headers: { authorization: `Bearer ${ANA_KEY}` } });

/** `account`'s login decided, once the decision store has it (it writes behind the answer). */
async function storedDecision(
  account: string,
  context: Record<string, boolean>,
): Promise<{ id: string; verdict: string }> {
  const { body } = await h.decide(login(account, context));
  const id = body.decisionId as string;
  await eventually(async () => ((await opsGet(`/decisions/${id}`)).status === 200 ? true : undefined), {
    timeoutMs: 30_000,
    what: `${account}'s decision in the store`,
  });
  return { id, verdict: body.verdict as string };
}

/** The tp / fp / fn cell of `ruleId`'s row in the active revision's table, and its precision. */
async function ruleCounts(page: Page, ruleId: string): Promise<{ labelled: string; precision: string }> {
  const row = page
    .locator('#h-active')
    .locator('xpath=..')
    .locator('tr', { has: page.getByRole('link', { name: ruleId, exact: true }) })
    .first();
  const cells = await row.locator('td').allTextContents();
  return { labelled: cells.at(-1)!.trim(), precision: cells.at(-3)!.trim() };
}

beforeAll(async () => {
  h = await startHarness({
    policy: { yaml: LOOP_POLICY },
    env: { RISKGATE_OPS_KEYS: OPERATORS },
    riskgate: { clock },
  });
  browser = await openConsoleBrowser();
  ana = browser;
  bo = await browser.newSession();
  await ana.signIn(h.url, ANA_KEY);
  await bo.signIn(h.url, BO_KEY);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await h?.stop();
});

describe("an analyst's loop in the console", () => {
  it('labels a failed step-up, shows the precision at once, hands two analysts different cases, and labels a disposition', async () => {
    const { page } = ana;
    // The login backend challenged dave; he failed the step-up, and says so.
    const dave = await storedDecision('dave', { newDevice: true });
    expect(dave.verdict).toBe('challenge');
    const reported = await fetch(`${h.url}/decisions/${dave.id}/outcome`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'step_up', result: 'failed' }),
    });
    expect(reported.status).toBeLessThan(300);
    // The Rules page, loaded once: the rule fired on a fraud, precision 1.
    await page.goto(`${h.url}/console/rules`);
    expect(await ruleCounts(page, 'new-device')).toEqual({ labelled: '1 / 0 / 0', precision: '1.00' });
    await page.goto(`${h.url}/console/decisions/${dave.id}`);
    expect(await page.locator('#h-labels').locator('xpath=..').textContent()).toMatch(
      /fraud\s+from the login backend's outcomes/,
    );

    // Three challenges whose rule asks for review: three cases in the queue.
    const asked = [];
    for (const account of ['erin', 'frank', 'gina'])
      asked.push(await storedDecision(account, { newRegion: true }));
    await eventually(
      async () => {
        const list = (await (await opsGet('/review/cases?view=open')).json()) as { items: unknown[] };
        return list.items.length === 3 ? true : undefined;
      },
      { timeoutMs: 30_000, what: 'three open cases' },
    );
    // Two analysts press "Claim next case" at once, each in their own browser context.
    await Promise.all([ana.page.goto(`${h.url}/console/review`), bo.page.goto(`${h.url}/console/review`)]);
    await Promise.all(
      [ana.page, bo.page].map(async (p) => {
        await p.getByRole('button', { name: 'Claim next case' }).click();
        await p.waitForURL(/\/console\/review\/[0-9a-f-]{36}\?done=claimed$/);
      }),
    );
    const caseOf = (p: Page) => /\/console\/review\/([0-9a-f-]{36})/.exec(p.url())![1]!;
    expect(caseOf(ana.page)).not.toBe(caseOf(bo.page));
    for (const [p, name] of [
      [ana.page, 'ana'],
      [bo.page, 'bo'],
    ] as const) {
      expect(await p.locator('main').textContent()).toContain('Claimed: this case is yours.');
      expect(await p.locator('dt:text-is("assignee") + dd').textContent()).toBe(name);
    }

    // Ana closes hers as fraud, Bo his as legit: each the decision's label.
    const decisionOf = async (p: Page) =>
      /\/console\/decisions\/([0-9a-f-]{36})/.exec(
        (await p.locator('dt:text-is("decision") + dd a').getAttribute('href'))!,
      )![1]!;
    for (const [p, disposition] of [
      [ana.page, 'fraud'],
      [bo.page, 'legit'],
    ] as const) {
      const decisionId = await decisionOf(p);
      expect(asked.map((d) => d.id)).toContain(decisionId);
      await p.getByLabel(disposition, { exact: true }).check();
      await p.getByRole('button', { name: 'Close the case' }).click();
      await p.waitForURL(/done=closed/);
      expect(await p.locator('main').textContent()).toContain(`closed: ${disposition}`);
      await p.goto(`${h.url}/console/decisions/${decisionId}`);
      expect(await p.locator('#h-labels').locator('xpath=..').textContent()).toMatch(
        new RegExp(`${disposition}\\s+by ${p === ana.page ? 'ana' : 'bo'}`),
      );
    }
    // The Rules page counts both on its first load: new-region fired on ana's fraud and bo's legit
    // and missed dave's fraud; new-device missed ana's.
    await page.goto(`${h.url}/console/rules`);
    expect(await ruleCounts(page, 'new-region')).toEqual({ labelled: '1 / 1 / 1', precision: '0.50' });
    expect(await ruleCounts(page, 'new-device')).toEqual({ labelled: '1 / 0 / 1', precision: '1.00' });
  }, 180_000);

  it('exports a filter as CSV with exactly the rows the page counts', async () => {
    const { page } = ana;
    await page.goto(`${h.url}/console/decisions?range=24h&verdict=challenge`);
    const counted = Number(
      await page.locator('section.counts .count', { hasText: 'in all' }).locator('strong').textContent(),
    );
    const rows = await page.locator('#decisions tbody tr').count();
    // dave, erin, frank, gina.
    expect(counted).toBe(4);
    expect(rows).toBe(counted);
    const href = await page.getByRole('link', { name: 'CSV', exact: true }).getAttribute('href');
    const res = await page.context().request.get(`${h.url}${href}`);
    expect(res.status()).toBe(200);
    expect(res.headers()['content-type']).toMatch(/^text\/csv/);
    const lines = (await res.text()).split('\r\n').filter((l) => l !== '');
    expect(lines.length - 1).toBe(counted);
    for (const account of ['dave', 'erin', 'frank', 'gina'])
      expect(lines.filter((l) => l.includes(account))).toHaveLength(1);
  }, 60_000);

  it('snoozes a rule from a decision page for that account only, and its end brings the rule back', async () => {
    const { page } = ana;
    const deny = await storedDecision('hank', { flagged: true });
    expect(deny.verdict).toBe('deny');
    await page.goto(`${h.url}/console/decisions/${deny.id}`);
    const form = page.getByRole('form', { name: 'Snooze backend-flagged' });
    await form.getByLabel(/Snooze backend-flagged for/).selectOption('accountId');
    await form.getByLabel('For', { exact: true }).selectOption('24');
    await form.getByLabel('Reason').fill('travelling; confirmed by phone');
    await form.getByRole('button', { name: 'Snooze backend-flagged' }).click();
    await page.waitForURL('**/console/rules/backend-flagged**');
    expect(await page.textContent('main')).toContain('Snoozed for account hank until');

    // A write shows its own result at once: hank's next flagged login passes, ivan's does not.
    expect((await h.decide(login('hank', { flagged: true }))).body.verdict).toBe('allow');
    expect((await h.decide(login('ivan', { flagged: true }))).body.verdict).toBe('deny');
    // Past its end (a day later on the service's clock), the rule is back for hank.
    clock.step(25 * 3_600_000);
    await eventually(
      async () =>
        (await h.decide(login('hank', { flagged: true }))).body.verdict === 'deny' ? true : undefined,
      { what: 'the rule back for hank after the snooze ended' },
    );
  }, 60_000);
});
