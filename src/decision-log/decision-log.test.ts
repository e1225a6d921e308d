import { spawn, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it, vi } from 'vitest';
import { eventually } from '../../test/support/eventually.ts';
import { createDecisionLog } from './decision-log.ts';

/** A destination that accepts one chunk and never completes it: a reader that stopped reading. */
class Stuck extends Writable {
  constructor() {
    super({ highWaterMark: 1 });
  }
  override _write(_chunk: Buffer, _enc: BufferEncoding, _cb: (error?: Error | null) => void) {}
}

/** `promise`, or a rejection after `ms`, so a hang fails the test at once instead of timing it out. */
function settlesWithin<T>(promise: Promise<T>, ms: number): Promise<T> {
  return Promise.race([
    promise,
    new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`not settled within ${ms} ms`)), ms)),
  ]);
}

class Collector extends Writable {
  chunks: string[] = [];
  constructor(highWaterMark = 16 * 1024) {
    super({ highWaterMark });
  }
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (error?: Error | null) => void) {
    this.chunks.push(chunk.toString('utf8'));
    setImmediate(cb);
  }
  lines(): unknown[] {
    return this.chunks
      .join('')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l));
  }
}

describe('decision log', () => {
  it('writes one JSON line per record, in order, batched off the calling turn', async () => {
    const out = new Collector();
    const log = createDecisionLog(out);
    log.write({ n: 1 });
    log.write({ n: 2 });
    expect(out.chunks).toEqual([]); // nothing written synchronously
    await log.flush();
    expect(out.lines()).toEqual([{ n: 1 }, { n: 2 }]);
    expect(out.chunks).toHaveLength(1);
  });

  it('with lingerMs, writes the lines of several turns together, and at once when flushed', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const out = new Collector();
      const log = createDecisionLog(out, { lingerMs: 20 });
      log.write({ n: 1 });
      await new Promise((r) => setImmediate(r));
      log.write({ n: 2 });
      await new Promise((r) => setImmediate(r));
      expect(out.chunks).toEqual([]); // serialised, waiting for company
      await vi.advanceTimersByTimeAsync(20);
      expect(out.chunks).toHaveLength(1);
      expect(out.lines()).toEqual([{ n: 1 }, { n: 2 }]);
      log.write({ n: 3 });
      await log.flush(); // no waiting out the linger
      expect(out.chunks).toHaveLength(2);
      expect(out.lines()).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
    } finally {
      vi.useRealTimers();
    }
  });

  it('keeps records through backpressure and writes them all once the stream drains', async () => {
    const out = new Collector(8);
    const log = createDecisionLog(out);
    for (let i = 0; i < 50; i++) {
      log.write({ i, pad: 'x'.repeat(20) });
      if (i % 10 === 0) await new Promise((r) => setImmediate(r));
    }
    await log.flush();
    expect(out.lines().map((r) => (r as { i: number }).i)).toEqual([...Array(50).keys()]);
    expect(log.dropped).toBe(0);
  });

  it('counts records dropped beyond maxPending instead of growing without bound', async () => {
    const out = new Collector();
    const log = createDecisionLog(out, { maxPending: 3 });
    for (let i = 0; i < 5; i++) log.write({ i });
    expect(log.dropped).toBe(2);
    await log.flush();
    expect(out.lines()).toHaveLength(3);
  });

  it('still writes a line for a record that cannot be serialised', async () => {
    const out = new Collector();
    const log = createDecisionLog(out);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    log.write(cyclic);
    await log.flush();
    expect(out.lines()).toEqual([{ kind: 'unserializable', error: expect.any(String) }]);
  });

  it('closes an owned stream after flushing', async () => {
    const out = new Collector();
    const log = createDecisionLog(out, { ownsStream: true });
    log.write({ last: true });
    await log.close();
    expect(out.writableEnded).toBe(true);
    expect(out.lines()).toEqual([{ last: true }]);
    log.write({ after: true });
    expect(log.dropped).toBe(1);
  });

  it('settles flush() when the stream fails while waiting for drain, and counts what was lost', async () => {
    const out = new Stuck();
    const errors: Error[] = [];
    const log = createDecisionLog(out, { onError: (e) => errors.push(e) });
    log.write({ n: 1 });
    await new Promise((r) => setImmediate(r)); // the first batch is written; the stream wants a drain
    log.write({ n: 2 });
    const flushed = log.flush();
    out.destroy(new Error('EPIPE: the reader went away'));
    await settlesWithin(flushed, 500);
    expect(errors.map((e) => e.message)).toEqual(['EPIPE: the reader went away']);
    expect(log.dropped).toBe(1);
    log.write({ n: 3 });
    expect(log.dropped).toBe(2);
    await settlesWithin(log.flush(), 500);
  });

  it('gives up closing after its timeout when the destination never drains', async () => {
    const errors: Error[] = [];
    const log = createDecisionLog(new Stuck(), { ownsStream: true, onError: (e) => errors.push(e) });
    log.write({ n: 1 });
    await new Promise((r) => setImmediate(r));
    log.write({ n: 2 });
    await settlesWithin(log.close(50), 1000);
    expect(errors[0]?.message).toMatch(/^close timed out after 50 ms: 1 records not handed over/);
    expect(log.dropped).toBe(1);
  });
});

/**
 * `RISKGATE_DECISION_LOG=stdout` in a child process whose stdout is a pipe, a file or a terminal.
 * The child logs 2000 records of 1 KB, then reports through marker files (its stdout and stderr may
 * both be the destination): `tick` once its timers ran 5 times, `flushed` once flush() resolved.
 */
describe('the stdout decision log', () => {
  const dir = mkdtempSync(join(tmpdir(), 'riskgate-log-'));
  const script = join(dir, 'child.ts');
  writeFileSync(
    script,
    `import { writeFileSync } from 'node:fs';
import { openDecisionLog } from ${JSON.stringify(join(import.meta.dirname, 'decision-log.ts'))};
const marker = process.argv[2];
const log = openDecisionLog({ kind: 'stdout' }, { onError: (e) => writeFileSync(marker + '.error', e.message) });
for (let i = 0; i < 2000; i++) log.write({ i, pad: 'x'.repeat(1000) });
let ticks = 0;
const timer = setInterval(() => {
  if (++ticks < 5) return;
  clearInterval(timer);
  writeFileSync(marker + '.tick', '');
  void log.flush().then(() => writeFileSync(marker + '.flushed', ''));
}, 10);
`,
  );
  const ROOT = join(import.meta.dirname, '../..');
  let n = 0;
  const marker = () => join(dir, `run-${++n}`);

  const exists = (path: string) => () => existsSync(path);

  it('on a pipe nobody reads yet, keeps the event loop running and writes every line once read', async () => {
    const m = marker();
    const child = spawn(process.execPath, ['--import', 'tsx', script, m], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      await eventually(exists(`${m}.tick`), { timeoutMs: 10_000, what: 'timers ran' });
      expect(existsSync(`${m}.flushed`)).toBe(false); // 2 MB cannot be in a pipe nobody reads
      let stdout = '';
      child.stdout!.on('data', (c: Buffer) => {
        stdout += c.toString();
      });
      await eventually(exists(`${m}.flushed`), { timeoutMs: 10_000, what: 'flushed' });
      await eventually(() => stdout.endsWith('\n') && stdout.split('\n').length === 2001, {
        timeoutMs: 5000,
        what: 'all lines',
      });
      expect(JSON.parse(stdout.split('\n')[1999]!)).toMatchObject({ i: 1999 });
      expect(existsSync(`${m}.error`)).toBe(false);
    } finally {
      child.kill('SIGKILL');
    }
  }, 30_000);

  it('on a file, writes every line in order', async () => {
    const m = marker();
    const out = openSync(`${m}.out`, 'w');
    const child = spawn(process.execPath, ['--import', 'tsx', script, m], {
      cwd: ROOT,
      stdio: ['ignore', out, 'inherit'],
    });
    closeSync(out);
    try {
      await eventually(exists(`${m}.flushed`), { timeoutMs: 10_000, what: 'flushed' });
      const lines = readFileSync(`${m}.out`, 'utf8').trim().split('\n');
      expect(lines.map((l) => (JSON.parse(l) as { i: number }).i)).toEqual([...Array(2000).keys()]);
    } finally {
      child.kill('SIGKILL');
    }
  }, 30_000);

  // A terminal nobody reads: process.stdout writes to a TTY synchronously, which froze the event loop.
  // `script` (util-linux) gives the child a pseudo-terminal; its output goes to a pipe left unread.
  const hasScript = spawnSync('script', ['--version']).status === 0;
  it.skipIf(!hasScript)(
    'on a terminal that is not being read, keeps the event loop running',
    async () => {
      const m = marker();
      const command = `${JSON.stringify(process.execPath)} --import tsx ${JSON.stringify(script)} ${JSON.stringify(m)}`;
      const child = spawn('script', ['-qfec', command, '/dev/null'], {
        cwd: ROOT,
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      try {
        await eventually(exists(`${m}.tick`), { timeoutMs: 10_000, what: 'timers ran' });
        expect(existsSync(`${m}.flushed`)).toBe(false);
        child.stdout!.resume();
        await eventually(exists(`${m}.flushed`), { timeoutMs: 10_000, what: 'flushed' });
        expect(existsSync(`${m}.error`)).toBe(false);
      } finally {
        child.kill('SIGKILL');
      }
    },
    30_000,
  );
});
