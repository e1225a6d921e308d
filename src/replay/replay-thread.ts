import { createReadStream } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { NdjsonLines } from '../logs/ndjson-lines.ts';
import { loadPolicy } from '../policy/policy-loader.ts';
import { type ReplayPartial, ReplayTally } from './replay-tally.ts';

/**
 * One stretch of a decision log replayed on a worker thread (`replayDecisions` with threads): the
 * candidate loaded again from its path (a compiled policy holds functions, which a thread cannot be
 * handed), checked to be the same revision, then bytes `start` to `end` of `file` read and replayed.
 * Loaded by Node's own type stripping when run from src/: everything it imports is erasable TypeScript.
 */

export interface ReplayThreadTask {
  policyPath: string;
  /** The revision the caller compiled: a policy edited meanwhile is refused, not replayed. */
  revision: string;
  file: string;
  /** Byte range, `end` exclusive; `start` is a line's first byte. */
  start: number;
  end: number;
  changedLimit: number;
  labelIds: string[];
  maxLineBytes: number;
}

export type ReplayThreadReply =
  | { ok: true; partial: ReplayPartial; linesEnded: number }
  /** A line past `maxLineBytes`, numbered from the stretch's first line. */
  | { ok: false; tooLong: number }
  | { ok: false; error: { message: string; code?: string; syscall?: string; path?: string } };

async function replayStretch(task: ReplayThreadTask): Promise<ReplayThreadReply> {
  const policy = await loadPolicy(task.policyPath);
  if (policy.revision !== task.revision) {
    return {
      ok: false,
      error: { message: `${task.policyPath} changed while the replay started (${policy.revision})` },
    };
  }
  const labelIds = task.labelIds.length === 0 ? undefined : new Set(task.labelIds);
  const tally = new ReplayTally(policy, task.changedLimit, labelIds);
  const lines = new NdjsonLines(task.maxLineBytes);
  const add = (text: string, lineNo: number) => {
    tally.add(text, lineNo);
    return true;
  };
  const stream = createReadStream(task.file, {
    start: task.start,
    end: task.end - 1,
    highWaterMark: 1 << 20,
  });
  for await (const chunk of stream) {
    if (!lines.push(chunk as Buffer, add)) {
      stream.destroy();
      return { ok: false, tooLong: lines.linesEnded + 1 };
    }
  }
  const last = lines.end();
  if (last !== undefined) add(last, lines.linesEnded + 1);
  return { ok: true, partial: tally.partial, linesEnded: lines.linesEnded };
}

const task = workerData as ReplayThreadTask;
replayStretch(task).then(
  (reply) => parentPort?.postMessage(reply),
  (e: NodeJS.ErrnoException) =>
    parentPort?.postMessage({
      ok: false,
      error: { message: e.message, code: e.code, syscall: e.syscall, path: e.path },
    } satisfies ReplayThreadReply),
);
