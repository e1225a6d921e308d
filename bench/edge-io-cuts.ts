/**
 * The main thread's I/O-side cuts of issue 32, session 7, one by one in one process: each cut's
 * operation as a decision runs it, on the `--before` tree's code and on this tree's, alternating
 * rounds, CPU time (`process.cpuUsage`) per operation. In-process and without the network, so it
 * reads the cut itself where `bench/hot-path-cpu.ts` (the whole decision) cannot resolve a few
 * microseconds on a loaded machine.
 *
 *   npx tsx bench/edge-io-cuts.ts --before /tmp/riskgate-before [--rounds 5] [--ops 20000]
 *
 * (`--before`: a tree of the build to compare, e.g. `git archive main | tar -x -C /tmp/riskgate-before`
 * with `node_modules` linked; run with TSX_TSCONFIG_PATH naming a tsconfig that includes both trees.)
 *
 * - caller key: the `keyAuth` middleware of `/decide` (caller and operator keyrings) on a valid key;
 * - upstream call metric: `recordUpstreamCall`, as every upstream call reports;
 * - decision metrics: `recordDecision`, `recordRuleHits` (2 rules), `recordActionAnswer`, as
 *   src/decide/after-decision.ts reports a decision;
 * - signal answer: `JSON.parse` and the zod schema of a latest-proximity and a geovelocity answer
 *   (their RFC 3339 timestamps are checked by `src/timing/rfc3339.ts`);
 * - three attempts on one decision signal: `sendAttempt` over a dispatcher answering at once.
 */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { median } from './bench-median.ts';

const { values } = parseArgs({
  options: {
    before: { type: 'string' },
    rounds: { type: 'string', default: '5' },
    ops: { type: 'string', default: '20000' },
  },
});
if (values.before === undefined) throw new Error('--before <tree> is required');
const rounds = Number(values.rounds);
const ops = Number(values.ops);

const LATEST_PROXIMITY = JSON.stringify({
  signalType: 'latest_proximity',
  success: true,
  result: {
    proximityConfidence: 0.941,
    supportingSignals: [
      { type: 'reportedIpOverlap', details: { matched: true, matchCount: null } },
      { type: 'wifiNetworkOverlap', details: { matched: true, matchCount: 2 } },
      { type: 'ingressIpCityOverlap', details: { matched: true, matchCount: null } },
    ],
  },
  observationTimesByUnit: {
    baselineUnitId: '2026-11-29T06:07:38.191Z',
    subjectUnitId: '2026-11-29T08:06:38.191Z',
  },
});
const GEOVELOCITY = JSON.stringify({
  signalType: 'geovelocity',
  success: true,
  result: {
    anomaly: true,
    maxSpeedKmh: 35023.2,
    sources: [
      {
        locationSource: 'gps',
        evaluated: true,
        anomaly: true,
        maxSpeedKmh: 35023.2,
        thresholdKmh: 1000,
        evaluatedPairCount: 1,
        fastestPair: {
          fromObservationTime: '2026-11-29T07:55:38.191Z',
          toObservationTime: '2026-11-29T08:05:38.191Z',
          fromUnitId: 'trudy-app',
          fromVerificationStatus: 'unverified',
          fromInteractionId: 'trudy-login-1',
          toUnitId: 'trudy-app',
          toVerificationStatus: 'unverified',
          toInteractionId: 'trudy-login-1',
          distanceKm: 5837.2,
          elapsedSeconds: 600,
          speedKmh: 35023.2,
        },
      },
    ],
  },
  observationTime: '2026-11-29T08:05:38.191Z',
});

const RULES = [{ id: 'new-device' }, { id: 'far-away' }];
const CALLER_KEY = 'bench-caller-key-0123456789abcdef';
const OPS_KEY = 'bench-operator-key-0123456789abcdef';

type Op = () => unknown;
interface Cut {
  name: string;
  op: Op;
}

/** The cuts' operations on the tree at `root`. */
async function cutsOf(root: string): Promise<Cut[]> {
  const auth = await import(resolve(root, 'src/edge/caller-auth.ts'));
  const metricsMod = await import(resolve(root, 'src/observability/metrics.ts'));
  const schemas = await import(resolve(root, 'src/signals/signal-schemas.ts'));
  const request = await import(resolve(root, 'src/upstream/upstream-request.ts'));

  const middleware = auth.keyAuth({ caller: [CALLER_KEY], operator: [`ops:admin:${OPS_KEY}`] });
  const header = `Bearer ${CALLER_KEY}`;
  const context = { req: { header: () => header }, set: () => {} };
  const next = async () => {};

  const metrics = metricsMod.createMetrics({ runtime: false });
  const operations = ['new-browser', 'latest-proximity', 'active-call', 'geovelocity'];
  let i = 0;

  // A dispatcher answering every request at once with a small 200 (no socket).
  const body = Buffer.from('{}');
  const dispatcher = {
    dispatch(_opts: unknown, handler: Record<string, (...a: unknown[]) => void>) {
      queueMicrotask(() => {
        const controller = { aborted: false, abort() {} };
        handler.onRequestStart!(controller);
        handler.onResponseStart!(controller, 200, {});
        handler.onResponseData!(controller, body);
        handler.onResponseEnd!(controller, {});
      });
      return true;
    },
  };
  const req = { method: 'GET', path: '/signals/new-browser', headers: { accept: 'application/json' } };
  const settings = (signal: AbortSignal) => ({
    upstream: 'signals',
    operation: 'new-browser',
    timeoutMs: 1000,
    signal,
    maxBodyBytes: 1 << 20,
    lateAnswerGraceMs: 0,
  });

  return [
    { name: 'caller key (keyAuth)', op: () => middleware(context, next) },
    {
      name: 'upstream call metric',
      op: () => metrics.recordUpstreamCall('signals', operations[i++ & 3], 3.2),
    },
    {
      name: 'decision metrics (verdict, 2 rules, 1 action)',
      op: () => {
        metrics.recordDecision('allow', false, 4.1);
        metrics.recordRuleHits('active', 'r1', RULES);
        metrics.recordActionAnswer('lock-out', 'queued');
      },
    },
    {
      name: 'signal answers (2, 5 timestamps)',
      op: () => {
        schemas.latestProximityResponseSchema.safeParse(JSON.parse(LATEST_PROXIMITY));
        return schemas.geovelocityResponseSchema.safeParse(JSON.parse(GEOVELOCITY));
      },
    },
    {
      name: '3 attempts, 1 decision signal',
      op: () => {
        const signal = new AbortController().signal;
        return Promise.all([
          request.sendAttempt(dispatcher, req, settings(signal)),
          request.sendAttempt(dispatcher, req, settings(signal)),
          request.sendAttempt(dispatcher, req, settings(signal)),
        ]);
      },
    },
  ];
}

/** CPU microseconds per operation over `ops` operations (awaiting those that return promises). */
async function measure(op: Op): Promise<number> {
  const first = op();
  const async = first instanceof Promise;
  if (async) await first;
  const start = process.cpuUsage();
  if (async) for (let k = 0; k < ops; k++) await op();
  else for (let k = 0; k < ops; k++) op();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / ops;
}

const builds = [
  { name: 'before', cuts: await cutsOf(resolve(values.before)) },
  { name: 'after', cuts: await cutsOf(resolve(import.meta.dirname, '..')) },
];
const figures = new Map<string, number[]>();
for (let round = 1; round <= rounds + 1; round++) {
  // Round 1 warms up (JIT, first series); alternating order after it.
  const order = round % 2 === 1 ? builds : [...builds].reverse();
  for (const build of order) {
    for (const cut of build.cuts) {
      const us = await measure(cut.op);
      if (round === 1) continue;
      const key = `${cut.name}\t${build.name}`;
      figures.set(key, [...(figures.get(key) ?? []), us]);
    }
  }
}
console.log('| operation | before µs | after µs | after / before |');
console.log('|---|---:|---:|---:|');
for (const cut of builds[0]!.cuts) {
  const b = median(figures.get(`${cut.name}\tbefore`)!);
  const a = median(figures.get(`${cut.name}\tafter`)!);
  console.log(`| ${cut.name} | ${b.toFixed(2)} | ${a.toFixed(2)} | ${(a / b).toFixed(2)} |`);
}
