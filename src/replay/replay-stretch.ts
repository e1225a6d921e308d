import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { setImmediate as turnOfTheEventLoop } from 'node:timers/promises';
import pg from 'pg';
import { type PostgresConnection, pgClientConfig } from '../database/postgres-connection.ts';
import type { CompiledPolicy } from '../policy/policy-types.ts';
import { ChangeTally, type ReplayChanges } from './replay-changes.ts';
import { readLineBytes } from './replay-file-lines.ts';
import { pageQuery, type StoredLine, type StoreStretch } from './replay-store.ts';
import { type ReplayPartial, ReplayTally } from './replay-tally.ts';

/**
 * One stretch of decisions replayed with a candidate: the one evaluation path of `riskgate replay`
 * (a byte range of a decision log file) and of a policy version's backtest (a stretch of the
 * decision store's window, read in keyset pages over a connection of its own: a read-only SQLite
 * connection, or a PostgreSQL client). Run on a worker thread (replay-thread.ts), or in process for
 * a store no thread can open (a process-private database: `pages`). Imports only erasable
 * TypeScript: a thread run from src/ loads it by Node's own type stripping.
 */

/** Where the stretch's lines are. */
export type StretchSource =
  | { kind: 'file'; file: string; start: number; end: number; maxLineBytes: number }
  | ({ kind: 'sqlite'; path: string } & StoreRead)
  | ({ kind: 'postgres'; connection: PostgresConnection } & StoreRead);

/** How a stretch of the decision store is read. */
export interface StoreRead {
  stretch: StoreStretch;
  /** Rows per page. */
  pageSize: number;
  /** No page is read after this time (epoch ms, `Date.now()`): the backtest's time limit. */
  deadlineMs: number;
}

export interface ReplayStretchTask {
  /** What the caller compiled: a thread compiles it again (a compiled policy holds functions). */
  policy: { path: string; revision: string } | { yaml: string; revision: string };
  source: StretchSource;
  changedLimit: number;
  labelIds: string[];
  /** Count the changes by verdict pair and by rule (a backtest's evidence). */
  tallyChanges: boolean;
}

export type ReplayStretchReply =
  | {
      ok: true;
      partial: ReplayPartial;
      linesEnded: number;
      changes?: ReplayChanges;
      /** A store stretch left at its deadline: the time of the last decision read (or its start). */
      stoppedAtMs?: number;
    }
  /** A line past `maxLineBytes`, numbered from the stretch's first line. */
  | { ok: false; tooLong: number }
  | { ok: false; error: { message: string; code?: string; syscall?: string; path?: string } };

/** Reads one page of a store stretch. */
export type PageReader = (stretch: StoreStretch, limit: number) => Promise<StoredLine[]> | StoredLine[];

/** A store stretch read through `pages` on the calling thread, the event loop given a turn between pages. */
export type InProcessSource = { kind: 'pages'; pages: PageReader } & StoreRead;

/** Replays the task's stretch with `policy`. */
export async function replayStretch(
  policy: CompiledPolicy,
  task: ReplayStretchTask | (Omit<ReplayStretchTask, 'source' | 'policy'> & { source: InProcessSource }),
): Promise<ReplayStretchReply> {
  const labelIds = task.labelIds.length === 0 ? undefined : new Set(task.labelIds);
  const changes = task.tallyChanges ? new ChangeTally() : undefined;
  const tally = new ReplayTally(
    policy,
    task.changedLimit,
    labelIds,
    changes === undefined ? undefined : (c, before, after) => changes.add(c, before, after),
  );
  const done = (linesEnded: number, stoppedAtMs?: number): ReplayStretchReply => ({
    ok: true,
    partial: tally.partial,
    linesEnded,
    ...(changes !== undefined && { changes: changes.changes }),
    ...(stoppedAtMs !== undefined && { stoppedAtMs }),
  });
  const s = task.source;
  if (s.kind === 'pages') {
    const r = await replayStore(tally, s.pages, s, true);
    return done(r.read, r.stoppedAtMs);
  }
  if (s.kind === 'file') return replayFile(tally, s, done);
  if (s.kind === 'sqlite') {
    const db = new DatabaseSync(s.path, { readOnly: true, timeout: 5000 });
    try {
      const statements = new Map<string, StatementSync>();
      const pages: PageReader = (stretch, limit) => {
        const q = pageQuery(stretch, limit, () => '?');
        let st = statements.get(q.text);
        if (st === undefined) {
          st = db.prepare(q.text);
          statements.set(q.text, st);
        }
        return st.all(...q.params) as unknown as StoredLine[];
      };
      const r = await replayStore(tally, pages, s, false);
      return done(r.read, r.stoppedAtMs);
    } finally {
      db.close();
    }
  }
  const client = new pg.Client({ ...pgClientConfig(s.connection), application_name: 'riskgate backtest' });
  // Unheard, a connection's error would end the thread; the next query fails and says why.
  client.on('error', () => {});
  await client.connect();
  try {
    const pages: PageReader = async (stretch, limit) => {
      const q = pageQuery(stretch, limit, (n) => `$${n}`);
      return (await client.query<StoredLine>(q.text, q.params)).rows;
    };
    const r = await replayStore(tally, pages, s, false);
    return done(r.read, r.stoppedAtMs);
  } finally {
    await client.end().catch(() => {});
  }
}

async function replayFile(
  tally: ReplayTally,
  s: Extract<StretchSource, { kind: 'file' }>,
  done: (linesEnded: number) => ReplayStretchReply,
): Promise<ReplayStretchReply> {
  const read = await readLineBytes(s.file, s, s.maxLineBytes, (buf, start, end, lineNo) =>
    tally.addBytes(buf, start, end, lineNo),
  );
  return 'tooLong' in read ? { ok: false, tooLong: read.tooLong } : done(read.linesEnded);
}

/** The stretch's pages replayed in order, until its end or its deadline. */
async function replayStore(
  tally: ReplayTally,
  pages: PageReader,
  s: StoreRead,
  yieldBetweenPages: boolean,
): Promise<{ read: number; stoppedAtMs?: number }> {
  let stretch = s.stretch;
  let read = 0;
  for (;;) {
    if (Date.now() > s.deadlineMs) return { read, stoppedAtMs: stretch.after?.atMs ?? stretch.fromMs };
    const rows = await pages(stretch, s.pageSize);
    for (const row of rows) tally.add(row.line, ++read);
    if (rows.length < s.pageSize) return { read };
    const last = rows[rows.length - 1]!;
    stretch = { ...stretch, after: { atMs: Number(last.at_ms), id: last.decision_id } };
    if (yieldBetweenPages) await turnOfTheEventLoop();
  }
}
