/**
 * Bench only (issue 32): what the control file's SQLite thread (src/database/sqlite-query-thread.ts)
 * spends per transaction when the transactions come back to back and when they come spaced apart,
 * as a deny's do at a low rate (its append, its claim ~10 ms later, its completion after the Admin
 * call). In process, over the real store (DatabaseOutboxStore on a fresh control.sqlite): a cycle is
 * a deny's three transactions (append, claim, complete), each sent `gap` ms after the previous one
 * answered; `idle` sleeps the same gaps without a transaction (the main thread's timer cost alone).
 *
 * CPU comes from `/proc/self/task/<tid>/sched` (`se.sum_exec_runtime`, nanoseconds; the `stat`
 * file's clock ticks are 10 ms, too coarse per transaction), read before each transaction is sent,
 * so each transaction is charged all the thread did until the next one (its reply and going back
 * to sleep included). The thread is the `WorkerThread` the store's opening started.
 *
 *   npx tsx bench/control-thread-spacing.ts [--gaps 0,5,13,50] [--cycles 300] [--rounds 3]
 */
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { parseArgs } from 'node:util';
import { lockOutSpec, openDatabaseOutbox, outboxSqliteFile } from '../test/support/outbox-database.ts';

const { values } = parseArgs({
  options: {
    gaps: { type: 'string', default: '0,5,13,50' },
    cycles: { type: 'string', default: '300' },
    rounds: { type: 'string', default: '3' },
  },
});
const gaps = values.gaps.split(',').map(Number);
const cycles = Number(values.cycles);
const rounds = Number(values.rounds);

interface Sched {
  ns: number;
  switches: number;
}

function sched(tid: number | string): Sched {
  const text = readFileSync(`/proc/self/task/${tid}/sched`, 'utf8');
  const field = (name: string) => Number(new RegExp(`${name}\\s*:\\s*([0-9.]+)`).exec(text)![1]);
  return { ns: Math.round(field('se.sum_exec_runtime') * 1e6), switches: field('nr_switches') };
}

/** The `WorkerThread` started since `before` was listed (tsx's loader runs one of its own). */
function workerTid(before: readonly string[]): string {
  const tids = readdirSync('/proc/self/task').filter(
    (t) => !before.includes(t) && readFileSync(`/proc/self/task/${t}/comm`, 'utf8').trim() === 'WorkerThread',
  );
  if (tids.length !== 1) throw new Error(`expected one WorkerThread, found ${tids.length}`);
  return tids[0]!;
}

const sleep = (ms: number) =>
  ms === 0 ? Promise.resolve() : new Promise<void>((resolve) => setTimeout(resolve, ms));

const threadsBefore = readdirSync('/proc/self/task');
const target = outboxSqliteFile('control-thread-spacing-');
const store = await openDatabaseOutbox(target);
const tid = workerTid(threadsBefore);
const main = process.pid;
const owner = 'bench';
let n = 0;

type Kind = 'append' | 'claim' | 'complete' | 'idle';
type Totals = Record<Kind, { thread: number; main: number; switches: number; count: number }>;
const empty = (): Totals => ({
  append: { thread: 0, main: 0, switches: 0, count: 0 },
  claim: { thread: 0, main: 0, switches: 0, count: 0 },
  complete: { thread: 0, main: 0, switches: 0, count: 0 },
  idle: { thread: 0, main: 0, switches: 0, count: 0 },
});

/** `cycles` denies' transactions, each `gap` ms after the last answer; then as many idle gaps. */
async function run(gap: number, totals: Totals): Promise<void> {
  let kind: Kind | undefined;
  let before = { t: sched(tid), m: sched(main) };
  const mark = (next: Kind | undefined) => {
    const now = { t: sched(tid), m: sched(main) };
    if (kind !== undefined) {
      const k = totals[kind];
      k.thread += now.t.ns - before.t.ns;
      k.main += now.m.ns - before.m.ns;
      k.switches += now.t.switches - before.t.switches;
      k.count++;
    }
    kind = next;
    before = now;
  };
  for (let i = 0; i < cycles; i++) {
    const s = lockOutSpec(n, `u${n}`);
    n++;
    await sleep(gap);
    mark('append');
    const [appended] = await store.append([s], Date.now());
    if (appended !== true) throw new Error('append refused');
    await sleep(gap);
    mark('claim');
    const claimed = await store.claim(owner, 4, Date.now(), 10_000);
    if (claimed.length !== 1) throw new Error(`claimed ${claimed.length}`);
    await sleep(gap);
    mark('complete');
    if (!(await store.complete(s.id, owner, Date.now()))) throw new Error('not completed');
  }
  for (let i = 0; i < cycles; i++) {
    await sleep(gap);
    mark('idle');
  }
  await sleep(gap);
  mark(undefined);
}

// Warm: the statements prepared, the JIT's first tiers done, on both threads.
await run(0, empty());
const byGap = new Map<number, Totals[]>();
for (let r = 0; r < rounds; r++)
  for (const gap of gaps) {
    const totals = empty();
    await run(gap, totals);
    byGap.set(gap, [...(byGap.get(gap) ?? []), totals]);
  }
await store.close();
rmSync(dirname((target as { path: string }).path), { recursive: true, force: true });

const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`${cycles} cycles per round, ${rounds} rounds, median µs per transaction (thread's switches)`);
console.log(
  '| gap ms | append thread | claim thread | complete thread | mean thread | main per tx (idle gap) |',
);
console.log('|---|---|---|---|---|---|');
for (const gap of gaps) {
  const all = byGap.get(gap)!;
  const per = (k: Kind, f: 'thread' | 'main' | 'switches') => median(all.map((t) => t[k][f] / t[k].count));
  const us = (ns: number) => (ns / 1000).toFixed(0);
  const kinds: Kind[] = ['append', 'claim', 'complete'];
  const mean = median(all.map((t) => kinds.reduce((a, k) => a + t[k].thread / t[k].count, 0) / 3));
  const mainTx = median(all.map((t) => kinds.reduce((a, k) => a + t[k].main / t[k].count, 0) / 3));
  console.log(
    `| ${gap} | ${kinds.map((k) => `${us(per(k, 'thread'))} (${per(k, 'switches').toFixed(1)})`).join(' | ')} | ${us(mean)} | ${us(mainTx)} (${us(per('idle', 'main'))}) |`,
  );
}
