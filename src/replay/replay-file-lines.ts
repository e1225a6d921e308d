import { open } from 'node:fs/promises';

/**
 * The lines of a byte range of a decision log, read in large chunks and handed over as byte ranges
 * of the chunk: nothing is decoded here, so a line replay passes over (an action or label line, by
 * its first bytes) is never made a string, and a decision line is decoded only as far as it is read
 * (replay-record.ts). The next chunk is read while this one is replayed. Lines are numbered as
 * src/logs/ndjson-lines.ts numbers them (from 1, empty ones counted, `\r\n` as `\n`), which
 * `riskgate replay` reads stdin and small files with: a report names the same line either way.
 */

/** Bytes read at a time, twice over (one chunk replayed while the next is read). */
const CHUNK_BYTES = 4 * 1024 * 1024;

/**
 * The chunk buffers of the last read that finished, for the next: a replay thread reads its pieces
 * of a log one after another (replay-pieces.ts), and would otherwise take 8 MiB anew for each.
 * Only a read that ended with nothing in flight gives its buffers back.
 */
const spare: Buffer[] = [];

/**
 * Gets each non-empty line as `buf[start, end)` (without `\n` / `\r\n`), with its number. `buf` is
 * reused for the next chunk: whatever outlives the call is copied out of it.
 */
export type OnLineBytes = (buf: Buffer, start: number, end: number, lineNo: number) => void;

export type LineBytesResult =
  /** Lines ended by `\n` (empty ones too); the unterminated last line, if any, was numbered after them. */
  | { linesEnded: number }
  /** A line longer than the limit, by its number: nothing past it was read. */
  | { tooLong: number };

/** Every line of `file`'s bytes `[start, end)` to `onLine`, a longer line than `maxLineBytes` refused. */
export async function readLineBytes(
  file: string,
  range: { start: number; end: number },
  maxLineBytes: number,
  onLine: OnLineBytes,
): Promise<LineBytesResult> {
  const handle = await open(file, 'r');
  try {
    const buffers = [
      spare.pop() ?? Buffer.allocUnsafe(CHUNK_BYTES),
      spare.pop() ?? Buffer.allocUnsafe(CHUNK_BYTES),
    ] as const;
    // A whole file is read on from where the last read ended (a FIFO such as /dev/stdin has no
    // positions); a stretch at its own offsets. One read is in flight at a time either way.
    const whole = range.start === 0 && range.end === Number.POSITIVE_INFINITY;
    const readAt = (buf: Buffer, at: number) =>
      at >= range.end
        ? Promise.resolve({ bytesRead: 0 })
        : handle.read(buf, 0, Math.min(buf.length, range.end - at), whole ? null : at);
    const lines = new LineSplitter(maxLineBytes, onLine);
    let at = range.start;
    let which = 0;
    let pending = readAt(buffers[0], at);
    for (;;) {
      const { bytesRead } = await pending;
      if (bytesRead === 0) break;
      const chunk = buffers[which]!.subarray(0, bytesRead);
      at += bytesRead;
      which ^= 1;
      pending = readAt(buffers[which]!, at);
      if (!lines.push(chunk)) {
        // Settled before the handle closes (its read must not outlive it).
        await pending.catch(() => {});
        return { tooLong: lines.linesEnded + 1 };
      }
    }
    // The last read gave nothing: no read is in flight into either buffer.
    if (spare.length === 0) spare.push(...buffers);
    return lines.end() ? { linesEnded: lines.linesEnded } : { tooLong: lines.linesEnded + 1 };
  } finally {
    await handle.close();
  }
}

/** Chunks in, lines out; only an unfinished last line is kept (copied) from one chunk to the next. */
class LineSplitter {
  linesEnded = 0;
  #rest: Buffer[] = [];
  #restBytes = 0;
  readonly #max: number;
  readonly #onLine: OnLineBytes;

  constructor(maxLineBytes: number, onLine: OnLineBytes) {
    // Not parameter properties: replay threads load this file by Node's type stripping.
    this.#max = maxLineBytes;
    this.#onLine = onLine;
  }

  /** False at a line past the limit. */
  push(chunk: Buffer): boolean {
    let from = 0;
    if (this.#restBytes > 0) {
      const nl = chunk.indexOf(10);
      if (nl === -1) {
        this.#restBytes += chunk.length;
        if (this.#restBytes > this.#max) return false;
        this.#rest.push(Buffer.from(chunk));
        return true;
      }
      const line = Buffer.concat([...this.#rest, chunk.subarray(0, nl)]);
      this.#rest = [];
      this.#restBytes = 0;
      if (!this.#ended(line, 0, line.length)) return false;
      from = nl + 1;
    }
    for (;;) {
      const nl = chunk.indexOf(10, from);
      if (nl === -1) break;
      if (!this.#ended(chunk, from, nl)) return false;
      from = nl + 1;
    }
    if (from < chunk.length) {
      if (chunk.length - from > this.#max) return false;
      this.#rest = [Buffer.from(chunk.subarray(from))];
      this.#restBytes = chunk.length - from;
    }
    return true;
  }

  /** The unterminated last line, if any; false when it is past the limit. */
  end(): boolean {
    if (this.#restBytes === 0) return true;
    const line = Buffer.concat(this.#rest);
    this.#rest = [];
    this.#restBytes = 0;
    const end = line.length > 0 && line[line.length - 1] === 13 ? line.length - 1 : line.length;
    if (end > this.#max) return false;
    if (end > 0) this.#onLine(line, 0, end, this.linesEnded + 1);
    return true;
  }

  /** A line ended by `\n` at `nl`. */
  #ended(buf: Buffer, start: number, nl: number): boolean {
    const end = nl > start && buf[nl - 1] === 13 ? nl - 1 : nl;
    if (end - start > this.#max) return false;
    this.linesEnded++;
    if (end > start) this.#onLine(buf, start, end, this.linesEnded);
    return true;
  }
}
