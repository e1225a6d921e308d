import { statSync } from 'node:fs';

/**
 * Whether a SQLite file was written since a moment, from `stat` alone (the file and its WAL: a
 * commit in WAL mode appends to the WAL, a checkpoint rewrites the file), so a poll that would
 * read a database nobody changed can skip its query (issue 32: an idle riskgate near no CPU).
 * It sees the commits of every process sharing the file, a cluster's workers included.
 */

/**
 * A write in the same tick of the file system's coarse clock as a `stat` may leave the same mtime
 * (and, rewriting a WAL from its start, the same size): a mark of a file this freshly written is
 * not trusted (as git's "racy" index entries).
 */
const RACY_MS = 100;

/** The file's (and its WAL's) identity, size and last change; undefined when it cannot be read. */
function signatureOf(path: string): { signature: string; newestMs: number } | undefined {
  try {
    const parts: string[] = [];
    let newestMs = 0;
    for (const p of [path, `${path}-wal`]) {
      const s = statSync(p, { bigint: true, throwIfNoEntry: false });
      if (s === undefined) {
        parts.push('-');
        continue;
      }
      parts.push(`${s.ino}:${s.size}:${s.mtimeNs}`);
      newestMs = Math.max(newestMs, Number(s.mtimeMs));
    }
    return { signature: parts.join('/'), newestMs };
  } catch {
    return undefined;
  }
}

/** A SQLite file's watermark: marked before a read, asked later whether anything was written since. */
export class FileWatermark {
  readonly #path: string;

  constructor(path: string) {
    this.#path = path;
  }

  /**
   * The file as it is now, to take just before a read; undefined when it cannot be trusted (it
   * cannot be read, or was written within the file system clock's tick).
   */
  mark(): string | undefined {
    const now = signatureOf(this.#path);
    return now !== undefined && Date.now() - now.newestMs > RACY_MS ? now.signature : undefined;
  }

  /** Whether nothing was written to the file since `mark` was taken (false for no mark). */
  unchangedSince(mark: string | undefined): boolean {
    return mark !== undefined && signatureOf(this.#path)?.signature === mark;
  }
}
