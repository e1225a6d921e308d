import { parentPort, workerData } from 'node:worker_threads';
import { compilePolicy } from '../policy/policy-compiler.ts';
import { loadPolicy } from '../policy/policy-loader.ts';
import type { CompiledPolicy } from '../policy/policy-types.ts';
import { type ReplayPiecesReply, type ReplayPiecesTask, replayPieces } from './replay-pieces.ts';
import { type ReplayStretchReply, type ReplayStretchTask, replayStretch } from './replay-stretch.ts';

/**
 * A replay thread (src/replay/replay-threads.ts starts it): the candidate compiled again from its
 * path or its YAML (a compiled policy holds functions, which a thread cannot be handed), checked to
 * be the revision the caller compiled, then its stretch replayed (replay-stretch.ts), or pieces of
 * a log file taken in turn with the other threads (replay-pieces.ts), and the tallies posted back. Loaded by Node's own type stripping when run from src/: everything it imports is
 * erasable TypeScript.
 */

async function candidate(task: ReplayStretchTask | ReplayPiecesTask): Promise<CompiledPolicy | string> {
  const p = task.policy;
  if ('path' in p) {
    const policy = await loadPolicy(p.path);
    return policy.revision === p.revision
      ? policy
      : `${p.path} changed while the replay started (${policy.revision})`;
  }
  const compiled = compilePolicy('policy-version', p.yaml);
  if (compiled.policy === undefined) return 'the candidate does not compile on the replay thread';
  return compiled.policy.revision === p.revision
    ? compiled.policy
    : `the candidate compiled to ${compiled.policy.revision} on the replay thread`;
}

async function run(
  task: ReplayStretchTask | ReplayPiecesTask,
): Promise<ReplayStretchReply | ReplayPiecesReply> {
  const policy = await candidate(task);
  if (typeof policy === 'string') return { ok: false, error: { message: policy } };
  return 'pieces' in task ? replayPieces(policy, task) : replayStretch(policy, task);
}

run(workerData as ReplayStretchTask | ReplayPiecesTask).then(
  (reply) => parentPort?.postMessage(reply),
  (e: NodeJS.ErrnoException) =>
    parentPort?.postMessage({
      ok: false,
      error: { message: e.message, code: e.code, syscall: e.syscall, path: e.path },
    } satisfies ReplayStretchReply),
);
