import { createWriteStream, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Writable } from 'node:stream';
import type { DecisionLogTarget } from '../config/riskgate-config.ts';

/**
 * The decision log: one JSON line per decision (and one per action outcome), enough to replay a
 * decision offline. Writing is off the hot path: `write` only keeps the record; serialisation and
 * I/O happen in one batch per event-loop turn, and a slow disk (backpressure) makes records wait
 * in memory up to `maxPending`, never blocks a request.
 */
export interface DecisionLog {
  /** Keeps `record` for the next batch. Never throws, never blocks. */
  write(record: object): void;
  /** Resolves once everything written so far has been handed to the destination and flushed. */
  flush(): Promise<void>;
  /** Flushes and closes the destination (a file; stdout stays open). */
  close(): Promise<void>;
  /** Records dropped because `maxPending` was reached (exported as a metric). */
  readonly dropped: number;
}

export interface DecisionLogOptions {
  /** Records kept while the destination is slow before new ones are dropped. Default 100 000. */
  maxPending?: number;
  /** Told once per failure to write (the destination is gone); the log keeps trying. */
  onError?: (error: Error) => void;
}

/** A decision log that writes nothing (`RISKGATE_DECISION_LOG=off`). */
export const DISCARD_DECISION_LOG: DecisionLog = {
  write() {},
  flush: async () => {},
  close: async () => {},
  dropped: 0,
};

/** Opens the decision log `target`. For a file, creates its directory and appends. */
export function openDecisionLog(target: DecisionLogTarget, options: DecisionLogOptions = {}): DecisionLog {
  if (target.kind === 'off') return DISCARD_DECISION_LOG;
  if (target.kind === 'stdout') return createDecisionLog(process.stdout, { ...options, ownsStream: false });
  mkdirSync(dirname(target.path), { recursive: true });
  return createDecisionLog(createWriteStream(target.path, { flags: 'a' }), { ...options, ownsStream: true });
}

/** A decision log over any writable stream (tests pass their own). */
export function createDecisionLog(
  stream: Writable,
  options: DecisionLogOptions & { ownsStream?: boolean } = {},
): DecisionLog {
  const maxPending = options.maxPending ?? 100_000;
  let pending: object[] = [];
  let scheduled = false;
  let waitingForDrain = false;
  let dropped = 0;
  let flushWaiters: (() => void)[] = [];
  let closed = false;

  stream.on('error', (error: Error) => options.onError?.(error));

  const settleWaiters = () => {
    const waiters = flushWaiters;
    flushWaiters = [];
    for (const w of waiters) w();
  };

  const writeBatch = () => {
    scheduled = false;
    if (waitingForDrain) return;
    if (pending.length === 0) {
      settleWaiters();
      return;
    }
    const batch = pending;
    pending = [];
    let text = '';
    for (const record of batch) text += `${safeStringify(record)}\n`;
    const waiters = flushWaiters;
    flushWaiters = [];
    const ok = stream.write(text, () => {
      for (const w of waiters) w();
    });
    if (!ok) {
      waitingForDrain = true;
      stream.once('drain', () => {
        waitingForDrain = false;
        schedule();
      });
    }
  };

  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(writeBatch);
  };

  return {
    write(record) {
      if (closed || pending.length >= maxPending) {
        dropped++;
        return;
      }
      pending.push(record);
      schedule();
    },
    flush() {
      return new Promise<void>((resolve) => {
        flushWaiters.push(resolve);
        schedule();
      });
    },
    async close() {
      await this.flush();
      closed = true;
      if (options.ownsStream) await new Promise<void>((resolve) => stream.end(resolve));
    },
    get dropped() {
      return dropped;
    },
  };
}

/** A record that cannot be serialised (a bug) still leaves a line saying so. */
function safeStringify(record: object): string {
  try {
    return JSON.stringify(record);
  } catch (error) {
    return JSON.stringify({ kind: 'unserializable', error: (error as Error).message });
  }
}
