import { createServer, type RequestListener, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { getRequestListener } from '@hono/node-server';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shedBeforeApp } from '../src/admission/shed-before-app.ts';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { PASS_THROUGH, withDirectGuard, withDirectHandler } from '../src/edge/direct-form.ts';
import { serveDirectly, withDirectRoutes } from '../src/http/direct-route.ts';
import { type HttpListener, httpListenerComponent } from '../src/http/http-listener.ts';
import type { StartedComponent } from '../src/lifecycle/component.ts';
import { CALLER_KEY, type Harness, startHarness } from './decide-harness.ts';
import { PATIENT_DEADLINE_MS, patientShippedPolicy } from './support/patient-policy.ts';

/**
 * `POST /decide` straight from node:http (issue 32, src/http/direct-route.ts): the caller listener
 * answers a decision without entering @hono/node-server's adapter or hono's `fetch`, and answers
 * every request exactly as hono does. The same app, a real riskgate's, is served twice: by the
 * caller listener as production builds it (`httpListenerComponent`, admission at the listener) and,
 * for reference, by the adapter alone; each request goes to both and the answers are compared.
 */

let h: Harness;
let listener: StartedComponent<HttpListener>;
let reference: Server;
/** Calls of the app's `fetch`: the listener's (through the adapter), the reference's. */
const fetched = { listener: 0, reference: 0 };

beforeAll(async () => {
  h = await startHarness({ policy: { yaml: patientShippedPolicy() }, deadlineMs: PATIENT_DEADLINE_MS });
  const { app } = h.riskgate;
  const fetch = app.fetch;
  reference = createServer(
    getRequestListener((req, env) => {
      fetched.reference++;
      return fetch(req, env);
    }),
  ).listen(0, '127.0.0.1');
  // The listener reads `app.fetch` as it starts: counted from then on.
  app.fetch = (req, env) => {
    fetched.listener++;
    return fetch(req, env);
  };
  listener = await httpListenerComponent({
    name: 'test listener',
    app,
    port: 0,
    host: '127.0.0.1',
    acceptSockets: 1,
    config: { headersTimeoutMs: 5000, requestTimeoutMs: 10_000, maxConnections: 100 },
    wrap: (l) =>
      shedBeforeApp(l, {
        admission: h.riskgate.admission,
        metrics: h.riskgate.metrics,
        hasOverloadVerdict: () => false,
      }),
    onStop: 'cut',
    drainTimeoutMs: 100,
  }).start();
  app.fetch = fetch;
  if (!reference.listening) await new Promise((resolve) => reference.once('listening', resolve));
});
afterAll(async () => {
  await listener?.stop?.(Date.now() + 1000, 'graceful');
  reference?.close();
  await h?.stop();
});

interface Answer {
  status: number;
  /** Name and value in turn, as sent, without `Date`. */
  headers: string[];
  body: string;
}

/** One request on a connection of its own (`Connection: close` both ways, nothing kept). */
function send(
  port: number,
  o: { method?: string; path?: string; headers?: Record<string, string>; body?: string; chunked?: boolean },
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port,
      method: o.method ?? 'POST',
      path: o.path ?? '/decide',
      agent: false,
      headers: {
        ...(o.body !== undefined && !o.chunked && { 'content-length': String(Buffer.byteLength(o.body)) }),
        ...o.headers,
      },
    });
    req.on('error', reject);
    req.on('response', async (res) => {
      const chunks: Buffer[] = [];
      for await (const chunk of res) chunks.push(chunk as Buffer);
      const headers: string[] = [];
      for (let i = 0; i < res.rawHeaders.length; i += 2) {
        if (res.rawHeaders[i]!.toLowerCase() !== 'date')
          headers.push(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
      }
      resolve({ status: res.statusCode ?? 0, headers, body: Buffer.concat(chunks).toString('utf8') });
    });
    if (o.chunked && o.body !== undefined) req.write(o.body);
    req.end(o.chunked ? undefined : o.body);
  });
}

const JSON_HEADERS = { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' };
const login = JSON.stringify(demoRequest('alice', undefined));

/** What differs between two decisions on the same request: their ids, times and timings. */
function decisionShape(a: Answer): Answer {
  return {
    ...a,
    // Server-Timing lists the calls as they ended: their names, in any order.
    headers: a.headers.map((v, i) =>
      a.headers[i - 1] === 'server-timing'
        ? v
            .replace(/\d+(\.\d+)?/g, 'N')
            .split(', ')
            .sort()
            .join(', ')
        : v.replace(/\d+(\.\d+)?/g, 'N'),
    ),
    body: JSON.stringify(JSON.parse(a.body), (_k, v) => (typeof v === 'number' ? 0 : v)).replace(
      /"[0-9a-f-]{36}"|"\d{4}-\d\d-\d\dT[^"]+"/g,
      '"X"',
    ),
  };
}

/** Sends `o` to the listener and to the reference; the listener's answer, and whether it entered the app's `fetch`. */
async function both(o: Parameters<typeof send>[1]) {
  const before = fetched.listener;
  const direct = await send(listener.handle.sockets.port, o);
  const entered = fetched.listener - before;
  const viaHono = await send((reference.address() as AddressInfo).port, o);
  return { direct, viaHono, entered };
}

describe('POST /decide straight from node:http', () => {
  it('answers a decision without entering the adapter or hono, as hono answers it', async () => {
    const { direct, viaHono, entered } = await both({ headers: JSON_HEADERS, body: login });
    expect(direct.status).toBe(200);
    expect(entered).toBe(0);
    expect(decisionShape(direct)).toEqual(decisionShape(viaHono));
    expect(JSON.parse(direct.body).verdict).toBe(JSON.parse(viaHono.body).verdict);
  });

  it('answers the problems found once the guards let it through, byte for byte as hono', async () => {
    const cases = {
      'a content type other than JSON': {
        headers: { ...JSON_HEADERS, 'content-type': 'text/plain' },
        body: login,
      },
      'a body that is not JSON': { headers: JSON_HEADERS, body: '{"accountId":' },
      'a field breaking its rule': {
        headers: JSON_HEADERS,
        body: JSON.stringify({ ...JSON.parse(login), ip: 42 }),
      },
      'an empty body': { headers: JSON_HEADERS, body: '' },
      'a body with a byte-order mark': { headers: JSON_HEADERS, body: `\uFEFF${login.slice(0, 10)}` },
    };
    for (const [what, o] of Object.entries(cases)) {
      const { direct, viaHono, entered } = await both(o);
      expect(direct.status, what).toBeGreaterThanOrEqual(400);
      expect(entered, what).toBe(0);
      expect(direct, what).toEqual(viaHono);
    }
  });

  it('leaves to hono what a guard would refuse or is not sure of, answered as before', async () => {
    const big = JSON.stringify({ ...JSON.parse(login), pad: 'x'.repeat(70_000) });
    const cases = {
      'no key': { headers: { 'content-type': 'application/json' }, body: login },
      'an unknown key': {
        headers: { ...JSON_HEADERS, authorization: 'Bearer not-a-key-0123456789' },
        body: login,
      },
      'a body over the limit': { headers: JSON_HEADERS, body: big },
      'a streamed body': {
        headers: { ...JSON_HEADERS, 'transfer-encoding': 'chunked' },
        body: login,
        chunked: true,
      },
      'another method': { method: 'GET', headers: JSON_HEADERS },
      'a query': { path: '/decide?x=1', headers: JSON_HEADERS, body: login },
      'a key sent twice': {
        headers: {
          ...JSON_HEADERS,
          authorization: [JSON_HEADERS.authorization, 'Bearer x'] as unknown as string,
        },
        body: login,
      },
    };
    for (const [what, o] of Object.entries(cases)) {
      const { direct, viaHono, entered } = await both(o);
      expect(entered, what).toBe(1);
      expect(direct.status, what).toBe(viaHono.status);
      if (direct.status === 200) expect(decisionShape(direct), what).toEqual(decisionShape(viaHono));
      else expect(direct, what).toEqual(viaHono);
    }
  });
});

describe('which routes are served straight from node:http', () => {
  const listener: RequestListener = () => {};
  const handler = withDirectHandler(
    () => new Response('ok'),
    async () => ({ status: 200, headers: {}, body: 'ok' }),
  );
  const onError = () => ({ status: 500, headers: {}, body: '' });

  it('serves a route whose every middleware before its handler has a direct form', () => {
    const app = new Hono();
    app.use(withDirectGuard((_c, next) => next(), PASS_THROUGH));
    app.post('/x', handler);
    app.use((_c, next) => next()); // after the handler: never reached, as in hono
    serveDirectly(app, 'POST', '/x', onError);
    expect(withDirectRoutes(app, listener)).not.toBe(listener);
  });

  it('leaves the route to hono when a middleware before its handler has no direct form, added after the ask too', () => {
    const app = new Hono();
    serveDirectly(app, 'POST', '/x', onError);
    app.use(withDirectGuard((_c, next) => next(), PASS_THROUGH));
    app.use('/x', (_c, next) => next());
    app.post('/x', handler);
    expect(withDirectRoutes(app, listener)).toBe(listener);
  });

  it('cuts the connection, logging through the error handler, when the answer cannot be written', async () => {
    const app = new Hono();
    const logged: unknown[] = [];
    app.use(
      withDirectGuard((_c, next) => next(), {
        check: () => true,
        leave: () => {
          throw new Error('leave failed');
        },
      }),
    );
    app.post('/x', handler);
    serveDirectly(app, 'POST', '/x', (error) => {
      logged.push(error);
      return { status: 500, headers: {}, body: '' };
    });
    const server = createServer(withDirectRoutes(app, () => {})).listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    const { port } = server.address() as AddressInfo;
    const outcome = await new Promise<string>((resolve) => {
      const r = request({
        port,
        host: '127.0.0.1',
        method: 'POST',
        path: '/x',
        headers: { 'content-length': '0' },
      });
      r.on('response', (res) => resolve(`answered ${res.statusCode}`));
      r.on('error', (error) => resolve(error.message));
      r.end();
    });
    server.close();
    expect(outcome).toBe('socket hang up');
    expect(logged.map((e) => (e as Error).message)).toEqual(['leave failed']);
  });
});
