import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_CSP } from '../src/console/console-routes.tsx';
import { SessionSigner } from '../src/console/console-session.ts';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds, sandboxUpstream } from '../src/dev/embedded-sandbox.ts';
import { keyIdOf } from '../src/edge/caller-auth.ts';
import type { AuditEntry } from '../src/operators/audit-trail.ts';
import type { Operator } from '../src/operators/operator.ts';
import { CALLER_KEY, type Harness, OPS_KEY, startHarness } from './decide-harness.ts';
import { adminUserStatus } from './support/admin-user-status.ts';
import { memoryRuleReport } from './support/console-memory.ts';
import { eventually } from './support/eventually.ts';
import { shippedPolicyWithLists } from './support/list-policy.ts';
import { PATIENT_DEADLINE_MS } from './support/patient-policy.ts';

/**
 * The console over real HTTP against a real riskgate and sandbox (the decision store, rule report
 * and audit trail are in-memory stand-ins read from the decision log lines): the session cookie,
 * the security headers, CSRF, roles, the audit trail, and that no page carries a secret.
 */

const VIEWER_KEY = 'test-viewer-key-0123456789';
const ANALYST_KEY = 'test-analyst-key-0123456789';
const OPERATORS: Record<string, Operator> = {
  [OPS_KEY]: { name: 'ada', role: 'admin', keyId: keyIdOf(OPS_KEY) },
  [ANALYST_KEY]: { name: 'ann', role: 'analyst', keyId: keyIdOf(ANALYST_KEY) },
  [VIEWER_KEY]: { name: 'vic', role: 'viewer', keyId: keyIdOf(VIEWER_KEY) },
};
const ALL_KEYS = [OPS_KEY, ANALYST_KEY, VIEWER_KEY];
/** RISKGATE_OPS_KEYS: each key with its operator's name and role. */
const OPS_ENTRIES = ALL_KEYS.map((k) => `${OPERATORS[k]!.name}:${OPERATORS[k]!.role}:${k}`);

let h: Harness;
let userIds: Record<string, string | undefined>;
let malloryId: string;
let deadActionId: string;

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

interface Session {
  cookie: string;
  csrf: string;
}

/** The `name=value` of a Set-Cookie header of `res` for `name`. */
function cookieOf(res: Response, name: string): string | undefined {
  return res.headers
    .getSetCookie()
    .find((c) => c.startsWith(`${name}=`))
    ?.split(';')[0];
}

const csrfIn = (html: string) => /name="csrf" value="([^"]+)"/.exec(html)?.[1];

async function signInAnswer(key: string, url = h.url): Promise<Response> {
  const form = await fetch(`${url}/console/sign-in`);
  const nonce = cookieOf(form, 'riskgate_console_sign_in')!;
  const csrf = csrfIn(await form.text())!;
  return fetch(`${url}/console/sign-in`, {
    method: 'POST',
    redirect: 'manual',
    headers: { ...FORM, cookie: nonce },
    body: new URLSearchParams({ csrf, key, next: '/console/decisions' }),
  });
}

async function signIn(key: string): Promise<Session> {
  const res = await signInAnswer(key);
  expect(res.status).toBe(303);
  const cookie = cookieOf(res, 'riskgate_console')!;
  const page = await fetch(`${h.url}/console/decisions`, { headers: { cookie } });
  return { cookie, csrf: csrfIn(await page.text())! };
}

function get(s: Session, path: string): Promise<Response> {
  return fetch(`${h.url}${path}`, { headers: { cookie: s.cookie }, redirect: 'manual' });
}

function post(s: Session, path: string, form: Record<string, string>, headers: Record<string, string> = {}) {
  return fetch(`${h.url}${path}`, {
    method: 'POST',
    redirect: 'manual',
    headers: { ...FORM, cookie: s.cookie, ...headers },
    body: new URLSearchParams(form),
  });
}

const feedbackLines = () => h.lines.filter((l) => l.kind === 'feedback');

/** The audit trail, newest first (GET /audit). */
async function audited(): Promise<AuditEntry[]> {
  return ((await (await h.ops('/audit?limit=500')).json()) as { entries: AuditEntry[] }).entries;
}

beforeAll(async () => {
  h = await startHarness({
    policy: { yaml: shippedPolicyWithLists() },
    deadlineMs: PATIENT_DEADLINE_MS,
    env: { RISKGATE_OPS_KEYS: OPS_ENTRIES.join(','), RISKGATE_OUTBOX_HORIZON_SECONDS: '1' },
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
  userIds = await lookUpUserIds(h.sandbox, ['alice', 'mallory']);
  // The Admin API refuses mallory's lock-out until the horizon (1 s) has passed: a dead action.
  await h.control('PUT', '/sandbox/faults', {
    rules: [{ route: `PUT /srv/admin/v1/users/${userIds.mallory}`, errorRate: 1, errorStatus: 503 }],
  });
  await h.decide(demoRequest('alice', userIds.alice));
  const mallory = await h.decide(demoRequest('mallory', userIds.mallory));
  expect(mallory.body.verdict).toBe('deny');
  malloryId = mallory.body.decisionId as string;
  deadActionId = `${malloryId}:lock_out_user:${userIds.mallory}`;
  await eventually(
    async () => ((await h.riskgate.outbox.store.get(deadActionId))?.status === 'dead' ? true : undefined),
    {
      timeoutMs: 20_000,
      what: "mallory's lock-out dead-lettered",
    },
  );
  await h.control('DELETE', '/sandbox/faults');
  // The decision store writes off the request path: on a busy machine mallory's row may come after.
  await eventually(async () => ((await h.ops(`/decisions/${malloryId}`)).status === 200 ? true : undefined), {
    timeoutMs: 20_000,
    what: "mallory's decision stored",
  });
}, 60_000);

afterAll(async () => {
  await h?.stop();
});

describe('the console sign-in', () => {
  it('sets an HttpOnly, SameSite=Strict session cookie on /console that expires, holding no key', async () => {
    const res = await signInAnswer(ANALYST_KEY);
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/console/decisions');
    const set = res.headers.getSetCookie().find((c) => c.startsWith('riskgate_console='))!;
    expect(set).toMatch(/; Path=\/console(;|$)/);
    expect(set).toMatch(/; HttpOnly(;|$)/);
    expect(set).toMatch(/; SameSite=Strict(;|$)/);
    expect(set).toMatch(/; Max-Age=28800(;|$)/);
    // Plain HTTP without RISKGATE_CONSOLE_SECURE_COOKIE: a Secure cookie would never come back.
    expect(set).not.toMatch(/Secure/);
    expect(set).not.toContain(ANALYST_KEY);
    expect(Buffer.from(set.split('=')[1]!.split('.')[0]!, 'base64url').toString()).not.toContain(ANALYST_KEY);
    const [last] = await audited();
    expect(last).toMatchObject({ actor: 'ann', role: 'analyst', action: 'session.sign_in' });
    expect(last!.from).toMatch(/127\.0\.0\.1/);
  });

  it('refuses a key that is not an operator key (a caller key included), without a session', async () => {
    for (const key of [CALLER_KEY, 'not-a-key-at-all-0123456789']) {
      const res = await signInAnswer(key);
      expect(res.status).toBe(401);
      expect(cookieOf(res, 'riskgate_console')).toBeUndefined();
      expect(await res.text()).toContain('not an operator key');
    }
  });

  it('sends an expired, forged or absent session to the sign-in page', async () => {
    const signer = new SessionSigner({ operatorKeys: OPS_ENTRIES });
    const expired = signer.sign(OPERATORS[OPS_KEY]!, Date.now() - 8 * 3_600_000 - 1000);
    const forged = new SessionSigner({ operatorKeys: ['another-key-0123456789'] }).sign(OPERATORS[OPS_KEY]!);
    for (const cookie of [`riskgate_console=${expired}`, `riskgate_console=${forged}`, '']) {
      const res = await fetch(`${h.url}/console/actions`, { headers: { cookie }, redirect: 'manual' });
      expect(res.status).toBe(303);
      expect(res.headers.get('location')).toBe('/console/sign-in?next=%2Fconsole%2Factions');
    }
    // The same signer's fresh session is taken: the expiry is what refused the first.
    const fresh = await fetch(`${h.url}/console/actions`, {
      headers: { cookie: `riskgate_console=${signer.sign(OPERATORS[OPS_KEY]!)}` },
    });
    expect(fresh.status).toBe(200);
  });
});

describe('the console answers', () => {
  it('carry the strict CSP and the other security headers on every page, redirect and asset', async () => {
    const s = await signIn(OPS_KEY);
    const page = await (await get(s, '/console/decisions')).text();
    const css = /href="(\/console\/assets\/console\.[0-9a-f]{10}\.css)"/.exec(page)![1]!;
    const js = /src="(\/console\/assets\/console\.[0-9a-f]{10}\.js)"/.exec(page)![1]!;
    const paths = ['/console/sign-in', '/console/decisions', '/console/nowhere', '/console/rules', css, js];
    for (const path of paths) {
      const res = await get(s, path);
      expect(res.headers.get('content-security-policy'), path).toBe(CONSOLE_CSP);
      expect(res.headers.get('x-content-type-options'), path).toBe('nosniff');
      expect(res.headers.get('referrer-policy'), path).toBe('no-referrer');
    }
    expect((await get(s, '/console/decisions')).headers.get('cache-control')).toBe('no-store');
    expect((await get(s, css)).headers.get('cache-control')).toContain('immutable');
    expect((await get(s, js)).headers.get('content-type')).toMatch(/^text\/javascript/);
    const signedOut = await fetch(`${h.url}/console/rules`, { redirect: 'manual' });
    expect(signedOut.headers.get('content-security-policy')).toBe(CONSOLE_CSP);
    // No inline script or style anywhere (the CSP would block it).
    expect(page).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>|<style|\sstyle=/);
  });

  it('carry no secret: no operator, caller or vendor key on any page', async () => {
    const s = await signIn(OPS_KEY);
    const pages = [
      'decisions',
      `decisions/${malloryId}`,
      'rules',
      'lists',
      'lists/blockedNetworks',
      'lockouts',
      `lockouts/${malloryId}`,
      'actions',
      'health',
      'audit',
    ];
    const u = sandboxUpstream(h.sandbox);
    const secrets = [
      ...ALL_KEYS,
      CALLER_KEY,
      u.adminApiKey,
      u.clientSecret,
      u.logApiKey,
      u.callbackSignatureKey,
    ].filter((x): x is string => typeof x === 'string' && x.length > 0);
    expect(secrets.length).toBeGreaterThanOrEqual(5);
    for (const page of pages) {
      const res = await get(s, `/console/${page}`);
      expect(res.status, page).toBe(200);
      const text = await res.text();
      for (const secret of secrets) expect(text, `${page} carries a secret`).not.toContain(secret);
    }
    const signInPage = await (await fetch(`${h.url}/console/sign-in`)).text();
    for (const secret of secrets) expect(signInPage).not.toContain(secret);
  });
});

describe('the console changes', () => {
  it('refuse a form without its CSRF token, with a wrong one, or from another site', async () => {
    const s = await signIn(ANALYST_KEY);
    const before = feedbackLines().length;
    const label = `/console/decisions/${malloryId}/label`;
    const other = await signIn(OPS_KEY);
    for (const [form, headers] of [
      [{ label: 'fraud' }, {}],
      [{ label: 'fraud', csrf: 'wrong' }, {}],
      [{ label: 'fraud', csrf: other.csrf }, {}],
      [{ label: 'fraud', csrf: s.csrf }, { origin: 'https://evil.example' }],
      [{ label: 'fraud', csrf: s.csrf }, { 'sec-fetch-site': 'cross-site' }],
    ] as const) {
      const res = await post(s, label, form, headers);
      expect(res.status, JSON.stringify(form)).toBe(403);
    }
    expect(feedbackLines().length).toBe(before);
    // The same form with its token is taken: the token is what refused them.
    const ok = await post(s, label, { label: 'legit', csrf: s.csrf, note: 'known traveller' });
    expect(ok.status).toBe(303);
    expect(feedbackLines().length).toBe(before + 1);
  });

  it('let an analyst label a decision: a feedback line with the operator, audited, shown on the page', async () => {
    const s = await signIn(ANALYST_KEY);
    const res = await post(s, `/console/decisions/${malloryId}/label`, {
      label: 'fraud',
      note: 'confirmed by the help desk',
      csrf: s.csrf,
    });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe(`/console/decisions/${malloryId}?labelled=fraud`);
    expect(feedbackLines().at(-1)).toMatchObject({
      decisionId: malloryId,
      label: 'fraud',
      labelledBy: keyIdOf(ANALYST_KEY),
      labelledAs: 'operator',
      operator: 'ann',
      note: 'confirmed by the help desk',
    });
    expect((await audited())[0]).toMatchObject({
      actor: 'ann',
      action: 'decision.label',
      target: malloryId,
      detail: { label: 'fraud', note: 'confirmed by the help desk' },
    });
    // The store writes off the request path, but the page a label leads to waits for it: the
    // first load shows the label, never "Not labelled yet".
    const page = await (await get(s, `/console/decisions/${malloryId}?labelled=fraud`)).text();
    expect(page).toContain('Labelled fraud.');
    expect(page).toContain('<strong>fraud</strong> by ann');
    expect(page).toContain('confirmed by the help desk');
  });

  it('refuse a viewer a label and an analyst a retry (403), changing and auditing nothing', async () => {
    const viewer = await signIn(VIEWER_KEY);
    const analyst = await signIn(ANALYST_KEY);
    const labels = feedbackLines().length;
    const auditedBefore = (await audited()).length;
    const label = await post(viewer, `/console/decisions/${malloryId}/label`, {
      label: 'fraud',
      csrf: viewer.csrf,
    });
    expect(label.status).toBe(403);
    expect(await label.text()).toContain('takes the analyst role');
    for (const s of [viewer, analyst]) {
      const retry = await post(s, '/console/actions/retry', { id: deadActionId, csrf: s.csrf });
      expect(retry.status).toBe(403);
      const drop = await post(s, '/console/actions/drop', { id: deadActionId, csrf: s.csrf });
      expect(drop.status).toBe(403);
    }
    expect(feedbackLines().length).toBe(labels);
    expect((await audited()).length).toBe(auditedBefore);
    expect((await h.riskgate.outbox.store.get(deadActionId))?.status).toBe('dead');
    // Neither sees the forms it may not use.
    expect(await (await get(viewer, `/console/decisions/${malloryId}`)).text()).not.toContain('Save label');
    expect(await (await get(analyst, '/console/actions')).text()).not.toContain('/console/actions/retry');
  });

  it('let an admin retry a dead action: audited, delivered, its outcome on the decision page', async () => {
    const s = await signIn(OPS_KEY);
    const actions = await (await get(s, '/console/actions?status=dead')).text();
    expect(actions).toContain(`value="${deadActionId}"`);
    const res = await post(s, '/console/actions/retry', { id: deadActionId, csrf: s.csrf });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/console/actions?done=retry');
    expect((await audited())[0]).toMatchObject({
      actor: 'ada',
      action: 'action.retry',
      target: deadActionId,
    });
    await eventually(
      async () =>
        (await h.riskgate.outbox.store.get(deadActionId))?.status === 'delivered' ? true : undefined,
      {
        timeoutMs: 20_000,
        what: 'the retried lock-out delivered',
      },
    );
    await eventually(async () => {
      const page = await (await get(s, `/console/decisions/${malloryId}`)).text();
      return page.includes('tag tag-good">done') ? page : undefined;
    });
  });
});

describe('the console Lists page', () => {
  const list = '/console/lists/blockedNetworks';

  it('shows the declared lists; a viewer sees no form, and a change by a viewer or analyst is refused 403', async () => {
    const viewer = await signIn(VIEWER_KEY);
    const analyst = await signIn(ANALYST_KEY);
    const overview = await (await get(viewer, '/console/lists')).text();
    expect(overview).toContain('href="/console/lists/blockedNetworks"');
    expect(overview).toMatch(/<td>ip<\/td><td>24h<\/td><td>Networks an operator blocked during an attack/);
    expect(overview).toMatch(/<td>accountId<\/td><td>none<\/td>/);
    const page = await (await get(viewer, list)).text();
    expect(page).not.toContain('<form method="post" action="/console/lists');
    expect(page).toContain('takes the admin role');
    const auditedBefore = (await audited()).length;
    for (const s of [viewer, analyst]) {
      const add = await post(s, `${list}/entries`, { value: '198.51.100.0/24', reason: 'r', csrf: s.csrf });
      expect(add.status).toBe(403);
      const remove = await post(s, `${list}/remove`, { value: '198.51.100.0/24', reason: 'r', csrf: s.csrf });
      expect(remove.status).toBe(403);
    }
    expect((await audited()).length).toBe(auditedBefore);
    const api = (await (await h.ops('/lists/blockedNetworks')).json()) as { items: unknown[] };
    expect(api.items).toEqual([]);
  });

  it('lets an admin add a CIDR and remove it, each audited with the operator’s name', async () => {
    const s = await signIn(OPS_KEY);
    const form = await (await get(s, list)).text();
    expect(form).toContain(`action="${list}/entries"`);
    const add = await post(s, `${list}/entries`, {
      value: '198.51.100.7/24',
      reason: 'credential stuffing',
      ttl: '2h',
      csrf: s.csrf,
    });
    expect(add.status).toBe(303);
    expect(add.headers.get('location')).toBe(`${list}?added=198.51.100.0%2F24`);
    expect((await audited())[0]).toMatchObject({
      actor: 'ada',
      action: 'list.add',
      target: 'blockedNetworks:198.51.100.0/24',
      detail: { reason: 'credential stuffing' },
    });
    const shown = await (await get(s, add.headers.get('location')!)).text();
    expect(shown).toContain('Added 198.51.100.0/24.');
    expect(shown).toMatch(
      /<td class="mono">198\.51\.100\.0\/24<\/td><td>ada<\/td><td>credential stuffing<\/td>/,
    );
    const api = (await (await h.ops('/lists/blockedNetworks')).json()) as {
      items: { value: string; createdAt: string; expiresAt: string }[];
    };
    const [entry] = api.items;
    expect(entry!.value).toBe('198.51.100.0/24');
    expect(Date.parse(entry!.expiresAt) - Date.parse(entry!.createdAt)).toBe(2 * 3_600_000);

    const remove = await post(s, `${list}/remove`, {
      value: '198.51.100.0/24',
      reason: 'false positive',
      csrf: s.csrf,
    });
    expect(remove.status).toBe(303);
    expect((await audited())[0]).toMatchObject({
      actor: 'ada',
      action: 'list.remove',
      target: 'blockedNetworks:198.51.100.0/24',
      detail: { reason: 'false positive' },
    });
    expect(await (await get(s, remove.headers.get('location')!)).text()).toContain(
      'Removed 198.51.100.0/24.',
    );
    expect(((await (await h.ops('/lists/blockedNetworks')).json()) as { items: unknown[] }).items).toEqual(
      [],
    );
  });

  it('shows a bad CIDR, a missing reason or a bad TTL on the page (400, the form kept), never a 500', async () => {
    const s = await signIn(OPS_KEY);
    const auditedBefore = (await audited()).length;
    const cases = [
      [{ value: '198.51.100.0/33', reason: 'r' }, 'value must be an IPv4 or IPv6 address or CIDR'],
      [{ value: 'example.com', reason: 'r' }, 'value must be an IPv4 or IPv6 address or CIDR'],
      [{ value: '198.51.100.1', reason: ' ' }, 'reason is required'],
      [{ value: '198.51.100.1', reason: 'r', ttl: 'forever' }, 'ttl must be a duration like 30m'],
    ] as const;
    for (const [form, message] of cases) {
      const res = await post(s, `${list}/entries`, { ...form, csrf: s.csrf });
      expect(res.status, form.value).toBe(400);
      const page = await res.text();
      expect(page).toContain(message);
      expect(page).toContain('role="alert"');
      expect(page).toContain(`value="${form.value}"`);
    }
    const gone = await post(s, `${list}/remove`, { value: '192.0.2.1', reason: 'r', csrf: s.csrf });
    expect(gone.status).toBe(404);
    expect(await gone.text()).toContain('No entry &quot;192.0.2.1&quot; in list blockedNetworks.');
    expect((await get(s, '/console/lists/nowhere')).status).toBe(404);
    expect((await audited()).length).toBe(auditedBefore);
  });
});

describe('the console forms given text that cannot be stored', () => {
  it('show U+0000 or another control character as the form’s message (400), never a 500, keeping nothing', async () => {
    const admin = await signIn(OPS_KEY);
    const analyst = await signIn(ANALYST_KEY);
    const auditedBefore = (await audited()).length;
    const labels = feedbackLines().length;
    const cases = [
      [
        admin,
        '/console/lists/trustedAccounts/entries',
        { value: 'acct\u0000x', reason: 'r' },
        'value must not contain control characters (U+0000',
      ],
      [
        admin,
        '/console/lists/trustedAccounts/entries',
        { value: 'acct-ok', reason: 'r\u0085' },
        'reason must not contain control characters (U+0085',
      ],
      [
        admin,
        '/console/lists/trustedAccounts/remove',
        { value: 'acct\u0000', reason: 'r' },
        'value must not contain control characters',
      ],
      [
        admin,
        `/console/lockouts/${malloryId}/unlock`,
        { reason: 'verified\u0000' },
        'reason must not contain control characters',
      ],
      [
        analyst,
        `/console/decisions/${malloryId}/label`,
        { label: 'fraud', note: 'n\u0007' },
        'note must not contain control characters (U+0007',
      ],
    ] as const;
    for (const [s, path, form, message] of cases) {
      const res = await post(s, path, { ...form, csrf: s.csrf });
      expect(res.status, path).toBe(400);
      const page = await res.text();
      expect(page).toContain(message);
      // On the form's own page, as its alert: not an error page.
      expect(page).toContain('role="alert"');
      expect(page).toContain('name="csrf"');
    }
    expect((await audited()).length).toBe(auditedBefore);
    expect(feedbackLines().length).toBe(labels);
  });
});

describe('the console Audit page', () => {
  it('shows each change with its outcome beside it', async () => {
    const s = await signIn(OPS_KEY);
    // Made: its entry's outcome is done.
    expect(
      (
        await post(s, '/console/lists/trustedAccounts/entries', {
          value: 'acct-audited',
          reason: 'r',
          csrf: s.csrf,
        })
      ).status,
    ).toBe(303);
    const page = await (await get(s, '/console/audit')).text();
    expect(page).toContain('<th scope="col">Outcome</th>');
    const row = page.split('<tr>').find((r) => r.includes('trustedAccounts:acct-audited'));
    expect(row).toContain('outcome-done');
    // The target leads to the list it changed.
    expect(row).toContain('<a href="/console/lists/trustedAccounts">trustedAccounts:acct-audited</a>');
    // The sign-ins of this file are answered with a redirect: done too; nothing reads unknown.
    expect(page).not.toContain('no outcome recorded');
  });
});

describe('the console empty states', () => {
  it('name the filters that matched nothing, and a rule filter naming no rule of the active policy', async () => {
    const s = await signIn(OPS_KEY);
    const typo = await (await get(s, '/console/decisions?rule=credential-stufing&verdict=deny')).text();
    expect(typo).toContain('No decision in the last 24h matches verdict deny, rule credential-stufing.');
    expect(typo).toContain('The active policy has no rule <code>credential-stufing</code>; its rules are ');
    expect(typo).toContain('credential-stuffing,');
    // A real rule that matched nothing gets no hint about rules, only the filters.
    const real = await (
      await get(s, '/console/decisions?rule=credential-stuffing&accountId=nobody-here')
    ).text();
    expect(real).toContain('matches rule credential-stuffing, accountId nobody-here.');
    expect(real).not.toContain('The active policy has no rule');
  });

  it('say which operator an empty audit filter looked for', async () => {
    const s = await signIn(OPS_KEY);
    const page = await (await get(s, '/console/audit?actor=nobody-at-all')).text();
    expect(page).toContain('No entry by operator “nobody-at-all”.');
    expect(page).not.toContain('Nothing recorded yet');
  });
});

describe('the console health page', () => {
  it('reads the vendor calls and the shed decisions from the metrics', async () => {
    const s = await signIn(OPS_KEY);
    const page = await (await get(s, '/console/health')).text();
    expect(page).toContain('Readiness: ready');
    // alice's and mallory's: none shed.
    expect(page).toMatch(/0 of 2 decisions shed since start/);
    expect(page).toMatch(/<td>signals<\/td><td>new-browser<\/td><td class="num">2<\/td>/);
  });

  it('shows the outbox and each component as tables, not JSON', async () => {
    const s = await signIn(OPS_KEY);
    const page = await (await get(s, '/console/health')).text();
    const stats = await h.riskgate.outbox.store.stats(Date.now());
    expect(page).toContain(`<th scope="row">Pending</th><td class="num">${stats.pending}</td>`);
    expect(page).toContain(`<a href="/console/actions?status=dead">${stats.dead}</a>`);
    // The decision store reports through /healthz: a row group of its own, a fact per leaf.
    expect(page).toMatch(
      /<th scope="rowgroup" rowspan="\d+">decisionStore<\/th><td class="mono">engine<\/td>/,
    );
    expect(page).not.toContain('<pre');
  });
});

describe('the console Lock-outs page', () => {
  it('lists mallory’s lock-out with its rule and decision, filtered by status and user; the decision links to it', async () => {
    const s = await signIn(VIEWER_KEY);
    const page = await (await get(s, `/console/lockouts?status=&userId=${userIds.mallory}`)).text();
    expect(page).toContain(`href="/console/lockouts/${malloryId}"`);
    expect(page).toContain(`href="/console/decisions/${malloryId}"`);
    expect(page).toContain('rat-confirmed');
    // Found by the account the login backend sent as well: mallory's and no other.
    const byAccount = await (await get(s, '/console/lockouts?accountId=mallory')).text();
    expect(byAccount).toContain(`href="/console/lockouts/${malloryId}"`);
    expect(byAccount).toContain('value="mallory"');
    const otherAccount = await (await get(s, '/console/lockouts?accountId=alice')).text();
    expect(otherAccount).not.toContain(`href="/console/lockouts/${malloryId}"`);
    const none = await (await get(s, '/console/lockouts?status=expired')).text();
    expect(none).toContain('No lock-out matches.');
    expect((await get(s, '/console/lockouts?status=gone')).status).toBe(400);
    const decision = await (await get(s, `/console/decisions/${malloryId}`)).text();
    expect(decision).toContain(`href="/console/lockouts/${malloryId}"`);
    const record = await (await get(s, `/console/lockouts/${malloryId}`)).text();
    expect(record).toContain(`href="/console/decisions/${malloryId}"`);
    // A viewer sees no Unlock form, and a POST is refused.
    expect(record).not.toContain('/unlock"');
    const refused = await post(s, `/console/lockouts/${malloryId}/unlock`, { reason: 'r', csrf: s.csrf });
    expect(refused.status).toBe(403);
  });

  it('lets an admin unlock a user: audited, the sandbox user enabled, the record unlocked', async () => {
    // Mallory's lock-out (her deny in beforeAll), delivered by the retry above.
    const id = malloryId;
    await eventually(
      async () => {
        const res = await h.ops(`/lockouts/${id}`);
        return res.status === 200 && ((await res.json()) as { status: string }).status === 'locked'
          ? true
          : undefined;
      },
      { timeoutMs: 20_000, what: 'mallory locked out' },
    );
    expect(await adminUserStatus(h.sandbox, userIds.mallory!)).toBe('locked_out');
    const s = await signIn(OPS_KEY);
    const record = await (await get(s, `/console/lockouts/${id}`)).text();
    expect(record).toContain(`action="/console/lockouts/${id}/unlock"`);
    const empty = await post(s, `/console/lockouts/${id}/unlock`, { reason: ' ', csrf: s.csrf });
    expect(empty.status).toBe(400);
    expect(await empty.text()).toContain('reason');
    const res = await post(s, `/console/lockouts/${id}/unlock`, {
      reason: 'help desk verified her by phone',
      csrf: s.csrf,
    });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe(`/console/lockouts/${id}?unlocked=1`);
    expect((await audited())[0]).toMatchObject({
      actor: 'ada',
      action: 'lockout.unlock',
      target: id,
      detail: { userId: userIds.mallory, reason: 'help desk verified her by phone' },
      // Promised (durably in the outbox), the Admin call made after.
      outcome: { status: 'queued' },
    });
    await eventually(
      async () => ((await adminUserStatus(h.sandbox, userIds.mallory!)) === 'enabled' ? true : undefined),
      {
        timeoutMs: 20_000,
        what: 'mallory enabled',
      },
    );
    const after = await (await get(s, `/console/lockouts/${id}`)).text();
    expect(after).toContain('by ada');
    expect(after).toContain('help desk verified her by phone');
    expect(after).not.toContain('/unlock"');
    // Unlocked already (a second tab, another admin): refused with what ended it, audited refused.
    const again = await post(s, `/console/lockouts/${id}/unlock`, { reason: 'again', csrf: s.csrf });
    expect(again.status).toBe(409);
    expect(await again.text()).toContain('has ended already (unlocked by ada)');
    expect((await audited())[0]).toMatchObject({ action: 'lockout.unlock', outcome: { status: 'refused' } });
  });
});

describe('a console with its own settings', () => {
  let other: Harness;
  beforeAll(async () => {
    other = await startHarness({
      sharedSandbox: h.sandbox,
      env: {
        RISKGATE_OPS_KEYS: OPS_ENTRIES.join(','),
        RISKGATE_CONSOLE_SECURE_COOKIE: 'true',
        RISKGATE_CONSOLE_SESSION_MINUTES: '5',
        RISKGATE_DECISION_STORE: 'off',
        RISKGATE_OPS_PORT: '0',
      },
    });
  });
  afterAll(() => other?.stop());

  it('is served on the ops port alone, when there is one', async () => {
    const ops = other.riskgate.opsUrl!;
    expect((await fetch(`${ops}/console/sign-in`)).status).toBe(200);
    expect((await fetch(`${other.url}/console/sign-in`)).status).toBe(404);
  });

  it('marks the cookie Secure and its lifetime as configured; says when the store is off', async () => {
    const res = await signInAnswer(OPS_KEY, other.riskgate.opsUrl!);
    expect(res.status).toBe(303);
    const set = res.headers.getSetCookie().find((c) => c.startsWith('riskgate_console='))!;
    expect(set).toMatch(/; Max-Age=300; Secure$/);
    const cookie = set.split(';')[0]!;
    const page = await (
      await fetch(`${other.riskgate.opsUrl!}/console/decisions`, { headers: { cookie } })
    ).text();
    expect(page).toContain('The decision store is not running in this riskgate');
  });
});

describe('a console behind an authenticating proxy (single sign-on)', () => {
  let sso: Harness;
  const HEADER = 'x-forwarded-email';
  beforeAll(async () => {
    sso = await startHarness({
      sharedSandbox: h.sandbox,
      env: {
        RISKGATE_OPS_KEYS: OPS_ENTRIES.join(','),
        RISKGATE_TRUSTED_PROXIES: '127.0.0.1',
        RISKGATE_TRUSTED_IDENTITY_HEADER: HEADER,
        RISKGATE_SSO_OPERATORS: 'sam@example.com:analyst',
      },
    });
  });
  afterAll(() => sso?.stop());

  it('signs in the operator the trusted proxy names, once, audited; an unlisted identity is refused, also with a listed one’s cookie', async () => {
    const first = await fetch(`${sso.url}/console/decisions`, {
      headers: { [HEADER]: 'sam@example.com' },
      redirect: 'manual',
    });
    expect(first.status).toBe(200);
    expect(await first.text()).toContain('sam@example.com <span class="tag">analyst</span>');
    const cookie = cookieOf(first, 'riskgate_console')!;
    expect(cookie).toBeDefined();
    const trail = (await (await sso.ops('/audit')).json()) as { entries: AuditEntry[] };
    expect(trail.entries[0]).toMatchObject({
      actor: 'sam@example.com',
      keyId: 'sso',
      action: 'session.sign_in',
      detail: { via: 'sso' },
    });
    // Its cookie holds the session: no new sign-in on the next page.
    const next = await fetch(`${sso.url}/console/rules`, {
      headers: { [HEADER]: 'sam@example.com', cookie },
      redirect: 'manual',
    });
    expect(next.status).toBe(200);
    expect(cookieOf(next, 'riskgate_console')).toBeUndefined();
    const stranger = await fetch(`${sso.url}/console/decisions`, {
      headers: { [HEADER]: 'eve@example.com' },
      redirect: 'manual',
    });
    expect(stranger.status).toBe(403);
    // The proxy says eve is at this browser now: sam's cookie left in it does not make her sam.
    const borrowed = await fetch(`${sso.url}/console/decisions`, {
      headers: { [HEADER]: 'eve@example.com', cookie },
      redirect: 'manual',
    });
    expect(borrowed.status).toBe(403);
    expect(await borrowed.text()).not.toContain('sam@example.com');
    expect(cookieOf(borrowed, 'riskgate_console')).toBe('riskgate_console=');
  });
});

describe('the console export', () => {
  it('exports exactly the decisions the page counts, as CSV and NDJSON, a formula in a field defused', async () => {
    // An account id a spreadsheet would read as a formula (a leading minus): the caller's text.
    // (Last in the file: the decision counts of the pages above do not include it.)
    const hostile = await h.decide({ ...demoRequest('alice', undefined), accountId: '-1-1' });
    expect(hostile.status, JSON.stringify(hostile.body)).toBe(200);
    const hostileId = hostile.body.decisionId as string;
    await eventually(
      async () => ((await h.ops(`/decisions/${hostileId}`)).status === 200 ? true : undefined),
      {
        what: 'the decision in the store',
      },
    );
    const s = await signIn(VIEWER_KEY);
    const page = await (await get(s, '/console/decisions?range=all')).text();
    const counted = Number(/<strong>(\d+)<\/strong><span class="muted">in all/.exec(page)?.[1]);
    expect(counted).toBeGreaterThanOrEqual(3);
    expect(page).toContain('href="/console/decisions.csv?range=all"');
    // The chart over the range: its slices' counts add up to the page's.
    expect(page).toContain('<svg class="timeline" role="img"');
    const charted = [...page.matchAll(/UTC: (\d+) allow, (\d+) challenge, (\d+) deny<\/title>/g)].reduce(
      (n, m) => n + Number(m[1]) + Number(m[2]) + Number(m[3]),
      0,
    );
    expect(charted).toBe(counted);

    const csv = await get(s, '/console/decisions.csv?range=all');
    expect(csv.status).toBe(200);
    expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(csv.headers.get('content-disposition')).toMatch(
      /^attachment; filename="riskgate-decisions-.+\.csv"$/,
    );
    const lines = (await csv.text()).split('\r\n').filter((l) => l !== '');
    expect(lines[0]).toBe(
      'decisionId,at,verdict,score,degraded,rules,accountId,userId,ip,unitId,policy,policyRevision,shadowVerdict,label,totalMs',
    );
    expect(lines).toHaveLength(counted + 1);
    expect(Number(csv.headers.get('x-riskgate-rows'))).toBe(counted);
    const row = lines.find((l) => l.startsWith(hostileId))!;
    expect(row).toContain(`,'-1-1,`);

    const ndjson = await get(s, '/console/decisions.ndjson?range=all&verdict=deny');
    const rows = (await ndjson.text())
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as { verdict: string; decisionId: string });
    expect(rows.length).toBe(Number(ndjson.headers.get('x-riskgate-rows')));
    expect(rows.length).toBeGreaterThanOrEqual(1);
    expect(rows.every((r) => r.verdict === 'deny')).toBe(true);
    expect(rows.map((r) => r.decisionId)).toContain(malloryId);
  });

  it('refuses an export whose filter is not valid, naming the field', async () => {
    const s = await signIn(VIEWER_KEY);
    const res = await get(s, '/console/decisions.csv?verdict=maybe');
    expect(res.status).toBe(400);
    expect(await res.text()).toContain('verdict');
  });
});
