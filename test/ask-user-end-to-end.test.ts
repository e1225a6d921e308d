import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { SteppedClock } from '../src/timing/driven-clock.ts';
import { type Harness, startHarness } from './decide-harness.ts';
import { eventually } from './support/eventually.ts';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver.ts';

/**
 * "Was this you?" played as the user (docs/ask-user.md): a running riskgate over the sandbox, a
 * webhook receiver on port 0 that gets the challenge's event with its link; the test opens the
 * link, answers, and reads what changed: the decision's outcome line (its label) and the outbox.
 */

const POLICY = `apiVersion: riskgate/v1
kind: Policy
name: ask-user
description: bob is challenged and asked; mallory is challenged and not asked
thresholds: { challenge: 40, deny: 80 }
actions:
  lockOut: { type: lock_out_user, duration: 1h }
askUser: { onNo: [lockOut] }
rules:
  - { id: challenge-bob, description: c, when: 'request.accountId.startsWith("bob")', verdict: challenge, askUser: true }
  - { id: challenge-mallory, description: m, when: 'request.accountId == "mallory"', verdict: challenge }
`;

const TTL_MS = 60_000;
let h: Harness;
let receiver: WebhookReceiver;
const clock = new SteppedClock();

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  h = await startHarness({
    policy: { yaml: POLICY },
    riskgate: { clock },
    env: {
      RISKGATE_WEBHOOK_URLS: receiver.url(),
      RISKGATE_WEBHOOK_SECRET: 'an-end-to-end-webhook-secret-of-40-chars',
      RISKGATE_WEBHOOK_EVENTS: 'decision.challenged',
      RISKGATE_ASK_USER_SECRET: 'an-ask-user-secret-of-at-least-32-characters',
      RISKGATE_ASK_USER_BASE_URL: 'https://risk.example.com/',
      RISKGATE_ASK_USER_TTL_MS: String(TTL_MS),
    },
  });
});
afterAll(async () => {
  await h?.stop();
  await receiver?.close();
});

/** The event of `decisionId` as the receiver got it. */
async function eventOf(decisionId: unknown): Promise<{ data: Record<string, unknown> }> {
  let found: { data: Record<string, unknown> } | undefined;
  await eventually(
    () => {
      found = receiver.received
        .map((d) => JSON.parse(Buffer.from(d.body).toString('utf8')) as { data: Record<string, unknown> })
        .find((e) => e.data.decisionId === decisionId);
      return found !== undefined;
    },
    { what: `the event of ${String(decisionId)}` },
  );
  return found!;
}

/** The link's URL on this riskgate (the event names the public base URL). */
async function linkOf(decisionId: unknown): Promise<{ url: string; public: string }> {
  const event = await eventOf(decisionId);
  const link = event.data.askUser as { url: string; expiresAt: string };
  expect(link.url).toMatch(/^https:\/\/risk\.example\.com\/ask-user\/[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}$/);
  return { public: link.url, url: `${h.url}${new URL(link.url).pathname}` };
}

const answer = (url: string, value: string) =>
  fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: `answer=${value}`,
  });

/** The outbox's entries of `decisionId` but its event's delivery: its actions. */
const actionsOf = async (decisionId: unknown) =>
  (await h.queued({ decisionId })).filter((e) => e.spec.type !== 'deliver_webhook');

const outcomeLines = (decisionId: unknown) =>
  h.lines.filter((l) => l.kind === 'outcome' && l.decisionId === decisionId);

describe('"was this you?" played by the user', () => {
  it('answering no once labels the decision and queues the lock-out; a second answer changes nothing', async () => {
    const decided = await h.decide(demoRequest('bob', 'u-bob'));
    expect(decided.body.verdict).toBe('challenge');
    const { decisionId } = decided.body;
    const link = await linkOf(decisionId);
    // The token says nothing of the decision.
    const token = link.public.split('/').pop()!;
    for (const secret of [String(decisionId), 'u-bob', 'bob', 'challenge'])
      expect(Buffer.from(token.split('.')[0]!, 'base64url').toString('latin1')).not.toContain(secret);
    expect(await actionsOf(decisionId)).toEqual([]);

    // GET shows the question and changes nothing (twice: a mail scanner's prefetch).
    for (let i = 0; i < 2; i++) {
      const page = await fetch(link.url);
      expect(page.status).toBe(200);
      expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
      expect(page.headers.get('referrer-policy')).toBe('no-referrer');
      const html = await page.text();
      expect(html).toContain('Was this you?');
      expect(html).not.toContain('<script');
      expect(html).not.toContain(String(decisionId));
    }
    expect(outcomeLines(decisionId)).toEqual([]);

    const answered = await answer(link.url, 'no');
    expect(answered.status).toBe(200);
    expect(await answered.text()).toContain('locking your account');
    expect(outcomeLines(decisionId)).toMatchObject([
      { type: 'ask_user', value: 'no', reportedBy: 'ask-user' },
    ]);
    const queued = await actionsOf(decisionId);
    expect(queued.map((e) => e.spec.type).sort()).toEqual(['lock_out_user', 'unlock_user']);
    expect(queued.find((e) => e.spec.type === 'lock_out_user')?.spec.target).toBe('u-bob');

    // Twice: refused with a clear page, nothing changed.
    for (const again of ['no', 'yes']) {
      const refused = await answer(link.url, again);
      expect(refused.status).toBe(409);
      const html = await refused.text();
      expect(html).toContain('already used');
      expect(html).toContain('Nothing was changed');
    }
    expect((await fetch(link.url)).status).toBe(409);
    expect(outcomeLines(decisionId)).toHaveLength(1);
    expect(await actionsOf(decisionId)).toHaveLength(2);
  });

  it('takes one of three answers sent at once: its lock-out and label once, the others refused', async () => {
    const decided = await h.decide(demoRequest('bob', 'u-bob'));
    expect(decided.body.verdict).toBe('challenge');
    const { decisionId } = decided.body;
    const link = await linkOf(decisionId);
    const answers = await Promise.all(['no', 'no', 'no'].map((v) => answer(link.url, v)));
    expect(answers.map((r) => r.status).sort()).toEqual([200, 409, 409]);
    // The winner's answer and its lock-out committed together; the losers' appends rolled back.
    expect(outcomeLines(decisionId)).toHaveLength(1);
    const queued = await actionsOf(decisionId);
    expect(queued.map((e) => e.spec.type).sort()).toEqual(['lock_out_user', 'unlock_user']);
  });

  it('refuses a changed token with a clear page and changes nothing', async () => {
    const decided = await h.decide(demoRequest('bob-2', 'u-bob-2'));
    const { decisionId } = decided.body;
    const link = await linkOf(decisionId);
    const last = link.url.at(-1)!;
    const changed = `${link.url.slice(0, -1)}${last === 'A' ? 'B' : 'A'}`;
    for (const url of [
      changed,
      `${link.url}x`,
      `${h.url}/ask-user/nothing`,
      `${h.url}/ask-user/${'a'.repeat(5000)}`,
    ]) {
      const refused = await answer(url, 'no');
      expect(refused.status, url.slice(0, 120)).toBe(404);
      expect(await refused.text()).toContain('not valid');
      expect((await fetch(url)).status).toBe(404);
    }
    const bad = await answer(link.url, 'maybe');
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain('Nothing was changed');
    expect(outcomeLines(decisionId)).toEqual([]);
    expect(await actionsOf(decisionId)).toEqual([]);
    // The untouched link still works: a yes labels it legit and takes no action.
    const yes = await answer(link.url, 'yes');
    expect(yes.status).toBe(200);
    expect(outcomeLines(decisionId)).toMatchObject([{ type: 'ask_user', value: 'yes' }]);
    expect(await actionsOf(decisionId)).toEqual([]);
  });

  it('refuses an answer after the link expired, and changes nothing', async () => {
    const decided = await h.decide(demoRequest('bob-3', 'u-bob-3'));
    const { decisionId } = decided.body;
    const link = await linkOf(decisionId);
    clock.step(TTL_MS + 1);
    const refused = await answer(link.url, 'no');
    expect(refused.status).toBe(410);
    expect(await refused.text()).toContain('expired');
    expect((await fetch(link.url)).status).toBe(410);
    expect(outcomeLines(decisionId)).toEqual([]);
    expect(await actionsOf(decisionId)).toEqual([]);
    // Expired, it is kept (its page says so) until the pruning's keep has passed: none pruned yet.
    const metrics = await (await h.ops('/metrics')).text();
    expect(metrics).toMatch(/^riskgate_ask_user_links_pruned(_total)? 0$/m);
    expect(metrics).toMatch(/^riskgate_ask_user_prune_failures(_total)? 0$/m);
  });

  it('sends no link for a rule that does not ask', async () => {
    const decided = await h.decide(demoRequest('mallory', 'u-mallory'));
    const event = await eventOf(decided.body.decisionId);
    expect(event.data.askUser).toBeUndefined();
  });
});
