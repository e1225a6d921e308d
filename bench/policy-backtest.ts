import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { openDatabase } from '../src/database/database.ts';
import type { DecisionTables } from '../src/decision-store/decision-tables.ts';
import { computeEvidence } from '../src/policy-evidence/policy-evidence.ts';
import { DECISION_MIGRATIONS } from '../src/service/database-migrations.ts';
import { browserPolicy } from '../test/support/browser-policy.ts';
import { type ReplayableDecision, storeReplayable } from '../test/support/stored-decisions.ts';
import { median } from './bench-median.ts';

/**
 * A policy version's backtest (src/policy-evidence/policy-evidence.ts) over N decisions stored in a
 * SQLite decision store file: the time it takes, the process's peak RSS, and the longest the event
 * loop was held (what a decision waiting behind it would wait). The file is generated once (a
 * browser or mobile login per row, the recorded verdict of a policy that challenges browsers) and
 * reused; each run replays all of it with a draft that denies browsers and challenges some mobile
 * logins (about 70 % of the decisions change). Prints each run and the median.
 *
 *   npx tsx bench/policy-backtest.ts [--decisions 1000000] [--file /tmp/rg-backtest-1000000.sqlite] [--runs 3] [--threads N]
 */

const args = parseArgs({
  options: {
    decisions: { type: 'string', default: '1000000' },
    file: { type: 'string' },
    runs: { type: 'string', default: '3' },
    batch: { type: 'string', default: '1000' },
    threads: { type: 'string' },
  },
}).values;
const count = Number(args.decisions);
const file = args.file ?? `/tmp/rg-backtest-${count}.sqlite`;
const T0 = Date.parse('2026-11-28T00:00:00.000Z');

const DRAFT = `${browserPolicy('deny')}  - id: mobile
    description: mobile logins of some accounts
    when: request.platform == "mobile" && request.accountId.endsWith("7")
    verdict: challenge
`;

function* generated(n: number): Generator<ReplayableDecision> {
  for (let i = 0; i < n; i++) {
    const browser = i % 10 < 7;
    yield {
      id: `d${String(i).padStart(9, '0')}`,
      atMs: T0 + Math.floor((i * 86_400_000) / n),
      accountId: `acct-${i % 50_000}`,
      platform: browser ? 'browser' : 'mobile',
      verdict: browser ? 'challenge' : 'allow',
      score: 0,
      rules: browser ? ['browser'] : [],
      revision: 'r1',
    };
  }
}

const fresh = !existsSync(file);
const database = await openDatabase({ kind: 'sqlite', path: file }, { migrations: DECISION_MIGRATIONS });
const db = database.db.withTables<DecisionTables>();
if (fresh) {
  const started = performance.now();
  await storeReplayable(db, generated(count));
  console.log(
    `generated ${count} decisions into ${file} in ${((performance.now() - started) / 1000).toFixed(1)} s`,
  );
}
const runs: { seconds: number; perSecond: number; maxLoopMs: number; rssMiB: number }[] = [];
for (let r = 0; r < Number(args.runs); r++) {
  const loop = monitorEventLoopDelay({ resolution: 5 });
  loop.enable();
  const started = performance.now();
  const evidence = await computeEvidence(
    DRAFT,
    { fromMs: T0, toMs: T0 + 86_400_000 },
    {
      // The replay threads open the file read-only, each a connection of its own.
      decisions: () => ({ db, file }),
      batchSize: Number(args.batch),
      ...(args.threads !== undefined && { threads: Number(args.threads) }),
      maxDecisions: 10_000_000,
      timeLimitMs: 3_600_000,
    },
  );
  const seconds = (performance.now() - started) / 1000;
  loop.disable();
  const b = evidence.backtest!;
  const run = {
    seconds: Math.round(seconds * 10) / 10,
    perSecond: Math.round(b.decisions / seconds),
    maxLoopMs: Math.round(loop.max / 1e6),
    rssMiB: Math.round(process.resourceUsage().maxRSS / 1024),
  };
  runs.push(run);
  console.log(
    `run ${r + 1}: ${b.decisions} decisions, ${b.changed} changed, ${JSON.stringify(run)}, load average ${loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')}`,
  );
}
console.log(
  `median of ${runs.length}: ${median(runs.map((x) => x.seconds))} s, ${median(runs.map((x) => x.perSecond))} decisions/s, longest event-loop hold ${median(runs.map((x) => x.maxLoopMs))} ms; peak RSS ${Math.max(...runs.map((x) => x.rssMiB))} MiB`,
);
await database.close();
