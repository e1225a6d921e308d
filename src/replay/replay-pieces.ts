import type { CompiledPolicy } from '../policy/policy-types.ts';
import { type ReplayStretchReply, type ReplayStretchTask, replayStretch } from './replay-stretch.ts';

/**
 * A log file replayed by several threads taking its pieces in turn: the file is cut at line ends
 * into pieces many times smaller than a thread's share, and each thread takes the next piece not
 * yet taken (one counter shared by all, `Atomics.add`) until none is left. On a machine whose
 * cores are shared, a thread that gets less of a core replays fewer pieces, where a fixed share
 * per thread waits for the slowest. Each piece is tallied apart (replay-stretch.ts) and the tallies
 * merged in the pieces' order, so the report is the one a single pass would give. Imports only
 * erasable TypeScript: a thread run from src/ loads it by Node's own type stripping.
 */

export interface ReplayPiecesTask extends Omit<ReplayStretchTask, 'source' | 'tallyChanges'> {
  pieces: {
    file: string;
    /** The pieces' byte ranges `[start, end)`, in log order, each starting at a line's first byte. */
    ranges: [number, number][];
    /** One Int32: the index of the next piece to take, shared by every thread of the replay. */
    next: SharedArrayBuffer;
    maxLineBytes: number;
  };
}

/** A piece's tally (or why it stopped), by its index in `ranges`. */
export interface PieceReply {
  index: number;
  reply: ReplayStretchReply;
}

export type ReplayPiecesReply =
  | { ok: true; pieces: PieceReply[] }
  | { ok: false; error: { message: string; code?: string; syscall?: string; path?: string } };

/**
 * Replays pieces with `policy` until none is left. A piece that fails (a line past the limit, a
 * read error) stops every thread taking more: the pieces before it were all taken already and are
 * finished, so the first failure in log order is among those reported.
 */
export async function replayPieces(
  policy: CompiledPolicy,
  task: ReplayPiecesTask,
): Promise<ReplayPiecesReply> {
  const { file, ranges, next, maxLineBytes } = task.pieces;
  const counter = new Int32Array(next);
  const pieces: PieceReply[] = [];
  for (;;) {
    const index = Atomics.add(counter, 0, 1);
    if (index >= ranges.length) return { ok: true, pieces };
    const [start, end] = ranges[index]!;
    const reply = await replayStretch(policy, {
      policy: task.policy,
      source: { kind: 'file', file, start, end, maxLineBytes },
      changedLimit: task.changedLimit,
      labelIds: task.labelIds,
      tallyChanges: false,
    }).catch(
      (e: NodeJS.ErrnoException): ReplayStretchReply => ({
        ok: false,
        error: { message: e.message, code: e.code, syscall: e.syscall, path: e.path },
      }),
    );
    pieces.push({ index, reply });
    if (!reply.ok) {
      Atomics.store(counter, 0, ranges.length);
      return { ok: true, pieces };
    }
  }
}
