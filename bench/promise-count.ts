/**
 * The async machinery per answered decision of a server (issue 32), loaded into it with
 * `--import`: waits for `PROMISE_COUNT_WARMUP` answered `POST /decide` (2xx; default 1000), counts
 * (bench/promise-counter.ts) over the next `PROMISE_COUNT_DECISIONS` (default 2000) everything the
 * main thread made meanwhile, background work included, and writes the counts per decision as JSON
 * to `PROMISE_COUNT_OUT` (default `/tmp/promise-count-<pid>.json`), a summary on stderr.
 *
 *   PROMISE_COUNT_WARMUP=300 PROMISE_COUNT_DECISIONS=1000 npx tsx bench/hot-path-cpu.ts --rounds 1 \
 *     --connections 8 --duration 60 --builds riskgate=bench/riskgate-under-bench.ts~--import=$PWD/bench/promise-count.ts,peer=peer~--import=$PWD/bench/promise-count.ts
 *
 * Counts, never times: the stacks it takes make the server several times slower.
 */
import { subscribe } from 'node:diagnostics_channel';
import { writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isMainThread } from 'node:worker_threads';
import { type PromiseCounts, startPromiseCount } from './promise-counter.ts';

const WARMUP = Number(process.env.PROMISE_COUNT_WARMUP ?? 1000);
const DECISIONS = Number(process.env.PROMISE_COUNT_DECISIONS ?? 2000);
const OUT = process.env.PROMISE_COUNT_OUT ?? `/tmp/promise-count-${process.pid}.json`;

if (isMainThread) {
  let decisions = 0;
  let counting: { stop(): PromiseCounts } | undefined;
  subscribe('http.server.response.finish', (message) => {
    const { request, response } = message as { request: IncomingMessage; response: ServerResponse };
    if (request.method !== 'POST' || request.url !== '/decide' || response.statusCode >= 300) return;
    decisions++;
    if (decisions === WARMUP) counting = startPromiseCount();
    if (decisions === WARMUP + DECISIONS && counting !== undefined) report(counting.stop());
  });
}

function report({ total, byFile }: PromiseCounts): void {
  const per = (n: number) => Math.round((n / DECISIONS) * 100) / 100;
  const kinds = [...total].sort((a, b) => b[1] - a[1]);
  const result = {
    decisions: DECISIONS,
    perDecision: Object.fromEntries(kinds.map(([k, n]) => [k, per(n)])),
    byFile: Object.fromEntries(
      kinds
        .filter(([k]) => byFile.has(k))
        .map(([k]) => [
          k,
          Object.fromEntries(
            [...byFile.get(k)!]
              .sort((a, b) => b[1] - a[1])
              .filter(([, n]) => per(n) >= 0.01)
              .map(([f, n]) => [f, per(n)]),
          ),
        ]),
    ),
  };
  writeFileSync(OUT, `${JSON.stringify(result, null, 2)}\n`);
  process.stderr.write(`promise-count: ${JSON.stringify(result.perDecision)} → ${OUT}\n`);
}
