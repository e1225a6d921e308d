import { mkdtempSync, rmSync } from 'node:fs';
import { get } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { sleep } from '../src/timing/sleep.ts';
import { signalTree, spawnTree } from '../test/support/process-tree.ts';
import { medianOf } from './bench-median.ts';
import { freePort } from './bench-processes.ts';

/**
 * How long `npm start` takes from "riskgate listening" to its banner, and from the first 200 of
 * `/readyz` to the banner (issue 31: within 2 s of readiness), with `--workers` workers on the
 * embedded sandbox; and which verdicts the demo logins sent at start got. Each run is a fresh
 * `npm start` in `--dir` (default this repository; give another checkout to compare), a fresh
 * state dir and free ports, killed once the banner is out. `/readyz` is polled every 50 ms on a
 * connection of its own from the moment riskgate listens.
 * Usage: npx tsx bench/start-banner.ts [--runs 5] [--workers 2] [--dir <checkout>]
 */

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    workers: { type: 'string', default: '2' },
    dir: { type: 'string', default: resolve(import.meta.dirname, '..') },
  },
});

interface Run {
  listeningMs: number;
  bannerAfterListeningMs: number;
  firstReadyAfterListeningMs: number | undefined;
  sent: string;
}

/** `GET /readyz`'s status on a connection of its own (0 when it fails). */
function status(url: string): Promise<number> {
  return new Promise((done) => {
    const req = get(url, { agent: false, timeout: 1000 }, (res) => {
      res.resume();
      done(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => done(0));
  });
}

async function once(): Promise<Run> {
  const port = await freePort();
  const stateDir = mkdtempSync(join(tmpdir(), 'riskgate-banner-'));
  const started = performance.now();
  const child = spawnTree('npm', ['start'], {
    cwd: values.dir,
    env: {
      ...process.env,
      RISKGATE_WORKERS: values.workers,
      RISKGATE_PORT: String(port),
      RISKGATE_HOST: '127.0.0.1',
      SANDBOX_PORT: '0',
      RISKGATE_STATE_DIR: stateDir,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let listening: number | undefined;
  let firstReady: number | undefined;
  let banner: { at: number; sent: string } | undefined;
  const poll = async () => {
    while (banner === undefined) {
      if (firstReady === undefined && (await status(`http://127.0.0.1:${port}/readyz`)) === 200) {
        firstReady = performance.now();
      }
      await sleep(50);
    }
  };
  try {
    await new Promise<void>((done, fail) => {
      const timer = setTimeout(
        () => fail(new Error(`no banner within 120 s:\n${out.slice(-2000)}`)),
        120_000,
      );
      const read = (chunk: Buffer) => {
        out += chunk.toString('utf8');
        if (listening === undefined && out.includes('"msg":"riskgate listening"')) {
          listening = performance.now();
          void poll();
        }
        const sent = /each demo login was sent once at start \(([^)]*)\)/.exec(out);
        if (sent !== null && out.includes('Try a login of each demo account')) {
          banner = { at: performance.now(), sent: sent[1]! };
          clearTimeout(timer);
          done();
        }
      };
      child.stdout!.on('data', read);
      child.stderr!.on('data', read);
    });
  } finally {
    signalTree(child, 'SIGKILL');
    rmSync(stateDir, { recursive: true, force: true });
  }
  return {
    listeningMs: Math.round(listening! - started),
    bannerAfterListeningMs: Math.round(banner!.at - listening!),
    firstReadyAfterListeningMs: firstReady === undefined ? undefined : Math.round(firstReady - listening!),
    sent: banner!.sent,
  };
}

const runs: Run[] = [];
for (let i = 0; i < Number(values.runs); i++) {
  const run = await once();
  runs.push(run);
  console.log(JSON.stringify(run));
}
const afterReady = runs.flatMap((r) =>
  r.firstReadyAfterListeningMs === undefined ? [] : [r.bannerAfterListeningMs - r.firstReadyAfterListeningMs],
);
console.log(
  `${values.workers} workers, ${runs.length} runs (median): listening → banner ${medianOf(runs.map((r) => r.bannerAfterListeningMs))} ms; ` +
    `first /readyz 200 → banner ${medianOf(afterReady)} ms (max ${Math.max(...afterReady)} ms); ` +
    `demo verdicts as expected (alice allow, mallory deny) in ${runs.filter((r) => /alice: allow.*mallory: deny/.test(r.sent)).length} of ${runs.length}`,
);
