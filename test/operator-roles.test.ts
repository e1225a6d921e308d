import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditMigrations, databaseAuditTrail } from '../src/audit/database-audit-trail.ts';
import { type DatabaseTarget, openDatabase, type RiskgateDatabase } from '../src/database/database.ts';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { keyIdOf } from '../src/edge/caller-auth.ts';
import { CALLER_KEY, type Harness, startHarness } from './decide-harness.ts';
import { PATIENT_DEADLINE_MS, patientShippedPolicy } from './support/patient-policy.ts';

/**
 * Operators with names and roles (issue 25): each RISKGATE_OPS_KEYS entry `name:role:key` is a
 * person with a role (viewer < analyst < admin); a plain key keeps the admin rights it had; an
 * authenticating proxy may name the operator in a header, believed only from its addresses. Every
 * change is in the audit trail, written before it is made; one that cannot be written is refused.
 */

const VIEWER_KEY = 'viewer-key-0123456789abcdef';
const ANALYST_KEY = 'analyst-key-0123456789abcdef';
const ADMIN_KEY = 'admin-key-0123456789abcdef';
const LEGACY_KEY = 'legacy-plain-key-0123456789';
const ALL_KEYS = [VIEWER_KEY, ANALYST_KEY, ADMIN_KEY, LEGACY_KEY, CALLER_KEY];
const OPS_KEYS = `vera:viewer:${VIEWER_KEY},ana:analyst:${ANALYST_KEY},adam:admin:${ADMIN_KEY},${LEGACY_KEY}`;
const SSO_HEADER = 'X-Forwarded-Email';

interface Answer {
  status: number;
  text: string;
  json: () => Record<string, unknown>;
}

async function send(
  url: string,
  method: string,
  path: string,
  o: { key?: string; body?: unknown; headers?: Record<string, string> } = {},
): Promise<Answer> {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: {
      ...(o.key !== undefined && { authorization: `Bearer ${o.key}` }),
      ...(o.body !== undefined && { 'content-type': 'application/json' }),
      ...o.headers,
    },
    ...(o.body !== undefined && { body: JSON.stringify(o.body) }),
  });
  const text = await res.text();
  // No answer ever carries a key, whatever it refuses or grants.
  for (const key of ALL_KEYS) expect(text, `${method} ${path}`).not.toContain(key);
  return { status: res.status, text, json: () => JSON.parse(text) };
}

const label = (key: string | undefined, headers?: Record<string, string>) => (url: string) =>
  send(url, 'POST', '/feedback', {
    ...(key !== undefined && { key }),
    ...(headers !== undefined && { headers }),
    body: { decisionId: randomUUID(), label: 'fraud', note: 'seen in the SOC' },
  });
const retry = (key: string | undefined, headers?: Record<string, string>) => (url: string) =>
  send(url, 'POST', `/actions/${encodeURIComponent('no-such-action')}/retry`, {
    ...(key !== undefined && { key }),
    ...(headers !== undefined && { headers }),
  });

describe('operators with names and roles', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      env: {
        RISKGATE_OPS_KEYS: OPS_KEYS,
        RISKGATE_TRUSTED_PROXIES: '127.0.0.1',
        RISKGATE_TRUSTED_IDENTITY_HEADER: SSO_HEADER,
        RISKGATE_SSO_OPERATORS: 'sam@example.com:admin,val@example.com:viewer',
      },
    });
  });
  afterAll(() => h?.stop());

  it('lets every role read the operator endpoints', async () => {
    for (const key of [VIEWER_KEY, ANALYST_KEY, ADMIN_KEY, LEGACY_KEY]) {
      expect((await send(h.url, 'GET', '/actions', { key })).status).toBe(200);
      expect((await send(h.url, 'GET', '/policies', { key })).status).toBe(200);
    }
  });

  it('refuses a viewer labels and actions: 403 naming the role needed and the operator’s', async () => {
    const labelled = await label(VIEWER_KEY)(h.url);
    expect(labelled.status).toBe(403);
    expect(labelled.json()).toMatchObject({
      code: 'RG_ERR_FORBIDDEN',
      detail: 'This needs the analyst role; operator vera has the viewer role.',
    });
    const retried = await retry(VIEWER_KEY)(h.url);
    expect(retried.status).toBe(403);
    expect(retried.json().detail).toBe('This needs the admin role; operator vera has the viewer role.');
    const dropped = await send(h.url, 'DELETE', '/actions/no-such-action', { key: VIEWER_KEY });
    expect(dropped.status).toBe(403);
  });

  it('lets an analyst label but not retry or drop', async () => {
    const labelled = await label(ANALYST_KEY)(h.url);
    expect(labelled.status).toBe(202);
    expect(labelled.json().labelledBy).toBe(keyIdOf(ANALYST_KEY));
    expect((await retry(ANALYST_KEY)(h.url)).json().detail).toBe(
      'This needs the admin role; operator ana has the analyst role.',
    );
    expect((await send(h.url, 'DELETE', '/actions/x', { key: ANALYST_KEY })).status).toBe(403);
  });

  it('lets an admin, and a plain key as before roles, label, retry and drop (404: no such action)', async () => {
    for (const key of [ADMIN_KEY, LEGACY_KEY]) {
      expect((await label(key)(h.url)).status).toBe(202);
      expect((await retry(key)(h.url)).status).toBe(404);
      expect((await send(h.url, 'DELETE', '/actions/x', { key })).status).toBe(404);
    }
  });

  it('keeps a caller key’s rights: it labels its own decisions, and never an action', async () => {
    const decision = await h.decide({ accountId: 'alice', platform: 'browser' });
    const own = await send(h.url, 'POST', '/feedback', {
      key: CALLER_KEY,
      body: { decisionId: decision.body.decisionId, label: 'legit' },
    });
    expect(own.status).toBe(202);
    expect((await retry(CALLER_KEY)(h.url)).status).toBe(401);
  });

  it('takes the operator a trusted proxy names in its header, with that operator’s role', async () => {
    const sam = { [SSO_HEADER]: 'Sam@example.com' };
    expect((await send(h.url, 'GET', '/actions', { headers: sam })).status).toBe(200);
    expect((await retry(undefined, sam)(h.url)).status).toBe(404);
    const val = { [SSO_HEADER]: 'val@example.com' };
    expect((await retry(undefined, val)(h.url)).json().detail).toBe(
      'This needs the admin role; operator val@example.com has the viewer role.',
    );
    const stranger = await send(h.url, 'GET', '/actions', { headers: { [SSO_HEADER]: 'eve@example.com' } });
    expect(stranger.status).toBe(403);
    expect(stranger.json().detail).toContain('RISKGATE_SSO_OPERATORS');
    // A wrong key is refused even from the proxy: the header is no fallback for a bad key.
    expect(
      (await send(h.url, 'GET', '/actions', { key: 'wrong-key-0123456789abc', headers: sam })).status,
    ).toBe(401);
    // On the caller surface (/feedback) only keys count: the header vouches for no one there.
    const label = await send(h.url, 'POST', '/feedback', {
      headers: sam,
      body: JSON.stringify({ decisionId: crypto.randomUUID(), label: 'fraud' }),
    });
    expect(label.status).toBe(401);
  });
});

type Entry = Record<string, unknown>;

async function auditOf(url: string, query: string): Promise<Entry[]> {
  const page = await send(url, 'GET', `/audit?${query}`, { key: VIEWER_KEY });
  expect(page.status).toBe(200);
  return page.json().entries as Entry[];
}

/** A pending lock-out: mallory's deny while the Admin API hangs (the caller undoes the fault). */
async function pendingLockOut(h: Harness): Promise<string> {
  const { mallory } = await lookUpUserIds(h.sandbox, ['mallory']);
  await h.control('PUT', '/sandbox/faults', { rules: [{ route: 'PUT /srv/admin/v1/users/*', hang: true }] });
  const deny = await h.decide(demoRequest('mallory', mallory));
  expect(deny.body.verdict).toBe('deny');
  return `${deny.body.decisionId}:lock_out_user:${mallory}`;
}

describe('the audit trail of operators’ changes', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      // mallory's deny (pendingLockOut) rests on her signals, however busy the machine.
      policy: { yaml: patientShippedPolicy() },
      deadlineMs: PATIENT_DEADLINE_MS,
      env: {
        RISKGATE_OPS_KEYS: OPS_KEYS,
        RISKGATE_TRUSTED_PROXIES: '127.0.0.1',
        RISKGATE_TRUSTED_IDENTITY_HEADER: SSO_HEADER,
        RISKGATE_SSO_OPERATORS: 'sam@example.com:admin',
      },
    });
  });
  afterAll(() => h?.stop());

  it('records a label with who, their role and key id, the decision, the label and note, and from where', async () => {
    const decisionId = randomUUID();
    const answer = await send(h.url, 'POST', '/feedback', {
      key: ANALYST_KEY,
      body: { decisionId, label: 'fraud', note: 'seen in the SOC' },
    });
    expect(answer.status).toBe(202);
    expect(await auditOf(h.url, `target=${decisionId}`)).toEqual([
      {
        id: expect.stringMatching(/^[0-9a-f]{24}$/),
        at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
        actor: 'ana',
        role: 'analyst',
        keyId: keyIdOf(ANALYST_KEY),
        action: 'decision.label',
        target: decisionId,
        from: '127.0.0.1',
        detail: { label: 'fraud', note: 'seen in the SOC' },
        // Written after the label was recorded, beside its intent (issue 30).
        outcome: { status: 'done', at: expect.stringMatching(/Z$/) },
      },
    ]);
  });

  it('records an action dropped and retried, and a policy reload, by an admin; a plain key by its key id', async () => {
    const id = await pendingLockOut(h);
    try {
      const path = `/actions/${encodeURIComponent(id)}`;
      expect((await send(h.url, 'DELETE', path, { key: ADMIN_KEY })).status).toBe(200);
      await h.control('DELETE', '/sandbox/faults');
      expect((await send(h.url, 'POST', `${path}/retry`, { key: LEGACY_KEY })).status).toBe(200);
    } finally {
      await h.control('DELETE', '/sandbox/faults');
    }
    const changes = await auditOf(h.url, `target=${encodeURIComponent(id)}`);
    expect(changes).toMatchObject([
      {
        actor: keyIdOf(LEGACY_KEY),
        role: 'admin',
        keyId: keyIdOf(LEGACY_KEY),
        action: 'action.retry',
        target: id,
      },
      { actor: 'adam', role: 'admin', action: 'action.drop', target: id, detail: { status: 'pending' } },
    ]);
    expect((await send(h.url, 'POST', '/policies/reload', { key: ADMIN_KEY })).json()).toMatchObject({
      ok: true,
    });
    expect(await auditOf(h.url, 'action=policy.reload')).toMatchObject([
      { actor: 'adam', action: 'policy.reload', target: 'login', from: '127.0.0.1' },
    ]);
    // The analyst may not reload; the refusal is not a change.
    expect((await send(h.url, 'POST', '/policies/reload', { key: ANALYST_KEY })).status).toBe(403);
    expect(await auditOf(h.url, 'action=policy.reload')).toHaveLength(1);
  });

  it('records the address a trusted proxy saw (its last X-Forwarded-For hop), and an SSO operator as sso', async () => {
    const id = await pendingLockOut(h);
    try {
      const path = `/actions/${encodeURIComponent(id)}`;
      expect(
        (
          await send(h.url, 'DELETE', path, {
            headers: {
              [SSO_HEADER]: 'sam@example.com',
              // The client wrote the first hop itself; the proxy appended the address it saw.
              'x-forwarded-for': '203.0.113.66, 198.51.100.7',
            },
          })
        ).status,
      ).toBe(200);
    } finally {
      await h.control('DELETE', '/sandbox/faults');
    }
    expect(await auditOf(h.url, 'actor=sam@example.com&action=action.drop')).toMatchObject([
      {
        actor: 'sam@example.com',
        role: 'admin',
        keyId: 'sso',
        action: 'action.drop',
        target: id,
        from: '198.51.100.7',
      },
    ]);
  });

  it('pages newest first by cursor, and filters by actor', async () => {
    for (let i = 0; i < 3; i++) expect((await label(VIEWER_KEY)(h.url)).status).toBe(403);
    const labels = [];
    for (let i = 0; i < 3; i++) {
      const decisionId = randomUUID();
      await send(h.url, 'POST', '/feedback', { key: ANALYST_KEY, body: { decisionId, label: 'fraud' } });
      labels.push(decisionId);
    }
    const first = await send(h.url, 'GET', '/audit?actor=ana&limit=2', { key: VIEWER_KEY });
    const { entries, nextCursor } = first.json() as { entries: Entry[]; nextCursor: string };
    expect(entries.map((e) => e.target)).toEqual([labels[2], labels[1]]);
    const rest = await auditOf(h.url, `actor=ana&limit=2&cursor=${nextCursor}`);
    expect(rest.map((e) => e.target)).toEqual([labels[0], expect.any(String)]);
    expect(await auditOf(h.url, 'actor=vera')).toEqual([]);
  });

  it('writes no key in an answer (checked on every one) nor in a service log line', () => {
    const logged = JSON.stringify(h.serviceLog);
    for (const key of ALL_KEYS) expect(logged).not.toContain(key);
  });
});

describe('a change the audit trail cannot record', () => {
  let h: Harness;
  let database: RiskgateDatabase;
  beforeAll(async () => {
    // The audit trail on a database of its own, which goes away under it: the outbox, in the
    // control database beside it in production, stays readable, so "not made" can be checked.
    database = await openDatabase({ kind: 'memory' } satisfies DatabaseTarget, {
      migrations: auditMigrations,
    });
    h = await startHarness({
      policy: { yaml: patientShippedPolicy() },
      deadlineMs: PATIENT_DEADLINE_MS,
      env: { RISKGATE_OPS_KEYS: OPS_KEYS },
      riskgate: { audit: databaseAuditTrail(database) },
    });
  });
  afterAll(() => h?.stop());

  it('is refused 503 RG_ERR_AUDIT_UNAVAILABLE and not made: no label, the lock-out still pending, no reload', async () => {
    const id = await pendingLockOut(h);
    try {
      await database.close(); // the audit trail's database goes away under it
      const decisionId = randomUUID();
      const labelled = await send(h.url, 'POST', '/feedback', {
        key: ADMIN_KEY,
        body: { decisionId, label: 'fraud' },
      });
      const path = `/actions/${encodeURIComponent(id)}`;
      const dropped = await send(h.url, 'DELETE', path, { key: ADMIN_KEY });
      const reloaded = await send(h.url, 'POST', '/policies/reload', { key: ADMIN_KEY });
      for (const refused of [labelled, dropped, reloaded]) {
        expect(refused.status).toBe(503);
        expect(refused.json()).toMatchObject({
          code: 'RG_ERR_AUDIT_UNAVAILABLE',
          detail: 'The audit trail cannot record this change, so it was not made.',
        });
      }
      expect(h.lines.filter((l) => l.kind === 'feedback' && l.decisionId === decisionId)).toEqual([]);
      const pending = await send(h.url, 'GET', '/actions?status=pending', { key: ADMIN_KEY });
      expect((pending.json().actions as Entry[]).map((a) => a.id)).toContain(id);
      expect(h.serviceLog).toContainEqual(
        expect.objectContaining({ level: 'error', msg: 'audit trail write failed: change refused' }),
      );
      // Reading the trail says so too; a caller key's own label is no operator change, and goes on.
      expect((await send(h.url, 'GET', '/audit', { key: VIEWER_KEY })).status).toBe(503);
    } finally {
      await h.control('DELETE', '/sandbox/faults');
    }
  });
});

describe('a trusted identity header from an address that is not a trusted proxy', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      env: {
        RISKGATE_OPS_KEYS: OPS_KEYS,
        RISKGATE_TRUSTED_PROXIES: '10.9.9.9',
        RISKGATE_TRUSTED_IDENTITY_HEADER: SSO_HEADER,
        RISKGATE_SSO_OPERATORS: 'sam@example.com:admin',
      },
    });
  });
  afterAll(() => h?.stop());

  it('is ignored: the request is unauthenticated (anyone reaching the port could forge it)', async () => {
    const forged = await send(h.url, 'GET', '/actions', { headers: { [SSO_HEADER]: 'sam@example.com' } });
    expect(forged.status).toBe(401);
    expect((await retry(undefined, { [SSO_HEADER]: 'sam@example.com' })(h.url)).status).toBe(401);
  });

  it('takes the socket’s address as where a change came from, whatever X-Forwarded-For says', async () => {
    const decisionId = randomUUID();
    const answer = await send(h.url, 'POST', '/feedback', {
      key: ADMIN_KEY,
      headers: { 'x-forwarded-for': '198.51.100.7' },
      body: { decisionId, label: 'fraud' },
    });
    expect(answer.status).toBe(202);
    expect(await auditOf(h.url, `target=${decisionId}`)).toMatchObject([{ from: '127.0.0.1' }]);
  });
});
