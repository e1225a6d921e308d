import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../src/database/database.ts';
import { demoRequest } from '../src/dev/demo-requests.ts';
import type { AuditEntry } from '../src/operators/audit-trail.ts';
import { ALL_MIGRATIONS } from '../src/service/database-migrations.ts';
import { type Harness, OPS_KEY, startHarness } from './decide-harness.ts';
import { eventually } from './support/eventually.ts';
import { LIST_POLICY } from './support/list-policy.ts';
import { describeOnPostgres, oneRiskgateOn } from './support/postgres-server.ts';

/**
 * Issue 30: text riskgate cannot store is refused at the edge. U+0000 (PostgreSQL refuses it), a
 * lone surrogate (not UTF-8) and the other control characters in a note, a reason, a list value,
 * an id or a filter are a 400 naming the field on every endpoint that keeps or looks them up, on
 * SQLite and on PostgreSQL, and nothing of the request reaches the database: the lists and the
 * audit trail are as they were. A note's or a reason's line breaks and tabs pass. /decide is the
 * exception by design: its free text is the end user's, so a hostile user agent never turns a
 * login into a 400 (a way around the gate); it is decided on and kept escaped in the decision line.
 */

const NUL = '\u0000';
const C1 = '\u0085';
const LONE = '\ud800';

interface Problem {
  status: number;
  code?: string;
  field?: string;
  detail?: string;
}

function ops(h: Harness, method: string, path: string, body?: unknown, contentType = 'application/json') {
  return fetch(`${h.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${OPS_KEY}`,
      ...(body !== undefined && { 'content-type': contentType }),
    },
    ...(body !== undefined && { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
}

/** Every endpoint that keeps (or looks up) operator text, each sent an unstorable one: [what, method, path, body, field]. */
const REFUSED: readonly [string, string, string, unknown, string][] = [
  [
    'a list value with U+0000',
    'POST',
    '/lists/trustedAccounts/entries',
    { value: `a${NUL}b`, reason: 'r' },
    'value',
  ],
  [
    'a list value with a C1 control',
    'POST',
    '/lists/trustedAccounts/entries',
    { value: `a${C1}`, reason: 'r' },
    'value',
  ],
  [
    'a list value with a lone surrogate',
    'POST',
    '/lists/trustedAccounts/entries',
    { value: `a${LONE}`, reason: 'r' },
    'value',
  ],
  [
    'a list reason with U+0000',
    'POST',
    '/lists/blockedNetworks/entries',
    { value: '192.0.2.1', reason: `r${NUL}` },
    'reason',
  ],
  [
    'a list reason with a lone surrogate',
    'POST',
    '/lists/blockedNetworks/entries',
    { value: '192.0.2.1', reason: LONE },
    'reason',
  ],
  [
    'an import value with U+0000',
    'POST',
    '/lists/trustedAccounts/import',
    [
      { value: 'ok', reason: 'r' },
      { value: `x${NUL}`, reason: 'r' },
    ],
    '1.value',
  ],
  [
    'an import reason (query) with U+0000',
    'POST',
    `/lists/trustedAccounts/import?reason=r%00`,
    [{ value: 'ok' }],
    'reason',
  ],
  [
    'a removal value with U+0000',
    'DELETE',
    '/lists/trustedAccounts/entries/acct%00?reason=r',
    undefined,
    'value',
  ],
  [
    'a removal reason with U+0000',
    'DELETE',
    '/lists/trustedAccounts/entries/acct?reason=r%00',
    undefined,
    'reason',
  ],
  ['a list page cursor with U+0000', 'GET', '/lists/trustedAccounts?cursor=a%00', undefined, 'cursor'],
  [
    'an unlock reason with U+0000',
    'POST',
    '/lockouts/some-lockout/unlock',
    { reason: `verified${NUL}` },
    'reason',
  ],
  ['an unlock of a lock-out id with U+0000', 'POST', '/lockouts/x%00/unlock', { reason: 'verified' }, 'id'],
  ['a lock-out id with U+0000', 'GET', '/lockouts/x%00', undefined, 'id'],
  ['a lock-outs filter with U+0000', 'GET', '/lockouts?userId=u%00', undefined, 'userId'],
  ['a retry of an action id with U+0000', 'POST', '/actions/a%00/retry', undefined, 'id'],
  ['a drop of an action id with a C1 control', 'DELETE', '/actions/a%C2%85', undefined, 'id'],
  ['an audit filter with U+0000', 'GET', '/audit?target=t%00', undefined, 'target'],
  ['a decisions filter with U+0000', 'GET', '/decisions?accountId=a%00', undefined, 'accountId'],
  [
    'a feedback note with U+0000',
    'POST',
    '/feedback',
    { decisionId: crypto.randomUUID(), label: 'fraud', note: `n${NUL}` },
    'note',
  ],
  [
    'a feedback note with a lone surrogate',
    'POST',
    '/feedback',
    { decisionId: crypto.randomUUID(), label: 'fraud', note: LONE },
    'note',
  ],
];

function refusesWhatItCannotStore(start: () => Promise<{ h: Harness; stop: () => Promise<void> }>) {
  let h: Harness;
  let stop: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    ({ h, stop } = await start());
  }, 60_000);
  afterAll(() => stop?.());

  const trail = async () =>
    ((await (await ops(h, 'GET', '/audit?limit=500')).json()) as { entries: AuditEntry[] }).entries;
  const values = async (list: string) =>
    ((await (await ops(h, 'GET', `/lists/${list}`)).json()) as { items: { value: string; reason: string }[] })
      .items;

  it.each(REFUSED)(
    'refuses %s with a 400 naming the field, and keeps nothing',
    async (_what, method, path, body, field) => {
      const [auditBefore, accountsBefore, networksBefore] = await Promise.all([
        trail(),
        values('trustedAccounts'),
        values('blockedNetworks'),
      ]);
      const res = await ops(h, method, path, body);
      expect(res.status).toBe(400);
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      const problem = (await res.json()) as Problem;
      expect(problem).toMatchObject({ code: 'RG_ERR_INVALID_INPUT', field });
      expect(problem.detail).toMatch(/control characters|lone surrogate/);
      expect(await trail()).toEqual(auditBefore);
      expect(await values('trustedAccounts')).toEqual(accountsBefore);
      expect(await values('blockedNetworks')).toEqual(networksBefore);
      // No database ever saw the byte: nothing failed behind the 400.
      expect(h.serviceLog.filter((l) => l.level === 'error')).toEqual([]);
    },
  );

  it('keeps a reason written on several lines, with a tab, as it was typed', async () => {
    const reason = 'first line\nsecond line\r\n\tindented';
    const res = await ops(h, 'POST', '/lists/trustedAccounts/entries', { value: 'acct-lines', reason });
    expect(res.status).toBe(201);
    expect((await values('trustedAccounts')).find((e) => e.value === 'acct-lines')?.reason).toBe(reason);
    expect((await trail())[0]).toMatchObject({ action: 'list.add', detail: { reason } });
  });

  it('decides a login whose user agent carries U+0000, a C1 control and a lone surrogate as it would without them, and stores it', async () => {
    expect(
      (await ops(h, 'POST', '/lists/blockedNetworks/entries', { value: '203.0.113.0/24', reason: 'r' }))
        .status,
    ).toBe(201);
    const hostile = `Mozilla/5.0${NUL}${C1}${LONE} (X11)`;
    const request = { ...demoRequest('alice', undefined), ip: '203.0.113.9' };
    const quiet = await h.decide(request);
    const answer = await h.decide({ ...request, userAgent: hostile, context: { note: `x${NUL}` } });
    expect(answer.status).toBe(200);
    expect(answer.body.verdict).toBe('deny');
    expect(answer.body.verdict).toBe(quiet.body.verdict);
    // The decision store keeps it (escaped inside the decision line), on SQLite and PostgreSQL.
    const id = answer.body.decisionId as string;
    const stored = await eventually(
      async () => {
        const res = await ops(h, 'GET', `/decisions/${id}`);
        return res.status === 200
          ? ((await res.json()) as { line: { request: Record<string, unknown> } })
          : undefined;
      },
      { what: 'the decision stored' },
    );
    expect(stored.line.request.userAgent).toBe(hostile);
    const status = (await (await ops(h, 'GET', '/healthz')).json()) as Record<string, unknown>;
    expect(JSON.stringify(status)).not.toMatch(/invalid byte sequence/);
  });
}

describe('unstorable text on SQLite', () => {
  refusesWhatItCannotStore(async () => {
    const database = await openDatabase({ kind: 'memory' }, { migrations: ALL_MIGRATIONS });
    const h = await startHarness({ policy: { yaml: LIST_POLICY }, riskgate: { database } });
    return {
      h,
      stop: async () => {
        await h.stop();
        await database.close();
      },
    };
  });
});

describeOnPostgres('unstorable text on PostgreSQL', (pg) => {
  refusesWhatItCannotStore(async () => {
    const h = await startHarness({ policy: { yaml: LIST_POLICY }, env: oneRiskgateOn(pg.url) });
    return { h, stop: () => h.stop() };
  });
});
