import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { SteppedClock } from '../src/timing/driven-clock.ts';
import { type Harness, OPS_KEY, startHarness } from './decide-harness.ts';
import { type ConsoleBrowser, openConsoleBrowser } from './support/console-browser.ts';
import { eventually } from './support/eventually.ts';
import { SNOOZE_POLICY } from './support/snooze-policy.ts';

/**
 * Issue 34's snooze from the console, in Debian's chromium at 390 px: an analyst opens alice's
 * deny, snoozes its rule for her account from the decision page; alice's next login is allowed,
 * bob's still denied; the rule's page lists the snooze, and neither page scrolls sideways. Past its
 * end (the service's clock stepped, no sleep) the rule is back; a second snooze ended early from
 * the rule's page brings it back at once.
 */

const WIDTH = 390;
const clock = new SteppedClock();

let h: Harness;
let browser: ConsoleBrowser;
let page: Page;

const flagged = (account: string) => ({
  ...demoRequest(account, undefined),
  ip: '192.0.2.10',
  context: { flagged: true },
});

/** A decision of `account`'s flagged login, once the store has it (it writes behind the answer). */
async function storedDecision(account: string): Promise<{ id: string; verdict: string }> {
  const { body } = await h.decide(flagged(account));
  const id = body.decisionId as string;
  await eventually(
    async () =>
      (await fetch(`${h.url}/decisions/${id}`, { headers: { authorization: `Bearer ${OPS_KEY}` } }))
        .status === 200
        ? true
        : undefined,
    { what: 'the decision in the store' },
  );
  return { id, verdict: body.verdict as string };
}

const overflow = () =>
  page.evaluate(
    'document.documentElement.scrollWidth - document.documentElement.clientWidth',
  ) as Promise<number>;

beforeAll(async () => {
  h = await startHarness({
    policy: { yaml: SNOOZE_POLICY },
    env: { RISKGATE_OPS_KEYS: `anna:analyst:${OPS_KEY}` },
    riskgate: { clock },
  });
  browser = await openConsoleBrowser({ viewport: { width: WIDTH, height: 844 } });
  ({ page } = browser);
  await browser.signIn(h.url, OPS_KEY);
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await h?.stop();
});

describe('snoozing a rule from the console', () => {
  it('stops the rule for that account only, shows it on the rule page, and its end brings it back', async () => {
    const deny = await storedDecision('alice');
    expect(deny.verdict).toBe('deny');
    await page.goto(`${h.url}/console/decisions/${deny.id}`);
    expect(await overflow()).toBeLessThanOrEqual(0);
    const form = page.getByRole('form', { name: 'Snooze backend-flagged' });
    await form.getByLabel(/Snooze backend-flagged for/).selectOption('accountId');
    await form.getByLabel('For', { exact: true }).selectOption('24');
    await form.getByLabel('Reason').fill('travelling; confirmed by phone');
    await form.getByRole('button', { name: 'Snooze backend-flagged' }).click();
    await page.waitForURL('**/console/rules/backend-flagged**');
    expect(await page.textContent('main')).toContain('Snoozed for account alice until');
    expect(await page.textContent('#snoozes')).toContain('travelling; confirmed by phone');
    expect(await overflow()).toBeLessThanOrEqual(0);

    expect((await h.decide(flagged('alice'))).body.verdict).toBe('allow');
    expect((await h.decide(flagged('bob'))).body.verdict).toBe('deny');
    // The allowed login's page says the rule was snoozed, and by which snooze.
    const allowed = await storedDecision('alice');
    expect(allowed.verdict).toBe('allow');
    await page.goto(`${h.url}/console/decisions/${allowed.id}`);
    expect(await page.textContent('main')).toMatch(/snoozed for accountId alice until/);

    // Past its end (a day later on the service's clock), the rule is back for alice.
    clock.step(25 * 3_600_000);
    await eventually(
      async () => ((await h.decide(flagged('alice'))).body.verdict === 'deny' ? true : undefined),
      {
        what: 'the rule back for alice after the snooze ended',
      },
    );
  });

  it('ends a snooze early from the rule page', async () => {
    const deny = await storedDecision('carol');
    await page.goto(`${h.url}/console/decisions/${deny.id}`);
    const form = page.getByRole('form', { name: 'Snooze backend-flagged' });
    await form.getByLabel('Reason').fill('known traveller');
    await form.getByRole('button', { name: 'Snooze backend-flagged' }).click();
    await page.waitForURL('**/console/rules/backend-flagged**');
    expect((await h.decide(flagged('carol'))).body.verdict).toBe('allow');
    await page.getByLabel(/Reason to end snooze/).fill('back home');
    await page.getByRole('button', { name: /End snooze .* early/ }).click();
    await page.waitForURL('**/console/rules/backend-flagged?ended=**');
    expect(await page.textContent('main')).toContain('No active snooze');
    expect((await h.decide(flagged('carol'))).body.verdict).toBe('deny');
  });
});
