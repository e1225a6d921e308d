import { mkdir, open, readFile, rename } from 'node:fs/promises';
import { dirname } from 'node:path';
import { z } from 'zod';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';

/**
 * Where a log poller records how far it got: the start of the next window, and the IDs of events
 * it delivered inside the re-read overlap (so a restart neither loses nor repeats an event).
 */
export const logCheckpointSchema = z.object({
  version: z.literal(1),
  /** Start of the next window to read, epoch ms (whole seconds). */
  cursorMs: z.number().int().nonnegative(),
  /** `[event_id, created_at in epoch ms]` of delivered events that the next overlap will re-read. */
  seen: z.array(z.tuple([z.string(), z.number()])),
});
export type LogCheckpoint = z.infer<typeof logCheckpointSchema>;

export interface CheckpointStore {
  /** The saved checkpoint, or `undefined` when there is none yet. Rejects when it is unreadable. */
  load(): Promise<LogCheckpoint | undefined>;
  /** Saves atomically: after a crash, either the old or the new checkpoint is there, whole. */
  save(checkpoint: LogCheckpoint): Promise<void>;
}

/**
 * A checkpoint in a JSON file, replaced atomically (write a temporary file, fsync, rename). A file
 * that exists but does not parse is an error, never a silent restart from scratch.
 */
export function createFileCheckpointStore(path: string): CheckpointStore {
  return {
    async load() {
      let text: string;
      try {
        text = await readFile(path, 'utf8');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw err;
      }
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        throw new RiskgateError(ErrorCode.INVALID_CONFIG, `log checkpoint ${path} is not JSON`);
      }
      const parsed = logCheckpointSchema.safeParse(json);
      if (!parsed.success) {
        throw new RiskgateError(
          ErrorCode.INVALID_CONFIG,
          `log checkpoint ${path} is malformed: ${parsed.error.issues[0]?.message}`,
        );
      }
      return parsed.data;
    },
    async save(checkpoint) {
      // State files are private (directory 700, file 600), like the outbox and the development keys.
      await mkdir(dirname(path), { recursive: true, mode: 0o700 });
      const tmp = `${path}.${process.pid}.tmp`;
      const fh = await open(tmp, 'w', 0o600);
      try {
        await fh.writeFile(JSON.stringify(checkpoint));
        await fh.sync();
      } finally {
        await fh.close();
      }
      await rename(tmp, path);
    },
  };
}

/** A checkpoint kept in memory (tests, or a caller that persists elsewhere). */
export function createMemoryCheckpointStore(
  initial?: LogCheckpoint,
): CheckpointStore & { current(): LogCheckpoint | undefined } {
  let cp = initial;
  return {
    load: async () => cp,
    save: async (c) => {
      cp = structuredClone(c);
    },
    current: () => cp,
  };
}
