import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AskUserStore } from '../src/ask-user/ask-user-store.ts';
import { tokenCodec } from '../src/ask-user/ask-user-token.ts';
import { riskgateVersion } from '../src/build-info/riskgate-version.ts';
import { signCallbackBody } from '../src/callbacks/jws-signature.ts';
import { openDatabase } from '../src/database/database.ts';
import { CONTROL_FILE } from '../src/database/state-files.ts';
import type { DecisionLog } from '../src/decision-log/decision-log.ts';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { declarationOf } from '../src/edge/route-declaration.ts';
import { OPENAPI_FILE } from '../src/openapi/openapi-document.ts';
import { CONTROL_MIGRATIONS } from '../src/service/database-migrations.ts';
import { CALLER_KEY, type Harness, OPS_KEY, startHarness } from './decide-harness.ts';
import { eventually } from './support/eventually.ts';
import { LIST_POLICY } from './support/list-policy.ts';
import {
  type Answer,
  createAnswerValidator,
  documentedOperations,
  documentedPath,
  type OpenApiDocument,
} from './support/openapi-validator.ts';
import { PATIENT_DEADLINE_MS, patientShippedPolicy } from './support/patient-policy.ts';

/**
 * The OpenAPI document (issue 24, item 4): it covers every route riskgate serves, the committed
 * docs/openapi.json is what riskgate serves and what `npm run openapi` writes, and real answers of
 * every route, successes and refusals, conform to it (status documented, body valid).
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));

const committed = async () => JSON.parse(await readFile(join(ROOT, OPENAPI_FILE), 'utf8')) as OpenApiDocument;

const SECOND_ADMIN_KEY = 'second-admin-key-0123456789';
const ASK_USER_SECRET = 'the-contract-test-ask-user-secret-0123456789';
let h: Harness;
let doc: OpenApiDocument;
let violations: (answer: Answer) => string[];
/** Every answer checked, as `METHOD /template status`. */
const checked: string[] = [];

beforeAll(async () => {
  h = await startHarness({
    // Patient timeouts: mallory's deny below (an action to drop and retry) rests on her signals,
    // however busy the machine.
    policy: { yaml: patientShippedPolicy() },
    deadlineMs: PATIENT_DEADLINE_MS,
    riskgate: { version: riskgateVersion() },
    // A second admin: a policy version is approved by someone other than its author.
    env: {
      RISKGATE_OPS_KEYS: `${OPS_KEY},second:admin:${SECOND_ADMIN_KEY}`,
      RISKGATE_ASK_USER_SECRET: ASK_USER_SECRET,
      RISKGATE_ASK_USER_BASE_URL: 'https://risk.example.com',
    },
  });
  doc = await committed();
  violations = createAnswerValidator(doc);
});
afterAll(() => h?.stop());

/** Sends a request to `base` and checks its answer against the document; returns it. */
async function call(
  base: string,
  method: string,
  path: string,
  init: {
    key?: string | undefined;
    body?: string | ReadableStream<Uint8Array>;
    contentType?: string;
    headers?: Record<string, string>;
  } = {},
): Promise<{ status: number; headers: Headers; text: string; json: () => Record<string, unknown> }> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      ...(init.key !== undefined && { authorization: `Bearer ${init.key}` }),
      ...(init.body !== undefined && { 'content-type': init.contentType ?? 'application/json' }),
      ...init.headers,
    },
    ...(init.body !== undefined && { body: init.body, duplex: 'half' as const }),
  });
  const text = await res.text();
  const answer = {
    method,
    path: path.split('?')[0]!,
    status: res.status,
    contentType: res.headers.get('content-type'),
    text,
  };
  expect(violations(answer), `${method} ${path}`).toEqual([]);
  checked.push(`${method} ${documentedPath(doc, answer.path)} ${res.status}`);
  return { status: res.status, headers: res.headers, text, json: () => JSON.parse(text) };
}

describe('the OpenAPI document', () => {
  it('documents every route riskgate serves, and serves every route it documents', () => {
    const served = new Set(
      h.riskgate.app.routes
        // The console's pages are HTML for a browser (README, "Console"), not the API.
        .filter((r) => r.method !== 'ALL' && r.path !== '/console' && !r.path.startsWith('/console/'))
        .map((r) => `${r.method} ${r.path.replace(/:(\w+)/g, '{$1}')}`),
    );
    expect(served.size).toBeGreaterThanOrEqual(12);
    expect(new Set(documentedOperations(doc))).toEqual(served);
  });

  it('serves no route but through its declaration: each handler is registered by the declaration of its method and path', () => {
    const api = h.riskgate.app.routes.filter(
      (r) => r.method !== 'ALL' && r.path !== '/console' && !r.path.startsWith('/console/'),
    );
    const undeclared = new Map<string, boolean>();
    for (const r of api) {
      const key = `${r.method} ${r.path}`;
      const declared = declarationOf(r.handler);
      const matches =
        declared !== undefined && declared.method.toUpperCase() === r.method && declared.honoPath === r.path;
      undeclared.set(key, (undeclared.get(key) ?? false) || matches);
    }
    expect(undeclared.size).toBeGreaterThanOrEqual(12);
    // A route registered with app.get/app.post beside a declaration has no handler carrying one.
    expect([...undeclared].filter(([, ok]) => !ok).map(([key]) => key)).toEqual([]);
  });

  it('names, in the description of every body with a size limit, that limit', () => {
    const limited = new Map<string, string | undefined>();
    for (const r of h.riskgate.app.routes) {
      const declared = declarationOf(r.handler);
      const maxBytes = declared?.body?.maxBytes;
      if (declared === undefined || maxBytes === undefined) continue;
      const operation = doc.paths[declared.path]?.[declared.method] as
        | { requestBody?: { description?: string } }
        | undefined;
      const description = operation?.requestBody?.description;
      limited.set(
        `${declared.method} ${declared.path}`,
        description?.includes(`${maxBytes} bytes`) ? 'named' : description,
      );
    }
    expect(limited.size).toBeGreaterThanOrEqual(15);
    expect([...limited].filter(([, named]) => named !== 'named')).toEqual([]);
  });

  it('is what riskgate serves at /openapi.json and what `npm run openapi` writes', async () => {
    const servedDoc = await (await h.ops('/openapi.json')).json();
    expect(servedDoc, `${OPENAPI_FILE} is stale: run npm run openapi`).toEqual(doc);

    const dir = await mkdtemp(join(tmpdir(), 'riskgate-openapi-'));
    try {
      const out = join(dir, 'openapi.json');
      await new Promise<void>((resolve, reject) =>
        execFile(
          process.execPath,
          ['--import', 'tsx', 'src/service/write-openapi-file.ts', out],
          { cwd: ROOT, timeout: 30_000 },
          (error) => (error ? reject(error) : resolve()),
        ),
      );
      const written = await readFile(out, 'utf8');
      expect(
        await readFile(join(ROOT, OPENAPI_FILE), 'utf8'),
        `${OPENAPI_FILE} is stale: run npm run openapi`,
      ).toBe(written);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("names the package's version and license, and where riskgate listens", async () => {
    const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as {
      version: string;
      license: string;
    };
    const d = doc as unknown as {
      info: { version: string; license: { identifier: string } };
      servers: { url: string }[];
    };
    expect(d.info.version).toBe(pkg.version);
    expect(d.info.license.identifier).toBe(pkg.license);
    expect(d.servers.length).toBeGreaterThan(0);
  });

  it('refers only to components it has, and names each operation once', () => {
    const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"#\/([^"]+)"/g)].map((m) => m[1]!);
    expect(refs.length).toBeGreaterThan(0);
    for (const ref of new Set(refs)) {
      const target = ref
        .split('/')
        .reduce<unknown>((node, key) => (node as Record<string, unknown>)?.[key], doc);
      expect(target, ref).toBeTypeOf('object');
    }
    const ids = documentedOperations(doc).map((op) => {
      const [method, path] = op.split(' ') as [string, string];
      return (doc.paths[path]![method.toLowerCase()] as { operationId: string }).operationId;
    });
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('marks the operator routes as such, behind the operator key alone', () => {
    for (const operation of documentedOperations(doc)) {
      const [method, path] = operation.split(' ') as [string, string];
      const op = doc.paths[path]![method.toLowerCase()] as {
        'x-riskgate-surface': string;
        tags: string[];
        security: Record<string, string[]>[];
      };
      // A login backend reports a decision's outcome with its caller key, under /decisions/.
      const operator =
        /^\/(metrics|policies|policy-versions|rules|openapi\.json|actions|decisions|audit|lockouts|lists|snoozes|review)/.test(
          path,
        ) && !path.endsWith('/outcome');
      expect(op['x-riskgate-surface'], operation).toBe(
        operator ? 'operator' : path === '/callbacks/admin' ? 'vendor' : /z$/.test(path) ? 'probe' : 'caller',
      );
      expect(op.tags, operation).toEqual([op['x-riskgate-surface']]);
      if (operator) expect(op.security, operation).toEqual([{ opsKey: [] }]);
    }
  });

  it('has a validator that refuses what the document does not allow', async () => {
    const answer = await h.decide(demoRequest('alice', undefined));
    const ok = { method: 'POST', path: '/decide', status: 200, contentType: 'application/json' };
    expect(violations({ ...ok, text: JSON.stringify(answer.body) })).toEqual([]);
    // A verdict outside the enum, an undocumented field, a status the route never answers.
    expect(violations({ ...ok, text: JSON.stringify({ ...answer.body, verdict: 'maybe' }) })).not.toEqual([]);
    expect(violations({ ...ok, text: JSON.stringify({ ...answer.body, extra: 1 }) })).not.toEqual([]);
    expect(violations({ ...ok, status: 418, text: '{}' })).not.toEqual([]);
    // A problem whose code is not one the route answers under that status.
    const problem = {
      type: 'urn:riskgate:problem:forbidden',
      title: 'Forbidden',
      status: 400,
      detail: 'x',
      code: 'RG_ERR_FORBIDDEN',
    };
    expect(
      violations({
        ...ok,
        status: 400,
        contentType: 'application/problem+json',
        text: JSON.stringify(problem),
      }),
    ).not.toEqual([]);
  });
});

describe('real answers of every route conform to the document', () => {
  it('POST /decide: a decision, and its refusals', async () => {
    const decision = await call(h.url, 'POST', '/decide', {
      key: CALLER_KEY,
      body: JSON.stringify(demoRequest('alice', undefined)),
    });
    expect(decision.status).toBe(200);
    expect((await call(h.url, 'POST', '/decide', { key: CALLER_KEY, body: '{"accountId":5}' })).status).toBe(
      400,
    );
    expect((await call(h.url, 'POST', '/decide', { key: CALLER_KEY, body: '{' })).status).toBe(400);
    expect((await call(h.url, 'POST', '/decide', { body: '{}' })).status).toBe(401);
    expect((await call(h.url, 'POST', '/decide', { key: 'not-a-key', body: '{}' })).status).toBe(401);
    const big = JSON.stringify({ accountId: 'alice', userAgent: 'x'.repeat(20_000) });
    expect((await call(h.url, 'POST', '/decide', { key: CALLER_KEY, body: big })).status).toBe(413);
    expect(
      (await call(h.url, 'POST', '/decide', { key: CALLER_KEY, body: 'a', contentType: 'text/plain' }))
        .status,
    ).toBe(415);
    const wrongMethod = await call(h.url, 'GET', '/decide', { key: CALLER_KEY });
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get('allow')).toBe('POST');
  });

  it('POST /feedback: a label, and its refusals', async () => {
    const decision = await h.decide(demoRequest('alice', undefined));
    const label = (decisionId: unknown, key: string | null = CALLER_KEY) =>
      call(h.url, 'POST', '/feedback', {
        key: key ?? undefined,
        body: JSON.stringify({ decisionId, label: 'fraud' }),
      });
    expect((await label(decision.body.decisionId)).status).toBe(202);
    expect((await label(decision.body.decisionId, OPS_KEY)).status).toBe(202);
    expect((await label(randomUUID())).status).toBe(404);
    expect((await label('not-a-uuid')).status).toBe(400);
    expect((await label(decision.body.decisionId, null)).status).toBe(401);
    const big = JSON.stringify({ decisionId: randomUUID(), label: 'fraud', note: 'x'.repeat(5000) });
    expect((await call(h.url, 'POST', '/feedback', { key: CALLER_KEY, body: big })).status).toBe(413);
    expect(
      (await call(h.url, 'POST', '/feedback', { key: CALLER_KEY, body: 'a', contentType: 'text/plain' }))
        .status,
    ).toBe(415);
    expect((await call(h.url, 'GET', '/feedback', { key: CALLER_KEY })).status).toBe(405);
  });

  it('POST /decisions/{decisionId}/outcome: an outcome, and its refusals', async () => {
    const decision = await h.decide(demoRequest('alice', undefined));
    const report = (decisionId: unknown, body: unknown, key: string | null = CALLER_KEY) =>
      call(h.url, 'POST', `/decisions/${String(decisionId)}/outcome`, {
        key: key ?? undefined,
        body: JSON.stringify(body),
      });
    const id = decision.body.decisionId;
    expect((await report(id, { type: 'step_up', result: 'passed' })).status).toBe(202);
    expect((await report(id, { type: 'account_event', event: 'password_reset' })).status).toBe(202);
    expect((await report(randomUUID(), { type: 'step_up', result: 'passed' })).status).toBe(404);
    expect((await report(id, { type: 'step_up', result: 'maybe' })).status).toBe(400);
    expect((await report(id, { type: 'step_up', result: 'passed' }, null)).status).toBe(401);
    const big = JSON.stringify({ type: 'step_up', result: 'passed', pad: 'x'.repeat(2000) });
    expect(
      (await call(h.url, 'POST', `/decisions/${id}/outcome`, { key: CALLER_KEY, body: big })).status,
    ).toBe(413);
  });

  it('GET and POST /ask-user/{token}: the question, the answer, and the refusals (HTML pages)', async () => {
    // A link as a decision makes it: its row in the control database, its token from the same secret.
    const database = await openDatabase(
      { kind: 'sqlite', path: join(h.stateDir, CONTROL_FILE) },
      { migrations: CONTROL_MIGRATIONS },
    );
    const { token, key } = tokenCodec(ASK_USER_SECRET).issue();
    try {
      await new AskUserStore(database).add({
        tokenKey: key,
        decisionId: randomUUID(),
        accountId: 'alice',
        userId: 'u-alice',
        verdict: 'challenge',
        onNo: [],
        createdMs: Date.now(),
        expiresMs: Date.now() + 60_000,
        answeredMs: null,
        answer: null,
      });
    } finally {
      await database.close();
    }
    const form = (t: string, body: string) =>
      call(h.url, 'POST', `/ask-user/${t}`, { body, contentType: 'application/x-www-form-urlencoded' });
    expect((await call(h.url, 'GET', `/ask-user/${token}`)).status).toBe(200);
    expect((await form(token, 'answer=maybe')).status).toBe(400);
    expect((await form(token, 'answer=yes')).status).toBe(200);
    expect((await form(token, 'answer=no')).status).toBe(409);
    expect((await call(h.url, 'GET', '/ask-user/not-a-token')).status).toBe(404);
    expect((await form('not-a-token', `answer=${'x'.repeat(300)}`)).status).toBe(413);
  });

  it('the probes', async () => {
    expect((await call(h.url, 'GET', '/healthz')).status).toBe(200);
    expect((await call(h.url, 'GET', '/readyz')).status).toBe(200);
    expect((await call(h.url, 'POST', '/healthz', { body: '{}' })).status).toBe(405);
  });

  it('the operator routes, to the operator key and to others', async () => {
    await h.decide(demoRequest('alice', undefined)); // /policies/stats has a revision to show
    for (const path of [
      '/metrics',
      '/policies',
      '/policies/stats',
      '/rules/report',
      '/openapi.json',
      '/actions',
    ]) {
      expect((await call(h.url, 'GET', path, { key: OPS_KEY })).status, path).toBe(200);
      expect((await call(h.url, 'GET', path, { key: CALLER_KEY })).status, path).toBe(401);
    }
    expect((await call(h.url, 'GET', '/actions?status=delivered&limit=5', { key: OPS_KEY })).status).toBe(
      200,
    );
    expect((await call(h.url, 'GET', '/actions?limit=0', { key: OPS_KEY })).status).toBe(400);
    expect((await call(h.url, 'POST', '/actions/nope/retry', { key: OPS_KEY })).status).toBe(404);
    expect((await call(h.url, 'DELETE', '/actions/nope', { key: OPS_KEY })).status).toBe(404);
    expect((await call(h.url, 'POST', '/metrics', { key: OPS_KEY })).status).toBe(405);
    // A path with a parameter: the route template matches it, so another method is 405 too.
    const notDelete = await call(h.url, 'GET', '/actions/nope', { key: OPS_KEY });
    expect([notDelete.status, notDelete.headers.get('allow')]).toEqual([405, 'DELETE']);
    const notRetry = await call(h.url, 'GET', '/actions/nope/retry', { key: OPS_KEY });
    expect([notRetry.status, notRetry.headers.get('allow')]).toEqual([405, 'POST']);
  });

  it('the runtime lists: each change, its refusals, a list the policy does not declare', async () => {
    const lists = await startHarness({ policy: { yaml: LIST_POLICY }, sharedSandbox: h.sandbox });
    try {
      const u = lists.url;
      const key = OPS_KEY;
      const cidr = encodeURIComponent('192.0.2.0/24');
      const add = (body: unknown) =>
        call(u, 'POST', '/lists/blockedNetworks/entries', { key, body: JSON.stringify(body) });
      expect((await add({ value: '192.0.2.9/24', reason: 'attack' })).status).toBe(201);
      expect((await add({ value: 'not-an-ip', reason: 'attack' })).status).toBe(400);
      expect((await call(u, 'GET', '/lists', { key })).status).toBe(200);
      expect((await call(u, 'GET', '/lists/blockedNetworks?limit=1', { key })).status).toBe(200);
      expect((await call(u, 'GET', '/lists/nope', { key })).status).toBe(404);
      const lines = '{"value":"acct-1","reason":"vouched"}\n';
      const imported = await call(u, 'POST', '/lists/trustedAccounts/import', {
        key,
        body: lines,
        contentType: 'application/x-ndjson',
      });
      expect(imported.status).toBe(201);
      const json = { key, body: JSON.stringify([{ value: 'acct-2', reason: 'vouched' }]) };
      expect((await call(u, 'POST', '/lists/trustedAccounts/import', json)).status).toBe(201);
      const removed = await call(u, 'DELETE', `/lists/blockedNetworks/entries/${cidr}?reason=done`, { key });
      expect(removed.status).toBe(200);
      const again = await call(u, 'DELETE', `/lists/blockedNetworks/entries/${cidr}`, {
        key,
        body: JSON.stringify({ reason: 'done' }),
      });
      expect(again.status).toBe(404);
    } finally {
      await lists.stop();
    }
  });

  it('the policy versions: a draft through every step, a revert, their refusals', async () => {
    const key = OPS_KEY;
    // The policy the harness serves: once activated, it serves the tests after this one.
    const yaml = patientShippedPolicy();
    const post = (path: string, body?: unknown, as = key) =>
      call(h.url, 'POST', path, { key: as, ...(body !== undefined && { body: JSON.stringify(body) }) });
    const made = await post('/policy-versions', { yaml, message: 'the shipped policy' });
    expect(made.status).toBe(201);
    const { id } = made.json() as { id: string };
    expect((await post('/policy-versions', { yaml: 'kind: Nope', message: 'x' })).status).toBe(400);
    expect((await call(h.url, 'GET', '/policy-versions?limit=5', { key })).status).toBe(200);
    expect((await call(h.url, 'GET', `/policy-versions/${id}`, { key })).status).toBe(200);
    expect((await post(`/policy-versions/${id}/propose`)).status).toBe(200);
    expect((await post(`/policy-versions/${id}/approve`)).status).toBe(403);
    expect((await post(`/policy-versions/${id}/approve`, undefined, SECOND_ADMIN_KEY)).status).toBe(200);
    expect((await post(`/policy-versions/${id}/propose`)).status).toBe(409);
    expect((await post(`/policy-versions/${id}/activate`)).status).toBe(200);
    expect((await post(`/policy-versions/${id}/revert`, { message: 'again' })).status).toBe(201);
    const other = (await post('/policy-versions', { yaml, message: 'to withdraw' })).json() as { id: string };
    expect((await post(`/policy-versions/${other.id}/withdraw`)).status).toBe(200);
    const third = (await post('/policy-versions', { yaml, message: 'to reject' })).json() as { id: string };
    expect((await post(`/policy-versions/${third.id}/propose`)).status).toBe(200);
    expect((await post(`/policy-versions/${third.id}/reject`, undefined, SECOND_ADMIN_KEY)).status).toBe(200);
    expect((await call(h.url, 'GET', '/policy-versions/nope', { key })).status).toBe(404);
    // Staged and scheduled activation, and a proposal's evidence as GET shows it.
    const fourth = (await post('/policy-versions', { yaml, message: 'to stage' })).json() as { id: string };
    expect((await post(`/policy-versions/${fourth.id}/propose`, { windowHours: 2 })).status).toBe(200);
    expect((await call(h.url, 'GET', `/policy-versions/${fourth.id}`, { key })).status).toBe(200);
    expect((await post(`/policy-versions/${fourth.id}/approve`, undefined, SECOND_ADMIN_KEY)).status).toBe(
      200,
    );
    expect((await post(`/policy-versions/${fourth.id}/stage`, { percent: 0 })).status).toBe(400);
    expect((await post(`/policy-versions/${fourth.id}/stage`, { percent: 10 })).status).toBe(200);
    expect((await post('/policy-versions/unstage')).status).toBe(204);
    expect((await post('/policy-versions/unstage')).status).toBe(409);
    const at = new Date(Date.now() + 3_600_000).toISOString();
    expect((await post(`/policy-versions/${fourth.id}/schedule`, { at: 'soon' })).status).toBe(400);
    expect((await post(`/policy-versions/${fourth.id}/schedule`, { at })).status).toBe(200);
    expect((await post('/policy-versions/unschedule')).status).toBe(204);
    expect((await post('/policy-versions/unschedule')).status).toBe(409);
  });

  it('the rule snoozes: a snooze, the listing, its early end, their refusals', async () => {
    const key = OPS_KEY;
    const until = new Date(Date.now() + 3_600_000).toISOString();
    const create = (body: unknown) => call(h.url, 'POST', '/snoozes', { key, body: JSON.stringify(body) });
    const made = await create({
      ruleId: 'account-locked',
      entity: 'ip',
      value: '192.0.2.9/24',
      until,
      reason: 'r',
    });
    expect(made.status).toBe(201);
    const { id } = made.json() as { id: string };
    expect(
      (await create({ ruleId: 'no-such-rule', entity: 'accountId', value: 'a', until, reason: 'r' })).status,
    ).toBe(400);
    expect((await call(h.url, 'GET', '/snoozes?ruleId=account-locked', { key })).status).toBe(200);
    expect((await call(h.url, 'GET', '/snoozes?limit=0', { key })).status).toBe(400);
    expect((await call(h.url, 'DELETE', `/snoozes/${id}?reason=done`, { key })).status).toBe(200);
    const again = await call(h.url, 'DELETE', `/snoozes/${id}`, {
      key,
      body: JSON.stringify({ reason: 'done' }),
    });
    expect(again.status).toBe(404);
  });

  it('the decision store: a page, a decision whole, and their refusals', async () => {
    const { body } = await h.decide(demoRequest('bob', undefined));
    const id = body.decisionId as string;
    const found = await eventually(
      async () => {
        const page = await call(h.url, 'GET', `/decisions?accountId=bob&counts=true&limit=5`, {
          key: OPS_KEY,
        });
        return page.text.includes(id) ? page : undefined;
      },
      { what: 'the decision in the store' },
    );
    expect(found.status).toBe(200);
    expect((await call(h.url, 'GET', `/decisions/${id}`, { key: OPS_KEY })).status).toBe(200);
    expect((await call(h.url, 'GET', '/decisions?limit=0', { key: OPS_KEY })).status).toBe(400);
    expect((await call(h.url, 'GET', `/decisions/${randomUUID()}`, { key: OPS_KEY })).status).toBe(404);
    expect((await call(h.url, 'GET', '/decisions', { key: CALLER_KEY })).status).toBe(401);
  });

  it('an action dropped and retried by an operator', async () => {
    const { mallory } = await lookUpUserIds(h.sandbox, ['mallory']);
    await h.control('PUT', '/sandbox/faults', {
      rules: [{ route: 'PUT /srv/admin/v1/users/*', hang: true }],
    });
    try {
      const deny = await h.decide(demoRequest('mallory', mallory));
      expect(deny.body.verdict).toBe('deny');
      const id = encodeURIComponent(`${deny.body.decisionId}:lock_out_user:${mallory}`);
      const dropped = await call(h.url, 'DELETE', `/actions/${id}`, { key: OPS_KEY });
      expect(dropped.status).toBe(200);
      expect(dropped.json()).toMatchObject({ status: 'dropped' });
      expect((await call(h.url, 'GET', '/actions?status=dropped', { key: OPS_KEY })).status).toBe(200);
      await h.control('DELETE', '/sandbox/faults');
      const retried = await call(h.url, 'POST', `/actions/${id}/retry`, { key: OPS_KEY });
      expect(retried.status).toBe(200);
      expect(retried.json()).toMatchObject({ status: 'pending' });
      // Both changes are in the audit trail, newest first.
      const audit = await call(h.url, 'GET', `/audit?target=${id}&limit=1`, { key: OPS_KEY });
      expect(audit.json()).toMatchObject({
        entries: [{ action: 'action.retry' }],
        nextCursor: expect.any(String),
      });
      const older = await call(h.url, 'GET', `/audit?target=${id}&cursor=${audit.json().nextCursor}`, {
        key: OPS_KEY,
      });
      expect(older.json()).toEqual({ entries: [expect.objectContaining({ action: 'action.drop' })] });
      expect((await call(h.url, 'GET', '/audit?action=nope', { key: OPS_KEY })).status).toBe(400);
    } finally {
      await h.control('DELETE', '/sandbox/faults');
    }
  });

  it('a policy reload by an operator', async () => {
    const reloaded = await call(h.url, 'POST', '/policies/reload', { key: OPS_KEY });
    expect(reloaded.json()).toMatchObject({ ok: true, changed: false });
  });

  it('lock-outs listed, one read and unlocked by an operator', async () => {
    const { mallory } = await lookUpUserIds(h.sandbox, ['mallory']);
    const deny = await h.decide(demoRequest('mallory', mallory));
    const id = deny.body.decisionId as string;
    await eventually(
      async () => (await call(h.url, 'GET', `/lockouts/${id}`, { key: OPS_KEY })).status === 200,
    );
    const page = await call(h.url, 'GET', `/lockouts?userId=${mallory}&limit=5`, { key: OPS_KEY });
    expect((page.json() as { lockouts: unknown[] }).lockouts[0]).toMatchObject({ id, rule: 'rat-confirmed' });
    expect((await call(h.url, 'GET', '/lockouts?status=gone', { key: OPS_KEY })).status).toBe(400);
    expect((await call(h.url, 'GET', '/lockouts/nope', { key: OPS_KEY })).status).toBe(404);
    const unlock = (body: string) => call(h.url, 'POST', `/lockouts/${id}/unlock`, { key: OPS_KEY, body });
    expect((await unlock('{}')).status).toBe(400);
    const unlocked = await unlock(JSON.stringify({ reason: 'vouched for by the help desk' }));
    expect(unlocked.status).toBe(202);
    expect(unlocked.json()).toMatchObject({ status: 'unlocked', unlockStatus: expect.any(String) });
    const again = await unlock(JSON.stringify({ reason: 'vouched for by the help desk' }));
    expect(again.status).toBe(409);
    expect(again.json()).toMatchObject({ code: 'RG_ERR_CONFLICT' });
  });

  it('the review queue: a case sent by hand, claimed, handed over, released, noted, closed, a lock-out and an unlock from it, their refusals', async () => {
    const key = OPS_KEY;
    const { mallory } = await lookUpUserIds(h.sandbox, ['mallory']);
    const id = (await h.decide(demoRequest('mallory', mallory))).body.decisionId as string;
    await eventually(async () => (await call(h.url, 'GET', `/lockouts/${id}`, { key })).status === 200);
    await eventually(async () => (await call(h.url, 'GET', `/decisions/${id}`, { key })).status === 200);
    const post = (path: string, body?: unknown) =>
      call(h.url, 'POST', path, { key, ...(body !== undefined && { body: JSON.stringify(body) }) });
    const opened = await post('/review/cases', { decisionId: id, note: 'looks odd' });
    expect(opened.status).toBe(201);
    expect((await post('/review/cases', { decisionId: id })).status).toBe(200);
    expect((await post('/review/cases', { decisionId: 'nope' })).status).toBe(400);
    expect((await post('/review/cases', { decisionId: randomUUID() })).status).toBe(404);
    expect((await call(h.url, 'GET', '/review/cases?view=overdue', { key })).status).toBe(200);
    expect((await call(h.url, 'GET', '/review/cases?view=nope', { key })).status).toBe(400);
    const claimed = await post('/review/claim-next');
    expect(claimed.status).toBe(200);
    const caseId = (claimed.json() as { claimed: { id: string } }).claimed.id;
    expect((await post(`/review/cases/${caseId}/notes`, { text: 'called the user' })).status).toBe(201);
    expect((await call(h.url, 'GET', `/review/cases/${caseId}`, { key })).status).toBe(200);
    expect((await call(h.url, 'GET', `/review/cases/${randomUUID()}`, { key })).status).toBe(404);
    expect((await post(`/review/cases/${caseId}/assign`, { assignee: 'ana' })).status).toBe(200);
    expect((await post(`/review/cases/${caseId}/assign`, { assignee: 'a b' })).status).toBe(400);
    expect((await post(`/review/cases/${caseId}/release`)).status).toBe(200);
    expect((await post(`/review/cases/${caseId}/release`)).status).toBe(409);
    expect((await post('/review/claim-next')).status).toBe(200);
    // Its decision drove a lock-out: another is refused.
    expect((await post(`/review/cases/${caseId}/lockout`, { reason: 'again' })).status).toBe(409);
    expect((await post(`/review/cases/${caseId}/unlock`, { reason: 'the user vouched' })).status).toBe(202);
    expect((await post(`/review/cases/${caseId}/disposition`, { disposition: 'maybe' })).status).toBe(400);
    expect((await post(`/review/cases/${caseId}/disposition`, { disposition: 'legit' })).status).toBe(200);
    expect((await post(`/review/cases/${caseId}/disposition`, { disposition: 'fraud' })).status).toBe(409);
    expect((await post('/review/claim-next')).json()).toEqual({ claimed: null });
    // A decision that locked nobody out: its user locked out from its case.
    const { bob } = await lookUpUserIds(h.sandbox, ['bob']);
    const bobId = (await h.decide(demoRequest('bob', bob))).body.decisionId as string;
    await eventually(async () => (await call(h.url, 'GET', `/decisions/${bobId}`, { key })).status === 200);
    const bobCase = (await post('/review/cases', { decisionId: bobId })).json() as { id: string };
    expect((await post(`/review/cases/${bobCase.id}/lockout`, {})).status).toBe(400);
    expect((await post(`/review/cases/${bobCase.id}/lockout`, { reason: 'the bank confirmed' })).status).toBe(
      202,
    );
    expect((await post(`/review/cases/${bobCase.id}/disposition`, { disposition: 'fraud' })).status).toBe(
      200,
    );
  });

  it('POST /callbacks/admin: a signed callback, a replay, a forgery', async () => {
    const key = h.sandbox.config.credentials.callbackSignatureKey;
    const body = JSON.stringify({ user_id: 'u-1', enrollment_id: `e-${randomUUID()}`, result: 'success' });
    const signed = (text: string, signature = signCallbackBody(text, key)) =>
      call(h.url, 'POST', '/callbacks/admin', { body: text, headers: { 'x-jws-signature': signature } });
    expect((await signed(body)).status).toBe(200);
    expect((await signed(body)).status).toBe(409);
    expect((await signed(body, signCallbackBody(body, 'another-key'))).status).toBe(401);
    expect((await call(h.url, 'POST', '/callbacks/admin', { body })).status).toBe(401);
    expect((await signed('{')).status).toBe(400);
    expect((await signed('x'.repeat(70_000))).status).toBe(413);
  });

  it('a path riskgate does not serve: 404 problem', async () => {
    const res = await fetch(`${h.url}/nope`);
    expect(res.status).toBe(404);
    expect(documentedPath(doc, '/nope')).toBeUndefined();
    const problem = await res.text();
    const asDocumented = {
      method: 'POST',
      path: '/feedback',
      status: 404,
      contentType: res.headers.get('content-type'),
    };
    // The same problem shape, and a code a route documents under 404.
    expect(violations({ ...asDocumented, text: problem })).toEqual([]);
  });
});

describe('refusals of a riskgate with an ops port but no operator keys, overloaded, its decision log failing', () => {
  let b: Harness;
  let logHealthy = true;
  const decisionLog: DecisionLog = {
    write: () => {},
    flush: async () => {},
    close: async () => {},
    dropped: 0,
    health: () => ({ ok: logHealthy, dropped: 0 }),
  };
  beforeAll(async () => {
    b = await startHarness({
      sharedSandbox: h.sandbox,
      deadlineMs: 5000,
      env: {
        RISKGATE_OPS_KEYS: '',
        RISKGATE_OPS_PORT: '0',
        RISKGATE_MAX_IN_FLIGHT: '1',
        RISKGATE_DECISION_LOG_ON_FAILURE: 'refuse',
        RISKGATE_FEEDBACK_BURST: '1',
        RISKGATE_FEEDBACK_RATE: '0.01',
      },
      riskgate: { decisionLog },
    });
  });
  afterAll(() => b?.stop());

  it('on the ops port: the operator routes refused 403 without operator keys, the probes answered; on the service port they are 404', async () => {
    const ops = b.riskgate.opsUrl!;
    for (const path of [
      '/metrics',
      '/policies',
      '/policies/stats',
      '/rules/report',
      '/openapi.json',
      '/actions',
    ]) {
      expect((await call(ops, 'GET', path, { key: OPS_KEY })).status, path).toBe(403);
      expect((await call(b.url, 'GET', path, { key: OPS_KEY })).status, path).toBe(404);
    }
    expect((await call(ops, 'POST', '/actions/nope/retry')).status).toBe(403);
    expect((await call(ops, 'DELETE', '/actions/nope')).status).toBe(403);
    expect((await call(ops, 'GET', '/healthz')).status).toBe(200);
    expect((await call(ops, 'GET', '/readyz')).status).toBe(200);
  });

  it('sheds a decision and feedback past RISKGATE_MAX_IN_FLIGHT: 503 with Retry-After', async () => {
    // A decision held in flight by its own body, sent in two parts: admitted on its headers, it is
    // in flight until the rest arrives (no vendor timing involved).
    const body = new TextEncoder().encode(JSON.stringify(demoRequest('alice', undefined)));
    let release!: () => void;
    const parts = [
      Promise.resolve(body.slice(0, 10)),
      new Promise<void>((r) => {
        release = r;
      }).then(() => body.slice(10)),
    ];
    const slowBody = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const next = parts.shift();
        if (next === undefined) controller.close();
        else controller.enqueue(await next);
      },
    });
    const held = call(b.url, 'POST', '/decide', { key: CALLER_KEY, body: slowBody });
    try {
      await eventually(() => b.riskgate.admission.inFlight >= 1, {
        intervalMs: 5,
        what: 'the held decision admitted',
      });
      const shed = await call(b.url, 'POST', '/decide', {
        key: CALLER_KEY,
        body: new TextDecoder().decode(body),
      });
      expect(shed.status).toBe(503);
      expect(shed.headers.get('retry-after')).not.toBeNull();
      const feedback = JSON.stringify({ decisionId: randomUUID(), label: 'legit' });
      expect((await call(b.url, 'POST', '/feedback', { key: CALLER_KEY, body: feedback })).status).toBe(503);
    } finally {
      release();
    }
    expect((await held).status).toBe(200);
  });

  it('refuses decisions and is not ready while the decision log fails; feedback past its rate is 429', async () => {
    logHealthy = false;
    try {
      const body = JSON.stringify(demoRequest('alice', undefined));
      expect((await call(b.url, 'POST', '/decide', { key: CALLER_KEY, body })).status).toBe(503);
      const readiness = await call(b.url, 'GET', '/readyz');
      expect(readiness.status).toBe(503);
      expect(readiness.json()).toMatchObject({
        ready: false,
        checks: { policy: true, token: true, history: true, decisionLog: false },
      });
      const feedback = JSON.stringify({ decisionId: randomUUID(), label: 'legit' });
      expect((await call(b.url, 'POST', '/feedback', { key: CALLER_KEY, body: feedback })).status).toBe(503);
      // The burst of one is spent: the next label waits.
      const limited = await call(b.url, 'POST', '/feedback', { key: CALLER_KEY, body: feedback });
      expect(limited.status).toBe(429);
      expect(limited.headers.get('retry-after')).not.toBeNull();
    } finally {
      logHealthy = true;
    }
  });
});

describe('coverage of the real answers', () => {
  it('checked a success of every documented operation', () => {
    const succeeded = new Set(checked.filter((c) => / 2\d\d$/.test(c)).map((c) => c.replace(/ \d+$/, '')));
    expect(documentedOperations(doc).filter((op) => !succeeded.has(op))).toEqual([]);
  });

  it('checked refusals of every kind the routes answer: 400, 401, 403, 404, 405, 409, 413, 415, 429, 503', () => {
    const statuses = new Set(checked.map((c) => Number(c.split(' ').at(-1))));
    for (const status of [400, 401, 403, 404, 405, 409, 413, 415, 429, 503]) {
      expect(statuses.has(status), String(status)).toBe(true);
    }
  });
});
