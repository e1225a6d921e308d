import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { visibleText } from '../src/text/visible-text.ts';
import { CALLER_KEY, type Harness, OPS_KEY, startHarness } from './decide-harness.ts';
import { type ConsoleBrowser, openConsoleBrowser } from './support/console-browser.ts';
import { eventually } from './support/eventually.ts';
import { shippedPolicyWithLists } from './support/list-policy.ts';
import { operatorCall } from './support/operators-harness.ts';
import { PATIENT_DEADLINE_MS } from './support/patient-policy.ts';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver.ts';

/**
 * Every page of the console, and the public "was this you?" pages, in Debian's chromium at 1280 px
 * (a laptop) and at 390 px (an iPhone's width), over a riskgate with the data an analyst's day
 * leaves: decisions (mallory's deny and her lock-out, bob's challenge with a failed step-up, a
 * login whose user agent is 1,024 characters with a U+202E in it), a review case, a snooze, an
 * active policy version and a proposed one with its evidence, a list entry, labels and the audit
 * rows of it all. The pages are the console's GET routes as riskgate declares them: a route with
 * no screenshot here fails the first test. At 390 px no page scrolls sideways; the hostile user
 * agent renders inside the viewport, in the order it was sent, at both widths. Times show in the
 * reader's zone, UTC on hover.
 *
 * Screenshots go to test-results/console-pages/; with RISKGATE_SCREENSHOTS=1 they are written over
 * docs/console/ (1280 px) and docs/console/narrow/ (390 px), the copies docs/console.md shows,
 * so a run in CI never rewrites tracked files.
 */

const DOCS = process.env.RISKGATE_SCREENSHOTS === '1';
const ROOT = join(import.meta.dirname, '..');
const SHOTS = DOCS ? join(ROOT, 'docs', 'console') : join(ROOT, 'test-results', 'console-pages');
const WIDTHS = [
  { width: 1280, height: 860, dir: SHOTS },
  { width: 390, height: 844, dir: join(SHOTS, 'narrow') },
] as const;
const NARROW = 390;
const RLO = '\u202e';
// 1,024 characters: the most /decide accepts. The override in the middle would reverse the rest.
const HOSTILE_UA = `Mozilla/5.0 ${'A'.repeat(500)}${RLO}gpj.exe${'B'.repeat(1024 - 12 - 500 - 1 - 7)}`;
const SECOND_ADMIN_KEY = 'ben-admin-key-0123456789abcdef';

/**
 * The shipped policy, its new-browser rule asking for review and asking the user (bob's challenge),
 * with patient timeouts: on a busy machine a slow sandbox would leave a decision degraded, and the
 * pages would show another day than the one seeded.
 */
const ASKING = '  - id: new-browser\n    review: true\n    askUser: true\n';
const POLICY = `${shippedPolicyWithLists().replace('  - id: new-browser\n', ASKING)}
askUser:
  onNo: [lockOut]
`;
/** The proposed draft: a new browser alone denies (bob's challenge would be a deny). */
const DRAFT = POLICY.replace(
  'when: signals.newBrowser.success && !signals.newBrowser.known\n    score: 40\n',
  'when: signals.newBrowser.success && !signals.newBrowser.known\n    score: 80\n',
);

/** What the pages are shown with, made by `seed`. */
interface Seeded {
  malloryDeny: string;
  bobChallenge: string;
  hostile: string;
  reviewCase: string;
  proposed: string;
  /** One unanswered "was this you?" link per width (answering one uses it), as paths on this riskgate. */
  askLinks: string[];
}

/** One screenshot: its file name, what the docs call it, the page, and where to scroll first. */
interface Shot {
  name: string;
  caption: string;
  path: (s: Seeded) => string;
  /** The id of the element to scroll into view before the screenshot. */
  scrollTo?: string;
}

/**
 * The screenshots of each page route (riskgate's GET route, as Hono declares it). The first test
 * checks this covers every GET route of the console and the ask-user page but those in NOT_PAGES.
 */
const PAGES: Record<string, Shot[]> = {
  '/console/sign-in': [{ name: 'sign-in', caption: 'Sign in', path: () => '/console/sign-in' }],
  '/console/decisions': [
    { name: 'decisions', caption: 'Decisions', path: () => '/console/decisions' },
    {
      name: 'decisions-filtered',
      caption: 'Decisions filtered by a rule',
      path: () => '/console/decisions?rule=new-browser',
    },
  ],
  '/console/decisions/:id': [
    {
      name: 'decision',
      caption: "A decision: mallory's deny",
      path: (s) => `/console/decisions/${s.malloryDeny}`,
    },
    {
      name: 'decision-actions',
      caption: 'A decision: its timings, its lock-out done, its label',
      path: (s) => `/console/decisions/${s.malloryDeny}`,
      scrollTo: 'h-actions',
    },
    {
      name: 'decision-outcomes',
      caption: "A decision: bob's challenge, its failed step-up reported by the login backend",
      path: (s) => `/console/decisions/${s.bobChallenge}`,
      scrollTo: 'h-login-outcomes',
    },
    {
      name: 'decision-user-agent',
      caption: 'A decision whose user agent is 1,024 characters with a U+202E in it',
      path: (s) => `/console/decisions/${s.hostile}`,
      scrollTo: 'h-request',
    },
  ],
  '/console/review': [{ name: 'review', caption: 'Review: the queue', path: () => '/console/review' }],
  '/console/review/:id': [
    { name: 'review-case', caption: 'A review case', path: (s) => `/console/review/${s.reviewCase}` },
  ],
  '/console/rules': [{ name: 'rules', caption: 'Rules', path: () => '/console/rules' }],
  '/console/rules/:id': [
    { name: 'rule', caption: 'A rule and its snoozes', path: () => '/console/rules/new-browser' },
  ],
  '/console/policies': [
    { name: 'policies', caption: 'Policies: the versions', path: () => '/console/policies' },
  ],
  '/console/policies/:id': [
    {
      name: 'policy-version',
      caption: 'A proposed policy version',
      path: (s) => `/console/policies/${s.proposed}`,
    },
    {
      name: 'policy-version-diff',
      caption: 'A proposed policy version: its diff against the active one',
      path: (s) => `/console/policies/${s.proposed}`,
      scrollTo: 'diff',
    },
    {
      name: 'policy-version-evidence',
      caption: 'A proposed policy version: its evidence (the backtest)',
      path: (s) => `/console/policies/${s.proposed}`,
      scrollTo: 'evidence',
    },
  ],
  '/console/lists': [{ name: 'lists', caption: 'Lists', path: () => '/console/lists' }],
  '/console/lists/:name': [
    {
      name: 'list',
      caption: 'A list: a network blocked',
      path: () => '/console/lists/blockedNetworks',
    },
  ],
  '/console/lockouts': [{ name: 'lockouts', caption: 'Lock-outs', path: () => '/console/lockouts' }],
  '/console/lockouts/:id': [
    {
      name: 'lockout',
      caption: 'A lock-out and its Unlock form',
      path: (s) => `/console/lockouts/${s.malloryDeny}`,
    },
  ],
  '/console/actions': [{ name: 'actions', caption: 'Actions (the outbox)', path: () => '/console/actions' }],
  '/console/health': [{ name: 'health', caption: 'Health', path: () => '/console/health' }],
  '/console/audit': [{ name: 'audit', caption: 'Audit trail', path: () => '/console/audit' }],
  // The public page: the question here; the answer and a refusal are shot in its own test below.
  '/ask-user/:token': [{ name: 'ask-user', caption: '"Was this you?"', path: (s) => s.askLinks[0]! }],
};

/** Shot by the "was this you?" test: answering the question, then opening the used link. */
const ASK_USER_AFTER: Shot[] = [
  { name: 'ask-user-answered', caption: '"Was this you?" answered', path: () => '' },
  { name: 'ask-user-refused', caption: '"Was this you?" refused: the link was used', path: () => '' },
];

/** The console's page for a path no route has (its 404), beside the declared ones. */
const NOT_FOUND: Shot = { name: 'not-found', caption: 'Not found', path: () => '/console/no-such-page' };

/** GET routes that answer no page, and what they answer instead. */
const NOT_PAGES = new Map([
  ['/console/assets/:name', 'the stylesheet and the script module'],
  ['/console', 'a redirect to Decisions'],
  ['/console/', 'a redirect to Decisions'],
]);
/** A route whose last segment has an extension is a file: an export or JSON (`/decisions.csv`). */
const isFile = (path: string) => /\.[a-z]+$/.test(path);

let h: Harness;
let receiver: WebhookReceiver;
let browser: ConsoleBrowser;
let page: Page;
let seeded: Seeded;
let problems: string[] = [];

/** An operator call with `key` (default the first admin's, ada's), its JSON answer. */
async function api(method: string, path: string, body?: unknown, key = OPS_KEY) {
  const res = await operatorCall(h.url, key, method, path, body);
  if (res.status < 200 || res.status >= 300)
    throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
  return res.body;
}

/** `request` decided, once the decision store has it (it writes behind the answer). */
async function stored(request: Record<string, unknown>, verdict: string): Promise<string> {
  const answer = await h.decide(request);
  expect(answer.body.verdict, JSON.stringify(answer.body)).toBe(verdict);
  const id = answer.body.decisionId as string;
  await eventually(async () => (await h.ops(`/decisions/${id}`)).status === 200, {
    what: `decision ${id} in the store`,
  });
  return id;
}

/** The "was this you?" link of `decisionId`'s event, as a path on this riskgate. */
async function askLinkOf(decisionId: string): Promise<string> {
  const url = await eventually(
    () =>
      receiver.received
        .map((d) => JSON.parse(d.body.toString('utf8')) as { data: Record<string, unknown> })
        .map((e) => (e.data.decisionId === decisionId ? (e.data.askUser as { url: string }) : undefined))
        .find((link) => link !== undefined)?.url,
    { timeoutMs: 20_000, what: `the "was this you?" link of ${decisionId}` },
  );
  return new URL(url).pathname;
}

/** The policy versions: v1 (this policy) active by two admins, then the draft proposed with evidence. */
async function seedPolicyVersions(): Promise<string> {
  const v1 = await api('POST', '/policy-versions', {
    yaml: POLICY,
    message: 'the shipped policy, asking bob',
  });
  await api('POST', `/policy-versions/${v1.id}/propose`);
  await api('POST', `/policy-versions/${v1.id}/approve`, undefined, SECOND_ADMIN_KEY);
  await api('POST', `/policy-versions/${v1.id}/activate`, undefined, SECOND_ADMIN_KEY);
  return v1.id as string;
}

async function seed(): Promise<Seeded> {
  const ids = await lookUpUserIds(h.sandbox, ['alice', 'bob', 'mallory']);
  await seedPolicyVersions();
  await stored(demoRequest('alice', ids.alice), 'allow');
  const hostile = await stored({ ...demoRequest('alice', ids.alice), userAgent: HOSTILE_UA }, 'allow');
  const bobChallenge = await stored(demoRequest('bob', ids.bob), 'challenge');
  const malloryDeny = await stored(demoRequest('mallory', ids.mallory), 'deny');
  // Two more asks of bob: one link for each width's answer.
  const askedAgain = [
    await stored(demoRequest('bob', ids.bob), 'challenge'),
    await stored(demoRequest('bob', ids.bob), 'challenge'),
  ];

  // The login backend reports bob's step-up failed; an analyst labels mallory's deny.
  const outcome = await fetch(`${h.url}/decisions/${bobChallenge}/outcome`, {
    method: 'POST',
    headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'step_up', result: 'failed' }),
  });
  expect(outcome.status).toBeLessThan(300);
  const feedback = await fetch(`${h.url}/feedback`, {
    method: 'POST',
    headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ decisionId: malloryDeny, label: 'fraud', note: 'remote-controlled session' }),
  });
  expect(feedback.status).toBeLessThan(300);

  // Bob's challenge opened a case (its rule asks for review); mallory's is sent by hand, then
  // claimed with a note.
  const bobCase = await eventually(
    async () =>
      ((await api('GET', '/review/cases?view=open')).items as { id: string; decisionId: string }[]).find(
        (c) => c.decisionId === bobChallenge,
      ),
    { what: "bob's review case" },
  );
  await api('POST', '/review/cases', { decisionId: malloryDeny, note: 'check the device before unlocking' });
  await api('POST', '/review/claim-next');
  await api('POST', `/review/cases/${bobCase.id}/notes`, { text: 'step-up failed; calling the user' });

  // A traveller's snooze, a blocked network, mallory's lock-out landed.
  await api('POST', '/snoozes', {
    ruleId: 'new-browser',
    entity: 'accountId',
    value: 'bob',
    until: new Date(Date.now() + 3 * 86_400_000).toISOString(),
    reason: 'travelling with a new laptop; confirmed by phone',
  });
  await api('POST', '/lists/blockedNetworks/entries', {
    value: '198.51.100.0/24',
    reason: 'credential stuffing from this range',
    ttlSeconds: 7200,
  });
  await eventually(
    async () =>
      ((await api('GET', '/lockouts')).lockouts as { status: string }[]).some((l) => l.status === 'locked'),
    { timeoutMs: 20_000, what: "mallory's lock-out landed" },
  );

  // The draft proposed over the decisions above: its evidence is computed off the request.
  const draft = await api('POST', '/policy-versions', {
    yaml: DRAFT,
    message: 'incident INC-2311: deny every new browser for the week',
  });
  await api('POST', `/policy-versions/${draft.id}/propose`, { windowHours: 24 });
  await eventually(
    async () =>
      ((await api('GET', `/policy-versions/${draft.id}`)).evidence as { state?: string } | null)?.state ===
      'complete',
    { timeoutMs: 30_000, what: "the draft's evidence" },
  );

  return {
    malloryDeny,
    bobChallenge,
    hostile,
    reviewCase: bobCase.id,
    proposed: draft.id as string,
    askLinks: await Promise.all(askedAgain.map(askLinkOf)),
  };
}

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  h = await startHarness({
    policy: { yaml: POLICY },
    deadlineMs: PATIENT_DEADLINE_MS,
    env: {
      RISKGATE_OPS_KEYS: `ada:admin:${OPS_KEY},ben:admin:${SECOND_ADMIN_KEY}`,
      RISKGATE_WEBHOOK_URLS: receiver.url(),
      RISKGATE_WEBHOOK_SECRET: 'a-console-pages-webhook-secret-of-40-chars',
      RISKGATE_WEBHOOK_EVENTS: 'decision.challenged',
      RISKGATE_ASK_USER_SECRET: 'a-console-pages-ask-user-secret-of-32-chars-or-more',
      RISKGATE_ASK_USER_BASE_URL: 'https://risk.example.com',
    },
  });
  seeded = await seed();
  for (const w of WIDTHS) mkdirSync(w.dir, { recursive: true });
  browser = await openConsoleBrowser({
    viewport: { width: WIDTHS[0].width, height: WIDTHS[0].height },
    // A reader in India (UTC+5:30): times show in their zone.
    timezoneId: 'Asia/Kolkata',
  });
  ({ page, problems } = browser);
}, 150_000);

afterAll(async () => {
  await browser?.close();
  await h?.stop();
  await receiver?.close();
});

/** How far the page reaches past the viewport's right edge, px (0 when it fits). */
const overflow = () =>
  page.evaluate(
    'document.documentElement.scrollWidth - document.documentElement.clientWidth',
  ) as Promise<number>;

/**
 * The elements reaching past the viewport outside any box of their own that scrolls or clips (what
 * to fix when a page is too wide; an absolute one always), the outermost first.
 */
const widest = (width: number) =>
  page.evaluate(`(() => {
    const clipped = (e) => {
      // An absolute box escapes a scrolling ancestor that does not position it: counted.
      if (getComputedStyle(e).position === 'absolute') return false;
      for (let p = e.parentElement; p !== null && p !== document.body; p = p.parentElement)
        if (getComputedStyle(p).overflowX !== 'visible') return true;
      return false;
    };
    const name = (e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
      + (e.getAttribute('class') ? '.' + e.getAttribute('class').split(' ')[0] : '');
    return [...document.querySelectorAll('body *')]
      .filter((e) => e.getBoundingClientRect().right > ${width + 1} && !clipped(e))
      .slice(0, 4)
      .map((e) => name(e) + ':' + Math.round(e.getBoundingClientRect().right))
      .join(' ');
  })()`) as Promise<string>;

/** A screenshot of the viewport, after scrolling `scrollTo` into view; a short page only as tall as it is. */
async function shoot(shot: Shot, w: (typeof WIDTHS)[number]): Promise<void> {
  if (shot.scrollTo !== undefined)
    await page.evaluate(`document.getElementById(${JSON.stringify(shot.scrollTo)}).scrollIntoView()`);
  const tall = (await page.evaluate('document.documentElement.scrollHeight')) as number;
  await page.screenshot({
    path: join(w.dir, `${shot.name}.png`),
    ...(shot.scrollTo === undefined &&
      tall < w.height && { clip: { x: 0, y: 0, width: w.width, height: tall } }),
  });
}

async function signIn(w: (typeof WIDTHS)[number]): Promise<void> {
  await browser.context.clearCookies();
  await page.setViewportSize({ width: w.width, height: w.height });
  await page.goto(`${h.url}/console/sign-in`);
}

/** Opens a console page, signing in first when the session is gone (a test run alone, `-t`). */
async function openSignedIn(path: string): Promise<void> {
  await page.goto(`${h.url}${path}`);
  if (new URL(page.url()).pathname !== '/console/sign-in') return;
  await page.getByLabel('Operator key').fill(OPS_KEY);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`**${path}`);
}

describe('every console page', () => {
  it('has its screenshots here: every GET route of the console and the "was this you?" page', () => {
    const pages = h.riskgate.app.routes
      .filter((r) => r.method === 'GET')
      .map((r) => r.path)
      .filter((p) => p.startsWith('/console') || p.startsWith('/ask-user/'))
      .filter((p) => !NOT_PAGES.has(p) && !isFile(p));
    expect(pages.length).toBeGreaterThanOrEqual(15);
    expect([...new Set(pages)].sort()).toEqual(Object.keys(PAGES).sort());
  });

  for (const w of WIDTHS) {
    it(`shows every page at ${w.width} px${w.width === NARROW ? ', none scrolling sideways' : ''}`, async () => {
      const wide: string[] = [];
      const visit = async (shot: Shot) => {
        const res = await page.goto(`${h.url}${shot.path(seeded)}`);
        expect(res?.status(), shot.name).toBe(shot === NOT_FOUND ? 404 : 200);
        await shoot(shot, w);
        const px = await overflow();
        if (px > 0) wide.push(`${shot.name}: ${px} px past the edge, widest: ${await widest(w.width)}`);
      };
      await signIn(w);
      await visit(PAGES['/console/sign-in']![0]!);
      await page.getByLabel('Operator key').fill(OPS_KEY);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL('**/console/decisions');
      for (const [route, shots] of Object.entries(PAGES))
        if (route !== '/console/sign-in') for (const shot of shots) await visit(shot);
      await visit(NOT_FOUND);
      if (w.width === NARROW) expect(wide).toEqual([]);
      expect(problems.filter((p) => !/status of 404/.test(p))).toEqual([]);
    }, 180_000);
  }

  it('answers "was this you?" and refuses the used link, at both widths, none scrolling sideways', async () => {
    const wide: string[] = [];
    for (const [i, w] of WIDTHS.entries()) {
      await page.setViewportSize({ width: w.width, height: w.height });
      const link = seeded.askLinks[i]!;
      await page.goto(`${h.url}${link}`);
      // Its question page was shot above at each width: opening it changes nothing.
      await page.getByRole('button', { name: 'Yes, it was me' }).click();
      await expect.poll(() => page.textContent('h1')).toBe('Thank you');
      await shoot(ASK_USER_AFTER[0]!, w);
      if (w.width === NARROW && (await overflow()) > 0) wide.push('ask-user-answered');
      const again = await page.goto(`${h.url}${link}`);
      expect(again?.status()).toBe(409);
      expect(await page.textContent('main')).toContain('Nothing was changed');
      await shoot(ASK_USER_AFTER[1]!, w);
      if (w.width === NARROW && (await overflow()) > 0) wide.push('ask-user-refused');
    }
    expect(wide).toEqual([]);
  });
});

/**
 * Where each character of the user agent's text is drawn: the text as shown, the box of its `dd`,
 * the viewport's width, whether its bidi is isolated, and the rectangle of the characters at
 * `offsets` in the shown text.
 */
function drawn(offsets: number[]): Promise<{
  text: string;
  right: number;
  viewport: number;
  isolated: boolean;
  rects: { left: number; top: number; bottom: number }[];
}> {
  return page.evaluate(`(() => {
    const dd = [...document.querySelectorAll('dd')].find((e) => e.textContent.startsWith('Mozilla/5.0'));
    const bdi = dd.querySelector('bdi');
    const walker = document.createTreeWalker(dd, NodeFilter.SHOW_TEXT);
    const nodes = [];
    for (let n = walker.nextNode(); n !== null; n = walker.nextNode()) nodes.push(n);
    const at = (offset) => {
      let o = offset;
      for (const node of nodes) {
        if (o < node.data.length) {
          const r = document.createRange();
          r.setStart(node, o);
          r.setEnd(node, o + 1);
          const b = r.getBoundingClientRect();
          return { left: b.left, top: b.top, bottom: b.bottom };
        }
        o -= node.data.length;
      }
      return null;
    };
    return {
      text: dd.textContent,
      right: dd.getBoundingClientRect().right,
      viewport: document.documentElement.clientWidth,
      isolated: getComputedStyle(bdi ?? dd).unicodeBidi === 'isolate',
      rects: ${JSON.stringify(offsets)}.map(at),
    };
  })()`);
}

describe('a hostile user agent', () => {
  for (const w of WIDTHS) {
    it(`of 1,024 characters with a U+202E renders inside the viewport and in the order it was sent (${w.width} px)`, async () => {
      await page.setViewportSize({ width: w.width, height: w.height });
      await openSignedIn(`/console/decisions/${seeded.hostile}`);
      expect(await overflow()).toBeLessThanOrEqual(0);
      const shown = visibleText(HOSTILE_UA);
      // The override is named where it stood, not obeyed.
      expect(shown).toContain('⟨U+202E⟩gpj.exe');
      // Every character from a few before the override to a few after its run, and the ends.
      const from = shown.indexOf('⟨U+202E⟩') - 3;
      const to = shown.indexOf('gpj.exe') + 'gpj.exe'.length + 3;
      const offsets = [0, 11, ...Array.from({ length: to - from }, (_, i) => from + i), shown.length - 1];
      const d = await drawn(offsets);
      expect(d.text).toBe(shown);
      expect(d.isolated).toBe(true);
      expect(d.right).toBeLessThanOrEqual(d.viewport);
      // Read as sent: each character is on a later line than the one before, or right of it.
      const outOfOrder = d.rects.flatMap((r, i) => {
        const before = d.rects[i - 1];
        if (before === undefined) return [];
        const laterLine = r.top >= before.bottom - 1;
        const sameLine = Math.abs(r.top - before.top) < 2;
        return laterLine || (sameLine && r.left > before.left)
          ? []
          : [`${JSON.stringify(shown[offsets[i - 1]!])} then ${JSON.stringify(shown[offsets[i]!])}`];
      });
      expect(outOfOrder).toEqual([]);
    });
  }
});

describe('the console in the reader’s zone', () => {
  it('shows each time in the browser’s zone with UTC on hover', async () => {
    await openSignedIn('/console/decisions');
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

describe('docs/console.md', () => {
  it('shows every screenshot at both widths, and docs/console/ holds no other', () => {
    const doc = readFileSync(join(ROOT, 'docs', 'console.md'), 'utf8');
    const names = [...Object.values(PAGES).flat(), ...ASK_USER_AFTER, NOT_FOUND].map((s) => s.name);
    const wanted = names.flatMap((n) => [`console/${n}.png`, `console/narrow/${n}.png`]).sort();
    const linked = [...doc.matchAll(/\]\((console\/[^)]+\.png)\)/g)].map((m) => m[1]!).sort();
    expect(linked).toEqual(wanted);
    // And docs/console/ holds those images alone: none left of a page renamed or gone.
    const held = ['', 'narrow/'].flatMap((dir) =>
      readdirSync(join(ROOT, 'docs', 'console', dir))
        .filter((f) => f.endsWith('.png'))
        .map((f) => `console/${dir}${f}`),
    );
    expect(held.sort()).toEqual(wanted);
  });
});
