import { ErrorCode, UpstreamError } from '../errors/riskgate-error.ts';
import { internalError } from '../upstream/upstream-errors.ts';
import type { CallOptions, UpstreamResult } from '../upstream/upstream-result.ts';
import { MAX_BATCH_ITEMS, type VerificationStatus } from './identifiers.ts';
import type { RemoteAccessToolBatchItem, RemoteAccessToolResponse } from './signal-schemas.ts';

/**
 * Coalesces concurrent remote-access-tool lookups into `POST /signals/remote-access-tool` calls of
 * up to 100 items. A batch goes out when it is full, or when its window closes: at the end of the
 * current event-loop turn while no batch is in flight (a lone lookup pays no wait), after
 * `windowMs` otherwise (under load, waiting a little fills batches while the upstream is busy).
 */

/** One item of the batch body (docs/vendor-api.md#remote-access-tool: all required but sdkVersionId). */
export interface BatchItem {
  serviceId: string;
  accountId: string;
  unitId: string;
  verificationStatus: VerificationStatus;
  interactionId: string;
  sdkVersionId?: string;
}

/** Default batching window, ms: enough to coalesce a burst, too short to show in a decision's p99. */
export const DEFAULT_WINDOW_MS = 1;
/** Longest batching window accepted, ms: beyond it the wait would dominate the signal's latency. */
export const MAX_WINDOW_MS = 50;

/** Batching settings. */
export interface BatchOptions {
  /** Longest a lookup waits for companions while a batch is in flight, ms. Default 1 (0 to 50). */
  windowMs?: number;
  /** Items per batch, 1 to 100. Default 100. */
  maxItems?: number;
  /** Send at the end of the current turn when nothing is in flight. Default true. */
  immediateWhenIdle?: boolean;
}

/** Counters for metrics and tests. */
export interface BatcherStats {
  /** Lookups received. */
  lookups: number;
  /** Lookups answered by an identical item already in the open batch. */
  deduplicated: number;
  /** Batch calls sent. */
  batches: number;
  /** Items sent over all batches. */
  items: number;
  /** Lookups released by their own deadline or timeout before their batch answered. */
  released: number;
}

/** Sends one batch; resolves to the per-item results in request order (already length-checked). */
/**
 * Sends one batch. `traceparents` are those of the decisions whose lookups it carries (empty when
 * tracing is off): the batch's client span continues the first and links the others.
 */
export type SendBatch = (
  items: BatchItem[],
  traceparents: readonly string[],
) => Promise<UpstreamResult<RemoteAccessToolBatchItem[]>>;

type Resolve = (r: UpstreamResult<RemoteAccessToolResponse>) => void;

/** Operation name of a batch call, for errors and metrics. */
export const BATCH_OPERATION = 'remote-access-tool-batch';

class Waiter {
  done = false;
  timer: NodeJS.Timeout | undefined;
  constructor(
    readonly batcher: RatBatcher,
    readonly entry: Entry,
    readonly resolve: Resolve,
    readonly started: number,
    readonly signal: AbortSignal | undefined,
    readonly traceparent: string | undefined,
  ) {}

  /** The caller's deadline signal aborted. */
  handleEvent(): void {
    this.batcher.release(this, ErrorCode.DEADLINE_EXCEEDED, 'decision deadline passed');
  }

  settle(r: UpstreamResult<RemoteAccessToolResponse>): void {
    if (this.done) return;
    this.done = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.signal?.removeEventListener('abort', this);
    this.resolve(r);
  }
}

function onWaiterTimeout(w: Waiter): void {
  w.timer = undefined;
  w.batcher.release(w, ErrorCode.UPSTREAM_TIMEOUT, 'no answer within the call timeout');
}

interface Entry {
  key: string;
  item: BatchItem;
  waiters: Waiter[];
  /** Still in the open batch (not sent yet). */
  open: boolean;
}

/**
 * The remote-access-tool batcher (see the module comment for when a batch goes out). Identical
 * lookups in the open batch share one item; each caller is bounded by its own `signal` and
 * `timeoutMs` and is released alone, the batch going on for the others. `lookup` never rejects: a
 * failed batch fails each of its callers with the batch's typed error, an item's `forbidden` or
 * `internalError` fails only that item's callers.
 */
export class RatBatcher {
  private open = new Map<string, Entry>();
  private scheduled: NodeJS.Immediate | NodeJS.Timeout | undefined;
  private scheduledIsImmediate = false;
  private inflight = 0;
  private readonly windowMs: number;
  private readonly maxItems: number;
  private readonly immediateWhenIdle: boolean;
  readonly stats: BatcherStats = { lookups: 0, deduplicated: 0, batches: 0, items: 0, released: 0 };
  private readonly flushBound = (): void => {
    this.scheduled = undefined;
    this.flush();
  };

  constructor(
    private readonly send: SendBatch,
    opts: BatchOptions = {},
  ) {
    this.windowMs = Math.min(MAX_WINDOW_MS, Math.max(0, opts.windowMs ?? DEFAULT_WINDOW_MS));
    this.maxItems = Math.min(MAX_BATCH_ITEMS, Math.max(1, Math.floor(opts.maxItems ?? MAX_BATCH_ITEMS)));
    this.immediateWhenIdle = opts.immediateWhenIdle ?? true;
  }

  /** Queues one lookup. `key` identifies identical items (the full parameter set). */
  lookup(
    key: string,
    item: BatchItem,
    opts: CallOptions | undefined,
  ): Promise<UpstreamResult<RemoteAccessToolResponse>> {
    const signal = opts?.signal;
    const started = performance.now();
    if (signal?.aborted) {
      return Promise.resolve({
        ok: false,
        error: deadline(ErrorCode.DEADLINE_EXCEEDED, 'decision deadline passed'),
        durationMs: 0,
      });
    }
    this.stats.lookups++;
    let entry = this.open.get(key);
    if (entry === undefined) {
      entry = { key, item, waiters: [], open: true };
      this.open.set(key, entry);
    } else {
      this.stats.deduplicated++;
    }
    const e = entry;
    const p = new Promise<UpstreamResult<RemoteAccessToolResponse>>((resolve) => {
      const w = new Waiter(this, e, resolve, started, signal, opts?.traceparent);
      e.waiters.push(w);
      signal?.addEventListener('abort', w, { once: true });
      const timeoutMs = opts?.timeoutMs;
      // A signal sure to abort by then releases the caller first: no timer of its own (issue 32).
      const abortsAt = signal === undefined ? undefined : opts?.signalAbortsAtMs;
      if (timeoutMs !== undefined && (abortsAt === undefined || abortsAt > started + timeoutMs))
        w.timer = setTimeout(onWaiterTimeout, timeoutMs, w);
    });
    if (this.open.size >= this.maxItems) this.flush();
    else if (this.scheduled === undefined) this.schedule();
    return p;
  }

  private schedule(): void {
    if (this.immediateWhenIdle && this.inflight === 0) {
      this.scheduledIsImmediate = true;
      this.scheduled = setImmediate(this.flushBound);
    } else {
      this.scheduledIsImmediate = false;
      this.scheduled = setTimeout(this.flushBound, this.windowMs);
    }
  }

  /** Releases one caller early; the batch goes on for the others. */
  release(w: Waiter, code: ErrorCode, why: string): void {
    if (w.done) return;
    this.stats.released++;
    const entry = w.entry;
    if (entry.open) {
      const i = entry.waiters.indexOf(w);
      if (i !== -1) entry.waiters.splice(i, 1);
      // Nobody waits for it any more: do not send it.
      if (entry.waiters.length === 0) this.open.delete(entry.key);
    }
    w.settle({ ok: false, error: deadline(code, why), durationMs: performance.now() - w.started });
  }

  /** Sends the open batch now (if any). */
  flush(): void {
    if (this.scheduled !== undefined) {
      if (this.scheduledIsImmediate) clearImmediate(this.scheduled as NodeJS.Immediate);
      else clearTimeout(this.scheduled as NodeJS.Timeout);
      this.scheduled = undefined;
    }
    if (this.open.size === 0) return;
    const entries = [...this.open.values()];
    this.open = new Map();
    const items: BatchItem[] = new Array(entries.length);
    const traceparents: string[] = [];
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]!;
      e.open = false;
      items[i] = e.item;
      for (const w of e.waiters) if (w.traceparent !== undefined) traceparents.push(w.traceparent);
    }
    this.inflight++;
    this.stats.batches++;
    this.stats.items += items.length;
    let sent: Promise<UpstreamResult<RemoteAccessToolBatchItem[]>>;
    try {
      sent = this.send(items, traceparents);
    } catch (err) {
      sent = Promise.reject(err);
    }
    let landed = false;
    sent
      .then((r) => {
        // Before any caller resumes, so the lookups they make next see the batcher idle.
        landed = true;
        this.inflight--;
        this.answer(entries, r);
      })
      .catch((err: unknown) => {
        // A bug (`send` resolves to a result; answers are length-checked): never leave callers hanging.
        if (!landed) this.inflight--;
        const error = internalError('signals', BATCH_OPERATION, err);
        for (const e of entries) {
          for (const w of e.waiters)
            w.settle({ ok: false, error, durationMs: performance.now() - w.started });
        }
      });
  }

  /** Settles each entry's waiters with its item's outcome, in request order. */
  private answer(entries: Entry[], r: UpstreamResult<RemoteAccessToolBatchItem[]>): void {
    if (!r.ok) {
      for (const e of entries) {
        for (const w of e.waiters)
          w.settle({ ok: false, error: r.error, durationMs: performance.now() - w.started });
      }
      return;
    }
    const results = r.value;
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]!;
      if (e.waiters.length === 0) continue;
      const outcome = itemOutcome(results[i]!);
      for (const w of e.waiters) {
        const durationMs = performance.now() - w.started;
        w.settle(
          outcome instanceof UpstreamError
            ? { ok: false, error: outcome, durationMs }
            : { ok: true, value: outcome, durationMs },
        );
      }
    }
  }
}

function deadline(code: ErrorCode, why: string): UpstreamError {
  return new UpstreamError(code, `signals remote-access-tool: ${why}`, { upstream: 'signals' });
}

/**
 * One batch item as the single endpoint's envelope (so callers see the same shape either way), or
 * the item's own error: `forbidden` and `internalError` fail only that caller.
 */
export function itemOutcome(item: RemoteAccessToolBatchItem): RemoteAccessToolResponse | UpstreamError {
  if (item.reason === 'forbidden') {
    return new UpstreamError(ErrorCode.UPSTREAM_FORBIDDEN, 'signals remote-access-tool: item forbidden', {
      upstream: 'signals',
      status: 200,
      upstreamMessage: 'forbidden',
    });
  }
  if (item.reason === 'internalError') {
    return new UpstreamError(
      ErrorCode.UPSTREAM_SERVER_ERROR,
      'signals remote-access-tool: item internalError',
      {
        upstream: 'signals',
        status: 200,
        upstreamMessage: 'internalError',
      },
    );
  }
  const env: RemoteAccessToolResponse = {
    signalType: 'remote_access_tool',
    success: item.success,
    unitId: item.unitId,
    verificationStatus: item.verificationStatus as VerificationStatus,
    interactionId: item.interactionId,
  };
  if (item.reason !== undefined) env.reason = item.reason;
  if (item.result !== undefined) env.result = item.result;
  if (item.observationTime !== undefined) env.observationTime = item.observationTime;
  return env;
}
