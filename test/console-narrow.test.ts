import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NAV } from '../src/console/console-layout.tsx';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { type Harness, OPS_KEY, startHarness } from './decide-harness.ts';
import { eventually } from './support/eventually.ts';
import { shippedPolicyWithLists } from './support/list-policy.ts';

/**
 * The console on a phone (390 px, an iPhone's width) and against a hostile user agent: no page
 * scrolls sideways (wide tables scroll inside their cards), and a decision whose user agent is
 * 1,024 characters long with a U+202E (right-to-left override) in it renders within the viewport,
 * in the order it was sent, the override shown as what it is instead of obeyed. Times show in the
 * reader's zone, UTC on hover.
 */

const CHROMIUM = '/usr/bin/chromium';
const SHOTS = join(import.meta.dirname, '..', 'test-results', 'console');
const WIDTH = 390;
const RLO = '\u202e';
// 1,024 characters: the most /decide accepts. The override in the middle would reverse the rest.
const HOSTILE_UA = `Mozilla/5.0 ${'A'.repeat(500)}${RLO}gpj.exe${'B'.repeat(1024 - 12 - 500 - 1 - 7)}`;

let h: Harness;
let context: BrowserContext;
let page: Page;
let profile: string;
let decisionId: string;

beforeAll(async () => {
  h = await startHarness({
    policy: { yaml: shippedPolicyWithLists() },
    env: { RISKGATE_OPS_KEYS: `ada:admin:${OPS_KEY}` },
  });
  const { alice } = await lookUpUserIds(h.sandbox, ['alice']);
  expect(HOSTILE_UA).toHaveLength(1024);
  const answer = await h.decide({ ...demoRequest('alice', alice), userAgent: HOSTILE_UA });
  expect(answer.status).toBe(200);
  decisionId = answer.body.decisionId as string;
  mkdirSync(SHOTS, { recursive: true });
  profile = mkdtempSync(join(tmpdir(), 'riskgate-chromium-'));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: WIDTH, height: 844 },
    // A reader in India (UTC+5:30): times show in their zone.
    timezoneId: 'Asia/Kolkata',
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--disable-background-networking',
    ],
  });
  page = context.pages()[0] ?? (await context.newPage());
  await page.goto(`${h.url}/console/sign-in`);
  await page.getByLabel('Operator key').fill(OPS_KEY);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL('**/console/decisions');
  // The store writes behind the answer: the decision page exists once the record is in.
  await eventually(
    async () =>
      (await fetch(`${h.url}/decisions/${decisionId}`, { headers: { authorization: `Bearer ${OPS_KEY}` } }))
        .status === 200
        ? true
        : undefined,
    {
      what: 'the decision in the store',
    },
  );
}, 90_000);

afterAll(async () => {
  await context?.close();
  if (profile !== undefined) rmSync(profile, { recursive: true, force: true });
  await h?.stop();
});

/** The last few elements reaching past the viewport (what to fix when a page is too wide). */
const widest = () =>
  page.evaluate(
    `[...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right > ${WIDTH + 2}).slice(-3).map((e) => e.tagName.toLowerCase() + ':' + Math.round(e.getBoundingClientRect().right)).join(' ')`,
  ) as Promise<string>;

/** How far the page reaches past the viewport's right edge, px (0 when it fits). */
const overflow = () =>
  page.evaluate(
    'document.documentElement.scrollWidth - document.documentElement.clientWidth',
  ) as Promise<number>;

describe('the console at 390 px', () => {
  it('scrolls no page sideways', async () => {
    const wide: string[] = [];
    for (const item of [...NAV.map((n) => n.href), `/console/decisions/${decisionId}`]) {
      await page.goto(`${h.url}${item}`);
      const px = await overflow();
      await page.screenshot({
        path: join(
          SHOTS,
          `narrow-${item.split('/')[2] ?? 'decisions'}${item.split('/').length > 3 ? '-one' : ''}.png`,
        ),
        fullPage: false,
      });
      if (px > 0) wide.push(`${item}: ${px} px past the edge, widest: ${await widest()}`);
    }
    expect(wide).toEqual([]);
  });

  it('shows a 1,024-character user agent with a U+202E inside the viewport and in the order it was sent', async () => {
    await page.goto(`${h.url}/console/decisions/${decisionId}`);
    expect(await overflow()).toBe(0);
    const shown = page.locator('dd', { hasText: 'Mozilla/5.0' });
    // The override is named where it stood, not obeyed: what follows reads left to right.
    const text = (await shown.textContent()) ?? '';
    expect(text).not.toContain(RLO);
    expect(text).toContain('⟨U+202E⟩gpj.exe');
    const box = await shown.boundingBox();
    expect(box).not.toBeNull();
    expect(box!.x + box!.width).toBeLessThanOrEqual(WIDTH);
  });
});

describe('the console in the reader’s zone', () => {
  it('shows each time in the browser’s zone with UTC on hover', async () => {
    await page.goto(`${h.url}/console/decisions`);
    const time = page.locator('#decisions time').first();
    const iso = (await time.getAttribute('datetime'))!;
    const shown = (await time.textContent())!;
    expect(await time.getAttribute('title')).toBe(`${iso.replace('T', ' ').slice(0, 19)} UTC`);
    // Read back as if it were UTC, the shown time is 5 h 30 min ahead of the moment.
    const [wall, zone] = [shown.slice(0, 19), shown.slice(20)];
    expect(zone).toBe('GMT+5:30');
    const aheadMs = Date.parse(`${wall.replace(' ', 'T')}Z`) - Math.floor(Date.parse(iso) / 1000) * 1000;
    expect(aheadMs).toBe(5.5 * 3600_000);
  });
});
