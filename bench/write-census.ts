/**
 * Every write a server's main thread makes, counted by kind (issue 32, "the main thread's writes"):
 * a preload for a server under a bench, and the reader of what it wrote.
 *
 *   npx tsx bench/hot-path-cpu.ts --builds shipped=bench/riskgate-under-bench.ts~--import=./bench/write-census.ts,peer=peer~--import=./bench/write-census.ts ...
 *   npx tsx bench/write-census.ts <tmpdir>/riskgate-write-census/<pid>.ndjson [--span-s 12] [--drop-last-s 1]
 *
 * As a preload (`--import`, loaded by Node's own type stripping before tsx) it wraps, on the main
 * thread only, `net.Socket.prototype._writeGeneric` (every stream write: TCP and pipes) and
 * `fs.write`/`fs.writev` (a file's writes through libuv's thread pool), and keeps per kind: the
 * native method the write reaches (`writeLatin1String`, `writeUtf8String`, `writeBuffer`,
 * `writev`), which side (`server`: an answer to a caller; `client`: a request to an upstream;
 * `pipe`), the request line or status (ids folded), calls, bytes, chunks and the wall time inside
 * the call (`process.hrtime`: it includes the time the thread was preempted there). Once a second
 * it appends the running totals, with each thread's `/proc` schedstat (CPU, time waiting on the
 * run queue) and context switches, as a line of `<tmpdir>/riskgate-write-census/<pid>.ndjson`. A
 * header's value is never kept: only the first write of each kind, with every value replaced by
 * its length (an Authorization header carries a secret).
 *
 * As a program it prints the difference between two of those lines (the last but `--drop-last-s`,
 * and `--span-s` before it) per answered decision: one `server ... HTTP/1.1 2xx` write each.
 */
import { appendFileSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { isMainThread } from 'node:worker_threads';

interface Tally {
  n: number;
  bytes: number;
  ns: number;
  chunks: number;
}
interface SchedTally {
  runNs: number;
  waitNs: number;
  voluntary: number;
  preempted: number;
}
interface CensusLine {
  t: number;
  writes: Record<string, Tally>;
  threads: Record<string, SchedTally>;
  firsts: Record<string, string[]>;
}
type Chunk = string | Uint8Array;
type WriteGeneric = (
  this: import('node:net').Socket & { server?: unknown; _handle?: { constructor?: { name?: string } } },
  writev: boolean,
  data: Chunk | ({ chunk: Chunk; encoding: string }[] & { allBuffers?: boolean }),
  encoding: string,
  cb: (error?: Error) => void,
) => unknown;

const DIR = join(tmpdir(), 'riskgate-write-census');

function textOf(data: Chunk): string {
  return typeof data === 'string'
    ? data
    : Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('latin1');
}

/** The request line (method and path, ids folded) or the status line of an HTTP/1.1 write. */
function headOf(data: Chunk): string {
  const line = textOf(typeof data === 'string' ? data.slice(0, 80) : data.subarray(0, 80)).split('\r\n')[0]!;
  if (line.startsWith('HTTP/')) return line.slice(0, 12);
  const request = /^([A-Z]+) (\/[^? ]*)/.exec(line);
  if (request === null) return typeof data === 'string' ? 'text' : 'bytes';
  const path = request[2]!.replace(/\/(users|devices|service)\/[^/]+/g, '/$1/:id');
  return `${request[1]} ${path}`;
}

/** A write's lines with every header value replaced by its length: never a secret kept. */
function shapeOf(text: string): string[] {
  return text.split('\r\n').map((line) => {
    const colon = line.indexOf(': ');
    if (colon > 0 && !line.startsWith('{'))
      return `${line.slice(0, colon)}: <${line.length - colon - 2} chars>`;
    return line.length > 60 ? `${line.slice(0, 60)}... (${line.length} chars)` : line;
  });
}

function byteLength(data: Chunk, encoding: string): number {
  if (typeof data !== 'string') return data.byteLength;
  return Buffer.byteLength(data, encoding === 'latin1' || encoding === 'binary' ? 'latin1' : 'utf8');
}

function nativeMethod(data: Chunk, encoding: string): string {
  if (typeof data !== 'string') return 'writeBuffer';
  if (encoding === 'latin1' || encoding === 'binary') return 'writeLatin1String';
  return encoding === 'ascii' ? 'writeAsciiString' : 'writeUtf8String';
}

/** Each thread's schedstat and context switches, by name (the main thread as `main`). */
function threadTallies(): Record<string, SchedTally> {
  const out: Record<string, SchedTally> = {};
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const at = `/proc/self/task/${tid}`;
      const name = Number(tid) === process.pid ? 'main' : readFileSync(`${at}/comm`, 'utf8').trim();
      const [runNs = 0, waitNs = 0] = readFileSync(`${at}/schedstat`, 'utf8').trim().split(' ').map(Number);
      const status = readFileSync(`${at}/status`, 'utf8');
      const o = out[name] ?? { runNs: 0, waitNs: 0, voluntary: 0, preempted: 0 };
      out[name] = o;
      o.runNs += runNs;
      o.waitNs += waitNs;
      o.voluntary += Number(/\nvoluntary_ctxt_switches:\s+(\d+)/.exec(status)?.[1] ?? 0);
      o.preempted += Number(/nonvoluntary_ctxt_switches:\s+(\d+)/.exec(status)?.[1] ?? 0);
    } catch {
      // A thread that ended between the listing and the read.
    }
  }
  return out;
}

function instrument(): void {
  const require = createRequire(import.meta.url);
  const net = require('node:net') as { Socket: { prototype: { _writeGeneric: WriteGeneric } } };
  const fs = require('node:fs') as Record<string, (...args: unknown[]) => unknown>;
  const writes: Record<string, Tally> = {};
  const firsts: Record<string, string[]> = {};
  const add = (key: string, bytes: number, ns: number, chunks: number, text: () => string): void => {
    const t = writes[key] ?? { n: 0, bytes: 0, ns: 0, chunks: 0 };
    writes[key] = t;
    t.n++;
    t.bytes += bytes;
    t.ns += ns;
    t.chunks += chunks;
    if (!(key in firsts)) firsts[key] = shapeOf(text());
  };
  const writeGeneric = net.Socket.prototype._writeGeneric;
  net.Socket.prototype._writeGeneric = function (writev, data, encoding, cb) {
    const side = this._handle?.constructor?.name === 'Pipe' ? 'pipe' : this.server ? 'server' : 'client';
    let key: string;
    let bytes = 0;
    let chunks = 1;
    let text: () => string;
    if (writev && Array.isArray(data)) {
      const all = data.allBuffers === true;
      const parts = data.map((c) => (all ? (c as unknown as Uint8Array) : c.chunk));
      chunks = parts.length;
      for (const [i, part] of parts.entries()) bytes += byteLength(part, all ? '' : data[i]!.encoding);
      const kinds = parts.map((p, i) => (typeof p === 'string' ? data[i]!.encoding : 'buffer')).join('+');
      key = `${side} writev[${kinds}] ${headOf(parts[0]!)}`;
      text = () => parts.map(textOf).join('');
    } else {
      const chunk = data as Chunk;
      bytes = byteLength(chunk, encoding);
      key = `${side} ${nativeMethod(chunk, encoding)} ${headOf(chunk)}`;
      text = () => textOf(chunk);
    }
    const started = process.hrtime.bigint();
    const result = writeGeneric.call(this, writev, data, encoding, cb);
    add(key, bytes, Number(process.hrtime.bigint() - started), chunks, text);
    return result;
  };
  for (const name of ['write', 'writev']) {
    const original = fs[name]!;
    // WriteStream reads `fs.write`/`fs.writev` from the module at each write: wrapped here, counted.
    fs[name] = function (this: unknown, ...args: unknown[]) {
      const data = args[1] as Chunk | Uint8Array[];
      const bytes = Array.isArray(data)
        ? data.reduce((s, b) => s + b.byteLength, 0)
        : byteLength(data as Chunk, 'utf8');
      const started = process.hrtime.bigint();
      const result = original.apply(this, args);
      add(`fs.${name}`, bytes, Number(process.hrtime.bigint() - started), 1, () => '');
      return result;
    };
  }
  mkdirSync(DIR, { recursive: true });
  const file = join(DIR, `${process.pid}.ndjson`);
  setInterval(() => {
    const line: CensusLine = { t: Date.now(), writes, threads: threadTallies(), firsts };
    appendFileSync(file, `${JSON.stringify(line)}\n`);
  }, 1000).unref();
}

function report(): void {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { 'span-s': { type: 'string', default: '12' }, 'drop-last-s': { type: 'string', default: '1' } },
  });
  for (const file of positionals) {
    const lines = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as CensusLine);
    const last = lines.length - 1 - Number(values['drop-last-s']);
    const b = lines[last]!;
    const a = lines[Math.max(0, last - Number(values['span-s']))]!;
    const zero: Tally = { n: 0, bytes: 0, ns: 0, chunks: 0 };
    const diff = Object.entries(b.writes).map(([k, x]) => {
      const y = a.writes[k] ?? zero;
      return [
        k,
        { n: x.n - y.n, bytes: x.bytes - y.bytes, ns: x.ns - y.ns, chunks: x.chunks - y.chunks },
      ] as const;
    });
    const decisions = diff.filter(([k]) => /^server .*HTTP\/1\.1 2/.test(k)).reduce((s, [, t]) => s + t.n, 0);
    console.log(`${file}: ${((b.t - a.t) / 1000).toFixed(0)} s, ${decisions} 2xx answers`);
    console.log('| write | per 2xx | bytes per write | chunks | µs per write (wall) | µs per 2xx (wall) |');
    console.log('|---|---:|---:|---:|---:|---:|');
    for (const [k, t] of diff.filter(([, t]) => t.n > 0).sort((p, q) => q[1].n - p[1].n)) {
      console.log(
        `| ${k} | ${(t.n / decisions).toFixed(3)} | ${(t.bytes / t.n).toFixed(0)} | ${(t.chunks / t.n).toFixed(1)} | ` +
          `${(t.ns / t.n / 1000).toFixed(1)} | ${(t.ns / decisions / 1000).toFixed(1)} |`,
      );
    }
    const sockets = diff.filter(([k]) => !k.startsWith('fs.') && !k.startsWith('pipe'));
    const n = sockets.reduce((s, [, t]) => s + t.n, 0);
    const ns = sockets.reduce((s, [, t]) => s + t.ns, 0);
    console.log(
      `socket writes: ${(n / decisions).toFixed(2)} per 2xx, ${(ns / decisions / 1000).toFixed(1)} µs wall per 2xx`,
    );
    console.log('| thread | CPU µs per 2xx | run-queue wait µs per 2xx | voluntary switches | preempted |');
    console.log('|---|---:|---:|---:|---:|');
    for (const [k, x] of Object.entries(b.threads)) {
      const y = a.threads[k] ?? { runNs: 0, waitNs: 0, voluntary: 0, preempted: 0 };
      if (x.runNs - y.runNs === 0) continue;
      console.log(
        `| ${k} | ${((x.runNs - y.runNs) / decisions / 1000).toFixed(0)} | ${((x.waitNs - y.waitNs) / decisions / 1000).toFixed(0)} | ` +
          `${((x.voluntary - y.voluntary) / decisions).toFixed(2)} | ${((x.preempted - y.preempted) / decisions).toFixed(2)} |`,
      );
    }
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) report();
else if (isMainThread) instrument();
