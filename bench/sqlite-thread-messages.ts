/**
 * Bench only (issue 32): counts the requests riskgate's main thread posts to its SQLite query
 * threads (src/database/sqlite-thread-dialect.ts: each one a message there, a wake-up of the
 * thread and a message back), by kind and by statement, and writes the counts to
 * `$SQLITE_THREAD_MESSAGES_DIR/<pid>.json` every second and at exit. A preload, so any tree (a
 * `git archive` of main) is counted unchanged; plain erasable TypeScript, loaded by Node itself
 * before tsx:
 *
 *   SQLITE_THREAD_MESSAGES_DIR=/tmp/counts \
 *   BENCH_RISKGATE_NODE_ARGS="--import $PWD/bench/sqlite-thread-messages.ts" npm run bench -- ...
 *
 * Every deny of bench/deny-heavy-policy.yaml writes one lock-out record with its outbox append
 * (`insert into "lockout"`), so messages per deny = messages ÷ that statement's count. `byShape`
 * counts the messages by what they carry (each statement's first words, in order: `script: insert
 * into "outbox_entry" + insert into "lockout" + UPDATE outbox_entry SET lease_owner`), which tells
 * the delivery's messages (appends, claims, completions, marks) from the start's and the polls'.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isMainThread, Worker } from 'node:worker_threads';

interface Counts {
  messages: number;
  statements: number;
  byKind: Record<string, number>;
  bySql: Record<string, number>;
  byShape: Record<string, number>;
}

type Request = { type?: unknown; sql?: unknown; begin?: unknown; statements?: unknown };

/** A statement's text without its parameters' count: `in (?, ?, ?)` of any length is one key. */
function keyOf(sql: string): string {
  return sql
    .replace(/\s+/g, ' ')
    .replace(/\(\?(, \?)*\)/g, '(?…)')
    .replace(/(\(\?…\), )+\(\?…\)/g, '(?…), …')
    .slice(0, 90);
}

/** A statement's first words, its table included (`update "outbox_entry" set "status"`). */
function shapeOf(sql: string): string {
  return sql.replace(/\s+/g, ' ').split(' ').slice(0, 4).join(' ');
}

const dir = process.env.SQLITE_THREAD_MESSAGES_DIR;
// Main thread only: a preload runs in every worker thread too, and they share the pid's file name.
if (isMainThread && dir !== undefined && dir !== '') {
  mkdirSync(dir, { recursive: true });
  const counts: Counts = { messages: 0, statements: 0, byKind: {}, bySql: {}, byShape: {} };
  const add = (record: Record<string, number>, key: string) => {
    record[key] = (record[key] ?? 0) + 1;
  };
  // By the text as sent (a map lookup), keyed for reading only when written: the count costs the
  // process little beside the messages it counts.
  const bySql = new Map<string, number>();
  const statement = (sql: string) => {
    counts.statements++;
    bySql.set(sql, (bySql.get(sql) ?? 0) + 1);
  };
  const post = Worker.prototype.postMessage;
  Worker.prototype.postMessage = function (
    this: Worker,
    message: unknown,
    transfer?: Parameters<Worker['postMessage']>[1],
  ) {
    const m = message as Request | null;
    // The SQLite query thread's requests; the decision store's thread takes 'write' and 'prune'.
    if (m !== null && typeof m === 'object' && (m.type === 'query' || m.type === 'script')) {
      counts.messages++;
      if (m.type === 'script' && Array.isArray(m.statements)) {
        add(counts.byKind, 'script');
        statement('begin');
        const statements = m.statements as Array<{ sql: string }>;
        for (const s of statements) statement(s.sql);
        statement('commit');
        add(counts.byShape, `script: ${statements.map((s) => shapeOf(s.sql)).join(' + ')}`);
      } else if (typeof m.sql === 'string') {
        add(counts.byKind, m.begin === true ? 'query+begin' : 'query');
        if (m.begin === true) statement('begin');
        statement(m.sql);
        add(counts.byShape, `query: ${shapeOf(m.sql)}`);
      }
    }
    return post.call(this, message, transfer);
  };
  const write = () => {
    counts.bySql = {};
    for (const [sql, n] of bySql) counts.bySql[keyOf(sql)] = (counts.bySql[keyOf(sql)] ?? 0) + n;
    writeFileSync(join(dir, `${process.pid}.json`), `${JSON.stringify(counts, null, 1)}\n`);
  };
  setInterval(write, 1000).unref();
  process.on('exit', write);
}
