import { createHook } from 'node:async_hooks';
import { promiseHooks } from 'node:v8';

/**
 * Counts the async machinery the main thread creates while it is on (issue 32): promises by how
 * they were made (an async function's activation, an `await`, `then`/`catch`/`finally`,
 * `new Promise`, `Promise.resolve`, `Promise.all`...), promise reactions run (microtasks), async
 * resources by type (`Timeout`, `Immediate`, `TickObject`...), AbortControllers and
 * `AbortSignal.timeout`/`any`; each also by where it was made: the first file of riskgate's or of
 * a package on its creation stack, and the next other one (`src/timing/clock.ts <
 * src/decide/gather.ts`: the clock's `setTimeout`, called by the gather).
 *
 * Hooks make promises V8 otherwise skips (an `await` of a native promise allocates its throwaway
 * promise only when a hook is on), so "await" counts the awaits executed, not allocations; and the
 * stacks make the process slow: read counts, never times, while it is on. Used by
 * bench/promise-count.ts (a server's count per decision) and test/decide-async-layers.test.ts.
 */

type Counts = Map<string, number>;

export interface PromiseCounts {
  /** kind (`promise: async function`, `resource: Timeout`, `AbortController`...) → count */
  total: Counts;
  /** kind → where (`src/decide/run-decision.ts < src/decide/decide-route.ts`) → count */
  byFile: Map<string, Counts>;
}

const ROOT = new URL('..', import.meta.url).pathname;
const add = (m: Counts, k: string, n = 1) => m.set(k, (m.get(k) ?? 0) + n);

let counts: PromiseCounts | undefined;
/** Re-entrancy guard: capturing a stack must not count its own work. */
let inHook = false;

/** Starts counting (installing the hooks the first time); `stop()` ends it and hands the counts. */
export function startPromiseCount(): { stop(): PromiseCounts } {
  install();
  const mine: PromiseCounts = { total: new Map(), byFile: new Map() };
  counts = mine;
  return {
    stop() {
      if (counts === mine) counts = undefined;
      return mine;
    },
  };
}

/** A frame's file as `src/decide/gather.ts` or `node_modules/undici`; undefined for Node's own and tsx. */
function fileOf(frame: string): string | undefined {
  const file = frame.slice(frame.lastIndexOf('(') + 1, -1);
  const nm = file.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const parts = file.slice(nm + 1).split('/');
    if (parts[1] === 'tsx') return undefined;
    return parts.slice(0, parts[1]!.startsWith('@') ? 3 : 2).join('/');
  }
  const at = file.indexOf(ROOT);
  return at < 0 || file.includes('bench/promise-count') ? undefined : file.slice(at + ROOT.length);
}

/** The first file of ours or of a package on the stack, and the next other one (its caller). */
function sourceOf(frames: string[]): string {
  let first: string | undefined;
  for (const f of frames) {
    const file = fileOf(f);
    if (file === undefined || file === first) continue;
    if (first !== undefined) return `${first} < ${file}`;
    first = file;
  }
  if (first !== undefined) return first;
  const internal = frames.find((f) => f.includes('(node:'));
  return internal === undefined ? '(none)' : internal.slice(internal.lastIndexOf('('));
}

/**
 * The creation's frames as `at Type.name (file)`, formatted here: tsx's source maps make the
 * default formatting cost milliseconds a stack, and the file is all this needs.
 */
function frames(): string[] {
  const { stackTraceLimit, prepareStackTrace } = Error;
  Error.stackTraceLimit = 40;
  Error.prepareStackTrace = (_e, sites: NodeJS.CallSite[]) =>
    sites.map((c) => {
      const typeName = c.getTypeName();
      const type = c.isConstructor()
        ? 'new '
        : typeName === 'Function' || typeName === null
          ? ''
          : `${typeName}.`;
      return `at ${type}${c.getFunctionName() ?? '<anonymous>'} (${c.getFileName() ?? '<anonymous>'})`;
    });
  const o: { stack?: string[] } = {};
  Error.captureStackTrace(o, frames);
  const stack = o.stack ?? [];
  Error.stackTraceLimit = stackTraceLimit;
  Error.prepareStackTrace = prepareStackTrace;
  // Drop this file's frames and Node's hook dispatch: the top is then what made the promise.
  let first = 0;
  while (
    first < stack.length &&
    /(bench\/promise-counter\.ts|node:internal\/(promise_hooks|async_hooks))\)$/.test(stack[first]!)
  )
    first++;
  return stack.slice(first);
}

function record(kind: string | ((top: string) => string)): void {
  const c = counts;
  if (c === undefined || inHook) return;
  inHook = true;
  const stack = frames();
  const k = typeof kind === 'string' ? kind : kind(stack[0] ?? '');
  add(c.total, k);
  let m = c.byFile.get(k);
  if (m === undefined) {
    m = new Map();
    c.byFile.set(k, m);
  }
  add(m, sourceOf(stack));
  inHook = false;
}

/** How a promise was made, from its stack's top frame and whether it has a parent. */
function promiseKind(top: string, hasParent: boolean): string {
  const m = /^at (new Promise|Promise\.\w+) \(<anonymous>\)$/.exec(top);
  if (m !== null) return `promise: ${m[1]!}`;
  return hasParent ? 'promise: await' : 'promise: async function';
}

let installed = false;

function install(): void {
  if (installed) return;
  installed = true;
  promiseHooks.createHook({
    init(_promise, parent) {
      if (counts !== undefined) record((top) => promiseKind(top, parent !== undefined));
    },
    before() {
      if (counts !== undefined && !inHook) add(counts.total, 'reactions run (microtasks)');
    },
  });
  createHook({
    init(_id, type) {
      if (type !== 'PROMISE') record(`resource: ${type}`);
    },
  }).enable();
  const Controller = globalThis.AbortController;
  globalThis.AbortController = class CountedAbortController extends Controller {
    constructor() {
      super();
      record('AbortController');
    }
  };
  for (const name of ['timeout', 'any'] as const) {
    const original = AbortSignal[name] as (...args: unknown[]) => AbortSignal;
    (AbortSignal as unknown as Record<string, unknown>)[name] = (...args: unknown[]) => {
      record(`AbortSignal.${name}`);
      return original.apply(AbortSignal, args);
    };
  }
}
