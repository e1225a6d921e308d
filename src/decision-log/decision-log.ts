import { createWriteStream, fstatSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Writable } from 'node:stream';
import type { DecisionLogTarget } from '../config/riskgate-config.ts';
import { settlesWithin } from '../timing/with-timeout.ts';
import { lineJson } from './line-json.ts';

/**
 * The decision log: one JSON line per decision (and one per action outcome), enough to replay a
 * decision offline. Writing is off the hot path: `write` only keeps the record; serialisation
 * happens in one batch per event-loop turn, the write to the destination at most `lingerMs` later
 * (several turns' lines in one write), and a slow destination (backpressure) makes records wait in
 * memory up to `maxPending`, never blocks a request.
 */
export interface DecisionLog {
  /** Keeps `record` for the next batch. Never throws, never blocks. */
  write(record: object): void;
  /**
   * Resolves once everything written so far has been handed to the destination and its writes
   * completed, or the destination failed (those records are then counted in `dropped`).
   */
  flush(): Promise<void>;
  /**
   * Flushes and closes the destination (a file; stdout stays open), giving up after `timeoutMs`
   * (default 5000): records still waiting then are counted in `dropped` and reported to `onError`.
   */
  close(timeoutMs?: number): Promise<void>;
  /** Records dropped: `maxPending` reached, the destination failed, or close timed out. A metric. */
  readonly dropped: number;
  /**
   * Opens the destination anew (a file: the same path, so a rotated file is let go; SIGHUP). Also
   * how a failed destination is retried. A no-op for stdout and `off`.
   */
  reopen?(): void;
  /** Whether records reach the destination; the last failure while they do not. For /healthz. */
  health?(): DecisionLogHealth;
}

export interface DecisionLogHealth {
  ok: boolean;
  /** The destination's last error while it is failing (an errno code and message, never a record). */
  lastError?: string;
  dropped: number;
}

export interface DecisionLogOptions {
  /** Records kept while the destination is slow before new ones are dropped. Default 100 000. */
  maxPending?: number;
  /**
   * Told when the destination fails (its stream errors: it is then unusable, and later records are
   * counted as dropped) and when close times out.
   */
  onError?: (error: Error) => void;
  /** Applied to each record when it is serialised (off the request path): redaction. */
  redact?: (record: object) => object;
  /** Told when the destination starts or stops taking records (alarms, metrics). */
  onHealthChange?: (ok: boolean) => void;
  /** While the destination is failing, how often it is reopened, milliseconds. Default 5000. */
  retryMs?: number;
  /**
   * How long serialised lines may wait for more before they are written, milliseconds (a write is
   * also made at once past 64 KiB, and by `flush()` and `close()`). Default 0: every turn's lines
   * are written on that turn. `openDecisionLog` uses `DECISION_LOG_LINGER_MS`.
   */
  lingerMs?: number;
}

/**
 * How long `openDecisionLog`'s lines wait for company before they are written, milliseconds. Issue
 * 32: one `fs.write` per line (a decision's, at 200/s every line is alone on its turn) cost 47-81 µs
 * of the process's CPU (the thread pool's hand-over and the syscall), ten lines in one write 11-13
 * µs each (bench/RESULTS.md). A crash loses at most this much more of the log than it did.
 */
export const DECISION_LOG_LINGER_MS = 20;

/** Lines past this many bytes are written at once, whatever `lingerMs` says. */
const LINGER_MAX_BYTES = 64 * 1024;

/** Default longest wait of `close()`, milliseconds. */
export const DECISION_LOG_CLOSE_TIMEOUT_MS = 5000;

/** A decision log that writes nothing (`RISKGATE_DECISION_LOG=off`). */
export const DISCARD_DECISION_LOG: DecisionLog = {
  write() {},
  flush: async () => {},
  close: async () => {},
  dropped: 0,
};

/**
 * Opens the decision log `target`. For a file, creates its directory and appends. For `stdout`,
 * a destination that never blocks the event loop: on a pipe or socket (containers, log shippers)
 * `process.stdout`, whose libuv writes are non-blocking there; on a file or a terminal, where
 * `process.stdout` writes synchronously (a slow disk or a paused terminal would stall every
 * decision), an `fs.WriteStream` on fd 1, whose writes run on libuv's thread pool one at a time.
 */
export function openDecisionLog(target: DecisionLogTarget, options: DecisionLogOptions = {}): DecisionLog {
  if (target.kind === 'off') return DISCARD_DECISION_LOG;
  const lingerMs = options.lingerMs ?? DECISION_LOG_LINGER_MS;
  if (target.kind === 'stdout')
    return createDecisionLog(stdoutStream(), { ...options, lingerMs, ownsStream: false });
  const open = () => {
    mkdirSync(dirname(target.path), { recursive: true });
    return createWriteStream(target.path, { flags: 'a' });
  };
  return createDecisionLog(open(), { ...options, lingerMs, ownsStream: true, openStream: open });
}

/**
 * fd 1 as a non-blocking stream. Not an fs stream on a pipe: once anything touches
 * `process.stdout` the pipe is non-blocking, and fs writes to it fail with EAGAIN when it is full.
 */
function stdoutStream(): Writable {
  let pipe = false;
  try {
    const stat = fstatSync(1);
    pipe = stat.isFIFO() || stat.isSocket();
  } catch {
    // fd 1 closed: the fs stream reports the error, and the log counts what it drops.
  }
  return pipe ? process.stdout : createWriteStream('', { fd: 1, autoClose: false });
}

/** A decision log over any writable stream (tests pass their own). */
export function createDecisionLog(
  initial: Writable,
  options: DecisionLogOptions & { ownsStream?: boolean; openStream?: () => Writable } = {},
): DecisionLog {
  const maxPending = options.maxPending ?? 100_000;
  const redact = options.redact;
  const lingerMs = options.lingerMs ?? 0;
  let stream = initial;
  let pending: object[] = [];
  /** Serialised lines waiting (up to `lingerMs`) to be written together (one per record), and their UTF-8 bytes. */
  let lingering: string[] = [];
  let lingeringBytes = 0;
  let lingerTimer: NodeJS.Timeout | undefined;
  let scheduled = false;
  let waitingForDrain = false;
  let writesInFlight = 0;
  let dropped = 0;
  let flushWaiters: (() => void)[] = [];
  /** No more records accepted (closed). */
  let closed = false;
  /** The destination errored or closed: nothing more can be written to it until reopened. */
  let broken = false;
  let lastError: string | undefined;
  let retry: NodeJS.Timeout | undefined;
  /** Reopened after a failure, no write has succeeded yet: not called healthy (it may fail again). */
  let probation = false;

  const settleWaiters = () => {
    const waiters = flushWaiters;
    flushWaiters = [];
    for (const w of waiters) w();
  };
  const settleIfIdle = () => {
    if (pending.length === 0 && lingering.length === 0 && writesInFlight === 0 && !waitingForDrain)
      settleWaiters();
  };

  // A stream that errored is destroyed, and a destroyed stream never drains nor calls back: settle
  // every waiter now, and count what can no longer be written.
  const markBroken = (s: Writable) => {
    if (s !== stream || broken) return;
    broken = true;
    dropped += pending.length + lingering.length;
    pending = [];
    dropLingering();
    waitingForDrain = false;
    writesInFlight = 0;
    settleWaiters();
    // Failing again on probation is the same failure: said once.
    if (!probation) options.onHealthChange?.(false);
    // A file that failed (disk full, permissions, a deleted directory) is tried again, so the audit
    // trail resumes by itself once the cause is fixed.
    if (options.openStream !== undefined && !closed && retry === undefined) {
      retry = setInterval(() => reopen(), options.retryMs ?? 5000);
      retry.unref();
    }
  };
  const attach = (s: Writable) => {
    s.on('error', (error: NodeJS.ErrnoException) => {
      if (s !== stream) return;
      lastError = errorText(error);
      options.onError?.(error);
      markBroken(s);
    });
    s.on('close', () => markBroken(s));
  };
  attach(stream);

  const onWritten = (s: Writable, records: number, error?: Error | null) => {
    if (error) dropped += records; // handed over, never written
    if (broken || s !== stream) return;
    if (error) {
      // The 'error' event follows on the next tick; a flush waiting on this write learns it now.
      lastError = errorText(error);
      markBroken(s);
      return;
    }
    writesInFlight--;
    if (probation && !error) {
      probation = false;
      lastError = undefined;
      clearInterval(retry);
      retry = undefined;
      options.onHealthChange?.(true);
    }
    if (pending.length > 0 || lingering.length > 0) schedule();
    else settleIfIdle();
  };
  const onDrain = (s: Writable) => {
    if (s !== stream) return;
    waitingForDrain = false;
    if (broken) return;
    if (pending.length > 0 || lingering.length > 0) schedule();
    else settleIfIdle();
  };

  const writeBatch = () => {
    scheduled = false;
    if (broken) {
      settleWaiters();
      return;
    }
    if (waitingForDrain) return;
    if (pending.length === 0 && lingering.length === 0) {
      settleIfIdle();
      return;
    }
    for (const record of pending) {
      const line = safeStringify(record, redact === undefined ? record : redact(record));
      lingering.push(line);
      lingeringBytes += Buffer.byteLength(line) + 1;
    }
    pending = [];
    // Someone waits for the lines (flush, close), or enough of them: written now; else soon.
    if (flushWaiters.length > 0 || lingerMs <= 0 || lingeringBytes >= LINGER_MAX_BYTES) writeLingering();
    else lingerTimer ??= setTimeout(writeLingering, lingerMs);
  };

  function dropLingering() {
    clearTimeout(lingerTimer);
    lingerTimer = undefined;
    lingering = [];
    lingeringBytes = 0;
  }

  function writeLingering() {
    const lines = lingering;
    const bytes = lingeringBytes;
    dropLingering();
    if (lines.length === 0 || broken) return;
    if (waitingForDrain) {
      // Kept for after the drain (onDrain schedules the next batch).
      lingering = lines;
      lingeringBytes = bytes;
      return;
    }
    writesInFlight++;
    const s = stream;
    const records = lines.length;
    if (!s.write(utf8Lines(lines, bytes), (error) => onWritten(s, records, error))) {
      waitingForDrain = true;
      s.once('drain', () => onDrain(s));
    }
  }

  function schedule() {
    if (scheduled) return;
    scheduled = true;
    setImmediate(writeBatch);
  }

  function reopen() {
    if (options.openStream === undefined || closed) return;
    const old = stream;
    let next: Writable;
    try {
      next = options.openStream();
    } catch (error) {
      lastError = (error as Error).message;
      return;
    }
    stream = next;
    attach(next);
    // What the old stream holds still reaches its file (end() flushes); its callbacks are ignored.
    if (!old.destroyed) old.end();
    writesInFlight = 0;
    waitingForDrain = false;
    if (broken) {
      // Records are taken again once the new stream has opened, and it is called healthy once a
      // write succeeds (/dev/full opens fine and fails every write).
      next.once('ready', () => {
        if (stream !== next || !broken) return;
        broken = false;
        probation = true;
        schedule();
      });
      return;
    }
    schedule();
  }

  const flush = () =>
    new Promise<void>((resolve) => {
      if (broken) {
        resolve();
        return;
      }
      flushWaiters.push(resolve);
      schedule();
    });

  return {
    write(record) {
      if (closed || broken || pending.length >= maxPending) {
        dropped++;
        return;
      }
      pending.push(record);
      schedule();
    },
    flush,
    reopen,
    health: () => {
      const ok = !broken && !probation;
      return { ok, ...(!ok && lastError !== undefined && { lastError }), dropped };
    },
    async close(timeoutMs = DECISION_LOG_CLOSE_TIMEOUT_MS) {
      clearInterval(retry);
      retry = undefined;
      const until = performance.now() + timeoutMs;
      const done = await settlesWithin(flush(), timeoutMs);
      closed = true;
      if (!done && !broken) {
        const unwritten = pending.length + lingering.length;
        dropped += unwritten;
        pending = [];
        dropLingering();
        options.onError?.(
          new Error(
            `close timed out after ${timeoutMs} ms: ${unwritten} records not handed over, ${writesInFlight} writes unfinished`,
          ),
        );
        return;
      }
      if (options.ownsStream && !broken) {
        await settlesWithin(
          new Promise<void>((resolve) => stream.end(() => resolve())),
          Math.max(0, until - performance.now()),
        );
      }
    },
    get dropped() {
      return dropped;
    },
  };
}

/**
 * `lines`, each followed by a newline, in one UTF-8 buffer of `bytes`, encoded from each line as
 * it is. Issue 32: the lines joined into one string were copied once more, flat, on the JavaScript
 * heap before the stream encoded them: 3.5-4.0 KiB of the ~140 KiB a decision allocates, which sets
 * how often the scavenger runs (bench/RESULTS.md, "the V8 threads' work per decision").
 */
function utf8Lines(lines: readonly string[], bytes: number): Buffer {
  const out = Buffer.allocUnsafe(bytes);
  let at = 0;
  for (const line of lines) {
    at += out.write(line, at);
    out[at++] = 0x0a;
  }
  return out;
}

function errorText(error: NodeJS.ErrnoException): string {
  return error.code === undefined ? error.message : `${error.code}: ${error.message}`;
}

/**
 * `line`, the redacted `record`, kept for the decision store (it keeps what the log keeps). A
 * record that cannot be serialised (a bug) still leaves a line saying so.
 */
function safeStringify(record: object, line: object): string {
  try {
    return lineJson(record, line);
  } catch (error) {
    return JSON.stringify({ kind: 'unserializable', error: (error as Error).message });
  }
}
