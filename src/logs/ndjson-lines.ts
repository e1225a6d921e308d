/**
 * Splits an NDJSON byte stream into lines as chunks arrive, holding only the unfinished last line
 * (never the whole response). Works on bytes, so a UTF-8 character split across chunks is intact.
 */
export class NdjsonLines {
  private rest: Buffer | undefined;

  /** @param maxLineBytes a longer line is refused (`push` returns false). */
  constructor(private readonly maxLineBytes: number) {}

  /**
   * Feeds a chunk; `onLine` gets each complete line (without `\n` / `\r\n`), and may return false to
   * stop. Returns false when stopped or a line grew past the limit.
   */
  push(chunk: Buffer, onLine: (line: string) => boolean): boolean {
    const buf = this.rest === undefined ? chunk : Buffer.concat([this.rest, chunk]);
    this.rest = undefined;
    let start = 0;
    for (;;) {
      const nl = buf.indexOf(10, start);
      if (nl === -1) break;
      const end = nl > start && buf[nl - 1] === 13 ? nl - 1 : nl;
      if (end > start && !onLine(buf.toString('utf8', start, end))) return false;
      start = nl + 1;
    }
    if (start < buf.length) {
      if (buf.length - start > this.maxLineBytes) return false;
      // Copy, so a large chunk is not retained for a small tail.
      this.rest = Buffer.from(buf.subarray(start));
    }
    return true;
  }

  /** The unterminated last line, if any (a stream may end without a final `\n`). */
  end(): string | undefined {
    const r = this.rest;
    this.rest = undefined;
    if (r === undefined) return undefined;
    const s = r.toString('utf8').replace(/\r$/, '');
    return s === '' ? undefined : s;
  }
}
