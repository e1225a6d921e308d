/**
 * The CPU of `POST /decide` at the HTTP edge, in process: the app as `createApp` builds it (the
 * edge's middlewares, the caller key, the body, the decision, the answer) served by
 * @hono/node-server on node:http, with clients that answer at once (the shipped policy's test
 * inputs, as `bench/decide-path-loop.ts`), driven by an undici Pool in the same process. What
 * `bench/hot-path-cpu.ts` cannot resolve on a loaded machine (the vendor, the sandbox and the
 * generator are not in it), and what `decide-path-loop.ts` leaves out (the route, the answer's
 * write). A build with direct routes (src/http/direct-route.ts) serves `POST /decide` through them
 * before the adapter, as its listener does. Prints CPU microseconds per answered request of the process (server and client both),
 * per build, alternating builds every round:
 *
 *   npx tsx bench/decide-route-loop.ts [--builds before=/tmp/riskgate-before,after=.]
 *     [--rounds 7] [--requests 5000] [--in-flight 16] [--in-app]
 *
 * `--in-app` hands each request to the app's `fetch` as a web `Request`, without node:http or a
 * client: the edge's middlewares, the route and the decision are then most of what is measured
 * (issue 32: their async layers, which the socket and the client's work would hide).
 *
 * (A build is a tree with `src/` and `policies/`, e.g. `git archive main | tar -x -C /tmp/x` with
 * `node_modules` linked; run with TSX_TSCONFIG_PATH naming a tsconfig that includes every tree.)
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { getRequestListener } from '@hono/node-server';
import { Pool } from 'undici';
import { median } from './bench-median.ts';
import { loadShippedCases, type ShippedCase } from './shipped-cases.ts';

const { values } = parseArgs({
  options: {
    builds: { type: 'string', default: 'this=.' },
    rounds: { type: 'string', default: '7' },
    requests: { type: 'string', default: '5000' },
    'in-flight': { type: 'string', default: '16' },
    'in-app': { type: 'boolean', default: false },
  },
});
const CALLER_KEY = 'bench-caller-key-0123456789';
const ROUNDS = Number(values.rounds);
const REQUESTS = Number(values.requests);
const IN_FLIGHT = Number(values['in-flight']);

interface Build {
  name: string;
  app: { fetch(request: Request): Response | Promise<Response> };
  pool: Pool;
  server: Server;
  bodies: string[];
}

/** One tree's app on a port of its own, and the bodies of its policy's test cases. */
async function start(name: string, dir: string): Promise<Build> {
  const root = `${resolve(dir)}/`;
  const { createApp } = await import(`${root}src/http/create-app.ts`);
  const { createMetrics } = await import(`${root}src/observability/metrics.ts`);
  const { policy, cases } = await loadShippedCases(root);
  // Every case's answers by its account, so one app serves them all.
  const byAccount = new Map<string, ShippedCase>();
  const bodies: string[] = [];
  cases.forEach((given, i) => {
    const accountId = `bench-${i}`;
    byAccount.set(accountId, given);
    bodies.push(
      JSON.stringify({
        ...given.request,
        accountId,
        context: given.request.context ?? {},
        baseline: { unitId: 'bench-phone', verificationStatus: 'verified' },
      }),
    );
  });
  const failed = { ok: false, error: new Error('bench: unavailable'), durationMs: 0 };
  const of = (query: { accountId?: string } | undefined) => byAccount.get(query?.accountId ?? '');
  const signals = new Proxy(
    {},
    {
      get: (_t, signal) => (query: { accountId?: string }) => {
        const o = of(query)?.signals[String(signal)];
        return Promise.resolve(o?.status === 'ok' ? { ok: true, value: o.response, durationMs: 0 } : failed);
      },
    },
  );
  const adminUser = (userId: string) => [...byAccount.values()].find((g) => g.request.userId === userId);
  const app = createApp({
    decide: {
      signals,
      admin: {
        getUserCached: (userId: string) => {
          const g = adminUser(userId);
          return Promise.resolve(g?.user === undefined ? failed : { ok: true, value: g.user, durationMs: 0 });
        },
        getUserDevicesCached: (userId: string) =>
          Promise.resolve({ ok: true, value: { devices: adminUser(userId)?.devices ?? [] }, durationMs: 0 }),
        updateUser: () => Promise.resolve(failed),
        deleteDevice: () => Promise.resolve(failed),
        createOneTimeCode: () => Promise.resolve(failed),
      },
      policies: { current: () => policy, status: () => ({}) },
      deadlineMs: 300,
      subjectBinding: 'off',
    },
    apiKeys: [CALLER_KEY],
    actions: {
      submit: async (jobs: unknown[]) => jobs.map(() => 'queued'),
      size: 0,
      drain: async () => {},
      abandon: async () => {},
    },
    decisionLog: { write: () => {}, flush: async () => {}, close: async () => {}, dropped: 0 },
    metrics: createMetrics({ runtime: false }),
    log: () => {},
  });
  // The app's direct routes (src/http/direct-route.ts) before the adapter, as the listener serves
  // them; a build without them, through the adapter alone.
  const direct = await import(`${root}src/http/direct-route.ts`).catch(() => undefined);
  const listener = getRequestListener(app.fetch);
  const server = createServer(direct === undefined ? listener : direct.withDirectRoutes(app, listener));
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { connections: 8 });
  return { name, app, pool, server, bodies };
}

const IN_APP_URL = 'http://riskgate.test/decide';
const headers = { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' };

/** CPU µs per request over `n` requests, `IN_FLIGHT` at a time; throws on an answer other than 200. */
async function run(b: Build, n: number): Promise<number> {
  const before = process.cpuUsage();
  let sent = 0;
  const worker = async () => {
    while (sent < n) {
      const body = b.bodies[sent++ % b.bodies.length]!;
      if (values['in-app']) {
        // With its length, as node:http hands it: the body limit checks the header, not a stream.
        const init = {
          method: 'POST',
          headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
          body,
        };
        const res = await b.app.fetch(new Request(IN_APP_URL, init));
        const text = await res.text();
        if (res.status !== 200) throw new Error(`${b.name}: ${res.status} ${text}`);
        continue;
      }
      const res = await b.pool.request({ method: 'POST', path: '/decide', headers, body });
      const text = await res.body.text();
      if (res.statusCode !== 200) throw new Error(`${b.name}: ${res.statusCode} ${text}`);
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  const used = process.cpuUsage(before);
  return (used.user + used.system) / n;
}

const builds: Build[] = [];
for (const spec of values.builds.split(',')) {
  const [name, dir] = spec.split('=');
  builds.push(await start(name!, dir!));
}
for (const b of builds) await run(b, REQUESTS);
const results = new Map<string, number[]>(builds.map((b) => [b.name, []]));
for (let r = 0; r < ROUNDS; r++) {
  for (const b of r % 2 === 0 ? builds : [...builds].reverse()) {
    results.get(b.name)!.push(Math.round((await run(b, REQUESTS)) * 10) / 10);
  }
}
for (const [name, us] of results)
  console.log(JSON.stringify({ build: name, usPerRequest: us, medianUs: median(us) }));
if (builds.length === 2) {
  const [a, b] = [results.get(builds[0]!.name)!, results.get(builds[1]!.name)!];
  const ratios = a.map((x, i) => Math.round((b[i]! / x) * 1000) / 1000);
  console.log(
    JSON.stringify({ pairwise: `${builds[1]!.name} / ${builds[0]!.name}`, ratios, median: median(ratios) }),
  );
}
for (const b of builds) {
  await b.pool.close();
  b.server.close();
}
