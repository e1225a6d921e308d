import type { Readable } from 'node:stream';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';

/**
 * Splits an NDJSON byte stream into lines as chunks arrive, holding only the unfinished last line
 * (never the whole response). Works on bytes, so a UTF-8 character split across chunks is intact.
 */
export class NdjsonLines {
  /** The unfinished last line, in the chunks it came in (joined once, when it ends). */
  private rest: Buffer[] = [];
  private restBytes = 0;
  /** Lines ended so far (by `\n`), empty ones included: the next line's number is this plus 1. */
  linesEnded = 0;

  private readonly maxLineBytes: number;

  /** @param maxLineBytes a longer line is refused (`push` returns false). */
  constructor(maxLineBytes: number) {
    // Not a parameter property: replay's worker threads load this file by Node's type stripping.
    this.maxLineBytes = maxLineBytes;
  }

  /**
   * Feeds a chunk; `onLine` gets each complete non-empty line (without `\n` / `\r\n`) and its number
   * (from 1, empty lines counted), and may return false to stop. Returns false when stopped or a
   * line grew past the limit.
   */
  push(chunk: Buffer, onLine: (line: string, lineNo: number) => boolean): boolean {
    let buf = chunk;
    if (this.restBytes > 0) {
      const nl = chunk.indexOf(10);
      if (nl === -1) {
        // Still the same line: kept as chunks, never copied again per chunk.
        this.restBytes += chunk.length;
        if (this.restBytes > this.maxLineBytes) return false;
        this.rest.push(chunk);
        return true;
      }
      buf = Buffer.concat([...this.rest, chunk]);
      this.rest = [];
      this.restBytes = 0;
    }
    let start = 0;
    for (;;) {
      const nl = buf.indexOf(10, start);
      if (nl === -1) break;
      const end = nl > start && buf[nl - 1] === 13 ? nl - 1 : nl;
      if (end - start > this.maxLineBytes) return false;
      this.linesEnded++;
      if (end > start && !onLine(buf.toString('utf8', start, end), this.linesEnded)) return false;
      start = nl + 1;
    }
    if (start < buf.length) {
      if (buf.length - start > this.maxLineBytes) return false;
      // Copy, so a large chunk is not retained for a small tail.
      this.rest = [Buffer.from(buf.subarray(start))];
      this.restBytes = buf.length - start;
    }
    return true;
  }

  /** The unterminated last line, if any (a stream may end without a final `\n`). */
  end(): string | undefined {
    if (this.restBytes === 0) return undefined;
    const s = Buffer.concat(this.rest).toString('utf8').replace(/\r$/, '');
    this.rest = [];
    this.restBytes = 0;
    return s === '' ? undefined : s;
  }
}

/**
 * The non-empty lines of a file or stream of JSON lines with their numbers (from 1), read in
 * constant memory: a line longer than `maxLineBytes` is never held whole. Throws `RiskgateError`
 * `RG_ERR_INVALID_INPUT` ("<name>: line N is longer than X bytes") at such a line; a read error
 * (a missing file, a directory) passes through as Node's own.
 */
export async function* numberedLines(
  stream: Readable,
  name: string,
  maxLineBytes: number,
): AsyncGenerator<{ text: string; lineNo: number }> {
  const lines = new NdjsonLines(maxLineBytes);
  const ready: { text: string; lineNo: number }[] = [];
  const take = (text: string, lineNo: number) => ready.push({ text, lineNo }) > 0;
  try {
    for await (const chunk of stream) {
      const ok = lines.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer), take);
      yield* ready;
      ready.length = 0;
      if (!ok) {
        throw new RiskgateError(
          ErrorCode.INVALID_INPUT,
          `${name}: line ${lines.linesEnded + 1} is longer than ${maxLineBytes} bytes`,
        );
      }
    }
    const last = lines.end();
    if (last !== undefined) yield { text: last, lineNo: lines.linesEnded + 1 };
  } finally {
    // Stopped early (a refused line, or the reader gave up): the file is closed, not read on.
    stream.destroy();
  }
}
