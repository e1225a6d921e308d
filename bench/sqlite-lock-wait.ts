import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { openDatabase } from '../src/database/database.ts';
import { stateFiles } from '../src/database/state-files.ts';
import { storeOpOf } from '../src/decision-store/decision-rows.ts';
import { sqliteThreadSink } from '../src/decision-store/sqlite-thread-sink.ts';
import { LockoutStore } from '../src/lockouts/lockout-store.ts';
import { ALL_MIGRATIONS } from '../src/service/database-migrations.ts';

/**
 * The event loop's delay while the decision store's worker thread writes heavily to the embedded
 * database and lock-out records are written to the same file (SQLite lets one writer at a time).
 * The database's queries run on a thread of their own (src/database/sqlite-thread-dialect.ts), so
 * a write waiting for the store's lock waits there: the delay should stay near the monitor's floor.
 * Usage: npx tsx bench/sqlite-lock-wait.ts [seconds=5]
 */

const seconds = Number(process.argv[2] ?? 5);
const dir = mkdtempSync(join(tmpdir(), 'riskgate-lockwait-'));
const path = stateFiles(dir).control;
const database = await openDatabase({ kind: 'sqlite', path }, { migrations: ALL_MIGRATIONS });
const sink = sqliteThreadSink(path);
const store = new LockoutStore(database);
let seq = 0;
let batches = 0;
const batchOf = (n: number) =>
  Array.from({ length: n }, () => {
    seq++;
    return storeOpOf(
      {
        kind: 'decision',
        decisionId: `d-${seq}`,
        at: new Date().toISOString(),
        request: { accountId: `a-${seq % 100}`, ip: '192.0.2.1' },
        outcome: { verdict: 'deny', score: 90, rules: [{ id: 'r1' }, { id: 'r2' }] },
        policy: { revision: 'rev' },
      },
      Date.now(),
    )!;
  });

// Built before the clock starts: the measure is the lock wait, not the rows' building.
const prebuilt = Array.from({ length: seconds * 60 }, () => batchOf(500));
async function writeDecisions(): Promise<void> {
  for (const batch of prebuilt) {
    if (Date.now() >= endAt) return;
    await sink.write(batch);
    batches++;
  }
}

let written = 0;
let refused = 0;
let slowestWriteMs = 0;
async function writeLockouts(): Promise<void> {
  while (Date.now() < endAt) {
    const id = `l-${written + refused}`;
    const startedAt = performance.now();
    try {
      await store.add(
        { decisionId: id, userId: 'u', rule: 'r', createdMs: Date.now(), status: 'queued' },
        Date.now(),
      );
      written++;
    } catch {
      refused++;
    }
    slowestWriteMs = Math.max(slowestWriteMs, performance.now() - startedAt);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const endAt = Date.now() + seconds * 1000;
const delay = monitorEventLoopDelay({ resolution: 5 });
delay.enable();
await Promise.all([writeDecisions(), writeLockouts()]);
delay.disable();
console.log(
  JSON.stringify({
    seconds,
    decisionBatches: batches,
    lockoutWrites: written,
    lockoutWritesRefusedBusy: refused,
    slowestLockoutWriteMs: slowestWriteMs,
    eventLoopDelayMs: {
      p50: delay.percentile(50) / 1e6,
      p99: delay.percentile(99) / 1e6,
      max: delay.max / 1e6,
    },
  }),
);
await Promise.race([sink.close(), new Promise((r) => setTimeout(r, 2000))]);
await database.close();
rmSync(dir, { recursive: true, force: true });
