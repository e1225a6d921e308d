import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { type Harness, OPS_KEY, startHarness } from './decide-harness.ts';
import { adminUserStatus } from './support/admin-user-status.ts';
import { type ConsoleBrowser, openConsoleBrowser } from './support/console-browser.ts';
import { memoryRuleReport } from './support/console-memory.ts';
import { eventually } from './support/eventually.ts';
import { shippedPolicyWithLists } from './support/list-policy.ts';
import { PATIENT_DEADLINE_MS } from './support/patient-policy.ts';

/**
 * The console in a real browser: Debian's chromium driven by playwright-core (no browser
 * download), against a real riskgate and sandbox. An operator signs in, filters the decisions,
 * follows the live tail, opens mallory's deny, labels it, sees the label in the rules page,
 * retries its dead lock-out on the actions page and sees it done; the keyboard reaches the
 * content; then blocks a network on the Lists page and unlocks mallory on the Lock-outs page (the
 * sandbox's user enabled, the unlock in the audit trail); no console error and no CSP violation
 * on the way. A screenshot of each page goes to test-results/console/ (the docs' copies of every
 * page are test/console-every-page.test.ts's).
 */

const SHOTS = join(import.meta.dirname, '..', 'test-results', 'console');
const ADMIN = `ada:admin:${OPS_KEY}`;

let h: Harness;
let browser: ConsoleBrowser;
let page: Page;
let problems: string[] = [];
let malloryId: string;
let malloryUserId: string;
let lockOutId: string;

/** A screenshot of the page; `fit`: only as tall as its content (the README's small copies). */
async function shot(name: string, fit = false): Promise<void> {
  const box = fit ? await page.locator('main').boundingBox() : null;
  const height = box === null ? undefined : Math.min(860, Math.ceil(box.y + box.height + 24));
  await page.screenshot({
    path: join(SHOTS, `${name}.png`),
    ...(height !== undefined && { clip: { x: 0, y: 0, width: 1280, height } }),
  });
}

beforeAll(async () => {
  h = await startHarness({
    policy: { yaml: shippedPolicyWithLists() },
    deadlineMs: PATIENT_DEADLINE_MS,
    env: { RISKGATE_OPS_KEYS: ADMIN, RISKGATE_OUTBOX_HORIZON_SECONDS: '1' },
    riskgate: {
      breakers: { openMs: { initialMs: 200, maxMs: 500 } },
      console: {
        rules: memoryRuleReport(
          () => h.lines,
          () => h.riskgate.policies.current().ruleIds ?? [],
        ),
      },
    },
  });
  const userIds = await lookUpUserIds(h.sandbox, ['alice', 'bob', 'mallory']);
  // The Admin API refuses mallory's lock-out until its horizon (1 s) passes: dead, for a retry.
  await h.control('PUT', '/sandbox/faults', {
    rules: [{ route: `PUT /srv/admin/v1/users/${userIds.mallory}`, errorRate: 1, errorStatus: 503 }],
  });
  for (const name of ['alice', 'bob']) await h.decide(demoRequest(name, userIds[name]));
  const mallory = await h.decide(demoRequest('mallory', userIds.mallory));
  malloryId = mallory.body.decisionId as string;
  malloryUserId = userIds.mallory!;
  lockOutId = `${malloryId}:lock_out_user:${userIds.mallory}`;
  await eventually(
    async () => ((await h.riskgate.outbox.store.get(lockOutId))?.status === 'dead' ? true : undefined),
    { timeoutMs: 30_000, what: "mallory's lock-out dead-lettered" },
  );
  await h.control('DELETE', '/sandbox/faults');

  mkdirSync(SHOTS, { recursive: true });
  browser = await openConsoleBrowser({ warnings: true });
  ({ page, problems } = browser);
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await h?.stop();
});

describe('the console in a browser', () => {
  it('signs in, filters, follows, opens, labels, reports, retries: no console error, no CSP violation', async () => {
    // Signed out: the sign-in page, the key field focused.
    await page.goto(`${h.url}/console`);
    expect(new URL(page.url()).pathname).toBe('/console/sign-in');
    await shot('sign-in');
    await page.getByLabel('Operator key').fill('not-the-key-0123456789');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.textContent('main')).toContain('not an operator key');
    // A wrong key answers 401, which the browser reports as a failed load: the one error expected.
    const wrongKey = /status of 401 .*\/console\/sign-in\)$/;
    await expect.poll(() => problems.some((p) => wrongKey.test(p))).toBe(true);
    await page.getByLabel('Operator key').fill(OPS_KEY);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL('**/console/decisions');

    // The keyboard: the first Tab reaches the skip link, which leads into the content.
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement?.textContent')).toBe('Skip to content');
    await page.keyboard.press('Enter');
    expect(await page.evaluate('document.activeElement?.id')).toBe('main');

    // Every demo decision, once the store has them; then the live tail brings a new one.
    await eventually(async () => {
      await page.reload();
      return (await page.locator('#decisions tbody tr').count()) >= 3 ? true : undefined;
    });
    await page.getByRole('button', { name: 'Follow new decisions' }).click();
    const before = await page.locator('#decisions tbody tr').count();
    await h.decide(demoRequest('alice', undefined));
    await expect
      .poll(() => page.locator('#decisions tbody tr').count(), { timeout: 20_000 })
      .toBe(before + 1);
    await page.getByRole('button', { name: 'Stop following' }).click();
    await shot('decisions');

    // Filtered to denies: mallory's alone.
    await page.getByLabel('Verdict', { exact: true }).selectOption('deny');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/verdict=deny/);
    const rows = page.locator('#decisions tbody tr');
    expect(await rows.count()).toBe(1);
    expect(await rows.first().textContent()).toContain('mallory');

    // Mallory's deny, why, and its lock-out (dead for now).
    await rows.first().getByRole('link').click();
    await page.waitForURL(`**/console/decisions/${malloryId}`);
    const main = page.locator('main');
    await expect.poll(() => main.textContent()).toContain('rat-confirmed');
    expect(await main.textContent()).toContain('lock_out_user');

    // Labelled fraud, with a note.
    await page.getByLabel('fraud', { exact: true }).check();
    await page.getByLabel('Note (optional)').fill('remote-controlled session, confirmed');
    await page.getByRole('button', { name: 'Save label' }).click();
    await page.waitForURL(/labelled=fraud/);
    expect(await main.textContent()).toContain('Labelled fraud.');

    // The rules page counts it: rat-confirmed fired on a fraud.
    await page.getByRole('link', { name: 'Rules', exact: true }).click();
    await eventually(async () => {
      await page.reload();
      // Its row in the active revision's table (tp / fp / fn), and in the history across revisions.
      const rows = page.locator('tr', {
        has: page.getByRole('link', { name: 'rat-confirmed', exact: true }),
      });
      const texts = await rows.allTextContents();
      return texts.some((t) => t.includes('1 / 0 / 0')) ? true : undefined;
    });
    await shot('rules');

    // The dead lock-out retried from the actions page, then delivered.
    await page.getByRole('link', { name: 'Actions', exact: true }).click();
    await page.getByRole('link', { name: 'dead', exact: true }).click();
    await page.getByRole('button', { name: `Retry ${lockOutId}` }).click();
    await page.waitForURL(/done=retry/);
    expect(await main.textContent()).toContain('Retried');
    await eventually(
      async () => ((await h.riskgate.outbox.store.get(lockOutId))?.status === 'delivered' ? true : undefined),
      { timeoutMs: 20_000, what: 'the retried lock-out delivered' },
    );
    await page.goto(`${h.url}/console/actions`);
    await shot('actions');

    // The decision now shows the lock-out done.
    await page.goto(`${h.url}/console/decisions/${malloryId}`);
    await eventually(async () => {
      await page.reload();
      return (await page.locator('#h-actions + table').textContent())?.includes('done') ? true : undefined;
    });
    await shot('decision');
    await page.locator('#h-actions').scrollIntoViewIfNeeded();
    await shot('decision-actions');

    await page.getByRole('link', { name: 'Health', exact: true }).click();
    expect(await main.textContent()).toContain('Readiness: ready');
    await shot('health');
    await page.getByRole('link', { name: 'Audit', exact: true }).click();
    const trail = await main.textContent();
    for (const action of ['session.sign_in', 'decision.label', 'action.retry'])
      expect(trail).toContain(action);
    await shot('audit');

    expect(problems.filter((p) => !wrongKey.test(p))).toEqual([]);
  }, 150_000);

  it('blocks a network on the Lists page and unlocks mallory on the Lock-outs page, audited', async () => {
    const main = page.locator('main');
    const seen = problems.length;
    // A network blocked: a bad CIDR first, told on the page, then the right one.
    await page.getByRole('link', { name: 'Lists', exact: true }).click();
    await page.getByRole('link', { name: 'blockedNetworks', exact: true }).click();
    await page.getByLabel('Value (address or CIDR)').fill('198.51.100.0/33');
    await page.getByLabel('Reason', { exact: true }).fill('credential stuffing from this range');
    await page.getByRole('button', { name: 'Add entry' }).click();
    expect(await page.getByRole('alert').textContent()).toContain('must be an IPv4 or IPv6 address or CIDR');
    await page.getByLabel('Value (address or CIDR)').fill('198.51.100.0/24');
    await page.getByLabel('TTL (default 24h)').fill('2h');
    await page.getByRole('button', { name: 'Add entry' }).click();
    await page.waitForURL(/added=/);
    expect(await main.textContent()).toContain('Added 198.51.100.0/24.');
    expect(await page.locator('#entries tbody').textContent()).toContain(
      'credential stuffing from this range',
    );
    await shot('lists', true);

    // Mallory's lock-out (landed by the retry above), found by the filters, unlocked.
    await page.getByRole('link', { name: 'Lock-outs', exact: true }).click();
    await page.getByLabel('Status').selectOption('locked');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/status=locked/);
    await eventually(async () => {
      await page.reload();
      return (await page.locator('#lockouts tbody tr').count()) === 1 ? true : undefined;
    });
    expect(await page.locator('#lockouts tbody').textContent()).toContain('rat-confirmed');
    await shot('lockouts', true);
    expect(await adminUserStatus(h.sandbox, malloryUserId)).toBe('locked_out');
    await page.getByRole('link', { name: `Lock-out of ${malloryUserId}` }).click();
    await page.waitForURL(`**/console/lockouts/${malloryId}`);
    await shot('lockout', true);
    await page.getByLabel(/Why unlock/).fill('help desk verified her by phone');
    await page.getByRole('button', { name: `Unlock ${malloryUserId}` }).click();
    await page.waitForURL(/unlocked=1/);
    expect(await page.locator('h1 .tag').textContent()).toBe('unlocked');
    expect(await main.textContent()).toContain('by ada');
    await eventually(
      async () => ((await adminUserStatus(h.sandbox, malloryUserId)) === 'enabled' ? true : undefined),
      {
        timeoutMs: 20_000,
        what: 'mallory enabled in the sandbox',
      },
    );
    await page.reload();
    await shot('lockout-unlocked', true);
    // The record links back to its decision, whose lock-out links to the record.
    await page.getByRole('link', { name: malloryId }).click();
    await page.waitForURL(`**/console/decisions/${malloryId}`);
    expect(await page.getByRole('link', { name: 'lock-out record' }).getAttribute('href')).toBe(
      `/console/lockouts/${malloryId}`,
    );

    await page.getByRole('link', { name: 'Audit', exact: true }).click();
    const trail = await main.textContent();
    for (const action of ['list.add', 'lockout.unlock']) expect(trail).toContain(action);
    expect(trail).toContain('help desk verified her by phone');
    expect(problems.slice(seen).filter((p) => !/status of 400 .*\/console\/lists\//.test(p))).toEqual([]);
  }, 120_000);
});
