import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ConsoleBrowser, openConsoleBrowser } from './support/console-browser.ts';
import {
  OPERATOR_KEYS,
  type Operator,
  type OperatorsHarness,
  startOperatorsHarness,
} from './support/operators-harness.ts';

/**
 * Issue 33's Policies page in Debian's chromium at 390 px: an admin uploads a draft that adds a
 * rule by typing it into the page's text area (a browser's CRLF lines included), sees it saved,
 * its diff against the active version name the added rule and the changed verdict, proposes it,
 * and is refused approving it herself with the reason on the page; neither page scrolls sideways,
 * a long YAML line included. A second admin's approval makes it active.
 */

const WIDTH = 390;

const policy = (verdict: string, extra = '') => `apiVersion: riskgate/v1
kind: Policy
name: login
thresholds: { challenge: 50, deny: 100 }
rules:
  - id: browser
    description: every browser login, described at a length no phone shows on one line ${'and more '.repeat(20)}
    when: request.platform == "browser"
    verdict: ${verdict}
${extra}`;

const ADDED = `  - id: mallory-denied
    description: the draft's new rule
    when: request.accountId == "mallory"
    verdict: deny
`;

let h: OperatorsHarness;
let browser: ConsoleBrowser;
let page: Page;

const overflow = () =>
  page.evaluate(
    'document.documentElement.scrollWidth - document.documentElement.clientWidth',
  ) as Promise<number>;

const api = async (who: Operator, method: string, path: string, body?: unknown) =>
  (await h.as(who, method, path, body)).body;

beforeAll(async () => {
  h = await startOperatorsHarness({ policy: { yaml: policy('challenge') } });
  // An active version to compare with, made through the API by both admins.
  const first = await api('alice', 'POST', '/policy-versions', { yaml: policy('challenge'), message: 'v1' });
  await api('alice', 'POST', `/policy-versions/${first.id}/propose`);
  await api('bob', 'POST', `/policy-versions/${first.id}/approve`);
  await api('bob', 'POST', `/policy-versions/${first.id}/activate`);
  browser = await openConsoleBrowser({ viewport: { width: WIDTH, height: 844 } });
  ({ page } = browser);
  await browser.signIn(h.url, OPERATOR_KEYS.alice);
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await h?.stop();
});

describe('uploading a policy draft from the console', () => {
  it('saves a draft that adds a rule, shows its diff, and refuses its author’s approval', async () => {
    await page.getByRole('link', { name: 'Policies' }).click();
    await page.waitForURL('**/console/policies');
    expect(await page.textContent('#versions')).toContain('v1');
    const form = page.getByRole('form', { name: 'Upload a draft' });
    await form.getByLabel('Policy YAML').fill(policy('deny', ADDED));
    await form.getByLabel('Message').fill('deny browsers, and mallory');
    await form.getByRole('button', { name: 'Save the draft' }).click();
    await page.waitForURL('**/console/policies/*?done=create');
    const main = (await page.textContent('main')) ?? '';
    expect(main).toContain('Draft saved.');
    expect(main).toContain('1 rule(s) added, 0 removed, 1 changed, 0 unchanged.');
    expect(await page.textContent('#diff')).toContain('mallory-denied');
    const changed = page.getByRole('table', { name: 'Rule browser: changed fields' });
    expect(await changed.locator('td.before').textContent()).toBe('challenge');
    expect(await changed.locator('td.after').textContent()).toBe('deny');
    expect(await overflow()).toBeLessThanOrEqual(0);
    const id = new URL(page.url()).pathname.split('/').at(-1)!;
    // Stored as the file would hold it: the same revision as the text with LF lines.
    expect((await api('bob', 'GET', `/policy-versions/${id}`)).yaml).toBe(policy('deny', ADDED));

    await page.getByRole('button', { name: 'Propose for review' }).click();
    await page.waitForURL('**?done=propose');
    expect(await page.textContent('main')).toContain('an admin other than its author must approve it');
    await page.getByRole('button', { name: 'Approve' }).click();
    await page.waitForLoadState();
    expect(await page.getByRole('alert').textContent()).toContain('alice wrote policy version');
    expect(await overflow()).toBeLessThanOrEqual(0);

    expect((await api('bob', 'POST', `/policy-versions/${id}/approve`)).state).toBe('approved');
    await page.goto(`${h.url}/console/policies/${id}`);
    await page.getByRole('button', { name: /^Activate/ }).click();
    await page.waitForURL('**?done=activate');
    expect(await page.textContent('main')).toContain('Activated: every replica serves it');
  });
});
