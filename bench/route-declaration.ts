import { parseArgs } from 'node:util';
import { Hono } from 'hono';
import { decideRequestSchema, MAX_DECIDE_BODY_BYTES } from '../src/decide/decide-request.ts';
import { DECIDE_ROUTE } from '../src/decide/decide-route.ts';
import { limitBody, readJsonBody } from '../src/edge/json-body.ts';
import { median } from './bench-median.ts';
import { buildDecideBodies } from './decide-bodies.ts';

/**
 * What declaring a route once (src/edge/route-declaration.ts) costs the hot route. Two hono apps
 * serve `POST /decide` with a handler that only reads and checks the body (the part of the route
 * the declaration touches; the decision itself is the same code either way): `hand`, registered as
 * before the change (`app.post(path, limitBody(max), handler)` with `readJsonBody(c, schema)`), and
 * `declared`, registered by `DECIDE_ROUTE.mount` with `DECIDE_ROUTE.bodyOf(c)`. Each run times
 * both in turn over the same bodies (`app.request`, in process: routing, the body limit, the JSON
 * parse and the zod check), so their ratio comes from the same moments of this noisy machine; each
 * figure is the median of `--runs` runs, CPU µs per request (user + system).
 *
 *   npx tsx bench/route-declaration.ts [--requests 20000] [--runs 7] [--json]
 */

const args = parseArgs({
  options: {
    requests: { type: 'string', default: '20000' },
    runs: { type: 'string', default: '7' },
    json: { type: 'boolean', default: false },
  },
}).values;
const requests = Number(args.requests);
const runs = Number(args.runs);

const hand = new Hono();
hand.post('/decide', limitBody(MAX_DECIDE_BODY_BYTES), async (c) => {
  const body = await readJsonBody(c, decideRequestSchema);
  return c.json({ accountId: body.accountId });
});
const declared = new Hono();
DECIDE_ROUTE.mount(declared, async (c) => {
  const body = await DECIDE_ROUTE.bodyOf(c);
  return c.json({ accountId: body.accountId });
});

const bodies = buildDecideBodies(1000);

async function timeApp(app: Hono): Promise<number> {
  const start = process.cpuUsage();
  for (let i = 0; i < requests; i++) {
    const body = bodies[i % bodies.length]!;
    const res = await app.request('/decide', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
      body,
    });
    if (res.status !== 200) throw new Error(`answered ${res.status}: ${await res.text()}`);
    await res.arrayBuffer();
  }
  const used = process.cpuUsage(start);
  return (used.user + used.system) / requests;
}

await timeApp(hand);
await timeApp(declared);
const figures = { hand: [] as number[], declared: [] as number[] };
for (let r = 0; r < runs; r++) {
  // Alternate which goes first, so neither always runs on a warmer heap.
  const order = r % 2 === 0 ? (['hand', 'declared'] as const) : (['declared', 'hand'] as const);
  for (const name of order) figures[name].push(await timeApp(name === 'hand' ? hand : declared));
}
const result = {
  requests,
  runs,
  handMedianUs: Number(median(figures.hand).toFixed(2)),
  declaredMedianUs: Number(median(figures.declared).toFixed(2)),
  ratio: Number((median(figures.declared) / median(figures.hand)).toFixed(3)),
};
if (args.json) console.log(JSON.stringify(result));
else {
  console.log(`hand-registered: ${figures.hand.map((f) => f.toFixed(2)).join(' ')} µs/request`);
  console.log(`declared:        ${figures.declared.map((f) => f.toFixed(2)).join(' ')} µs/request`);
  console.log(
    `medians ${result.handMedianUs} / ${result.declaredMedianUs} µs, declared ÷ hand ${result.ratio}`,
  );
}
