import { createHash } from 'node:crypto';
import { type FSWatcher, watch } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { CompileOptions } from './policy-compiler.ts';
import { loadPolicy, PolicyLoadError, resolvePolicyFiles } from './policy-loader.ts';
import type { CompiledPolicy, PolicyIssue } from './policy-types.ts';

/**
 * The live policy with hot reload. A change to the files is compiled off to the side and swapped in
 * with one reference assignment, so a decision sees either the old policy or the new one, never a
 * mix. An invalid edit is refused: the last good policy stays live, and the error is logged, passed
 * to `onError` (for metrics) and kept in `status().lastError` (for `/policies`).
 *
 * Changes are noticed two ways, both reloading only when the files' content hash moved: any event
 * in the directory (not only on the policy's name: a Kubernetes ConfigMap update is a swap of the
 * `..data` symlink, and editors save through temporary names), and a slow poll, because fs.watch
 * misses events on some mounts (network filesystems, some container runtimes).
 */

export interface PolicyStoreStatus {
  name: string;
  revision: string;
  /** When the live policy was loaded (RFC 3339). */
  loadedAt: string;
  files: readonly string[];
  /** Successful reloads that changed the revision, since start. */
  reloads: number;
  /** Refused reloads since start. */
  failedReloads: number;
  warnings: readonly PolicyIssue[];
  /** The latest refused edit; cleared by the next successful load. */
  lastError?: {
    message: string;
    at: string;
    errors: { file: string; line: number; col: number; message: string }[];
  };
}

export type ReloadOutcome =
  | { ok: true; changed: boolean; revision: string }
  | { ok: false; error: PolicyLoadError; revision: string };

export interface PolicyStore {
  /** The live policy. Cheap: a field read. */
  current(): CompiledPolicy;
  status(): PolicyStoreStatus;
  /** Loads the files now (also what the watcher calls). Never rejects. */
  reload(): Promise<ReloadOutcome>;
  /** Stops watching. */
  close(): void;
}

export interface PolicyStoreOptions {
  /** A policy file, or a directory holding exactly one policy file. */
  path: string;
  /** Watch the directory and reload on change. Default true. */
  watch?: boolean;
  /** Quiet period after the last file event before reloading, milliseconds. Default 200. */
  debounceMs?: number;
  /**
   * Interval of the content poll, milliseconds: the files are re-read and reloaded when their hash
   * changed. Default 5000 when `watch` is on, else no poll; 0 turns it off. The timer is unref'd.
   */
  pollIntervalMs?: number;
  /** After a reload that changed the revision (metrics hook). */
  onReload?: (policy: CompiledPolicy, info: { previousRevision: string; durationMs: number }) => void;
  /**
   * After each content check (a file event's or the poll's) has settled, reload included; `changed`
   * says whether the content had moved. Lets a test assert "no reload" after the check, not a sleep.
   */
  onChecked?: (changed: boolean) => void;
  /** After a refused reload (metrics hook). */
  onError?: (error: PolicyLoadError, info: { durationMs: number }) => void;
  /** One structured log line per reload outcome. Default: JSON on stderr. */
  log?: (line: Record<string, unknown>) => void;
  /** How each load compiles (the input table: `CompileOptions.inputs`). Default: the defaults. */
  compile?: CompileOptions | undefined;
}

function defaultLog(line: Record<string, unknown>): void {
  process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), ...line })}\n`);
}

/** Hash of the policy files' names and content (or of why they cannot be read). */
async function contentHash(path: string): Promise<string> {
  const h = createHash('sha256');
  try {
    for (const file of await resolvePolicyFiles(path)) {
      h.update(file)
        .update('\0')
        .update(await readFile(file))
        .update('\0');
    }
  } catch (e) {
    h.update(`unreadable:${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  return h.digest('hex');
}

function toLoadError(e: unknown, path: string): PolicyLoadError {
  if (e instanceof PolicyLoadError) return e;
  const message = e instanceof Error ? e.message : String(e);
  return new PolicyLoadError(`policy ${path}: ${message}`, [
    { file: path, line: 1, col: 1, message, severity: 'error' },
  ]);
}

/**
 * Loads the policy and starts watching it.
 * @throws PolicyLoadError when the initial load fails (there is no last good policy to keep).
 */
export async function createPolicyStore(options: PolicyStoreOptions): Promise<PolicyStore> {
  const { path } = options;
  const debounceMs = options.debounceMs ?? 200;
  const watching = options.watch ?? true;
  const pollIntervalMs = options.pollIntervalMs ?? (watching ? 5000 : 0);
  const log = options.log ?? defaultLog;
  // The content each load attempt started from: a poll or event that finds the same content does
  // nothing, so a broken file is reported once, not on every tick.
  let seenHash = await contentHash(path);
  let live = await loadPolicy(path, options.compile);
  let loadedAt = new Date();
  let reloads = 0;
  let failedReloads = 0;
  let lastError: PolicyStoreStatus['lastError'];
  let running: Promise<ReloadOutcome> | undefined;
  let again = false;
  let timer: NodeJS.Timeout | undefined;
  let watcher: FSWatcher | undefined;
  let poller: NodeJS.Timeout | undefined;
  let closed = false;

  const loadOnce = async (): Promise<ReloadOutcome> => {
    seenHash = await contentHash(path);
    const started = performance.now();
    try {
      const next = await loadPolicy(path, options.compile);
      const durationMs = performance.now() - started;
      lastError = undefined;
      if (next.revision === live.revision) return { ok: true, changed: false, revision: live.revision };
      const previousRevision = live.revision;
      live = next;
      loadedAt = new Date();
      reloads++;
      log({
        level: 'info',
        msg: 'policy reloaded',
        policy: next.name,
        revision: next.revision,
        previousRevision,
      });
      options.onReload?.(next, { previousRevision, durationMs });
      return { ok: true, changed: true, revision: next.revision };
    } catch (e) {
      const error = toLoadError(e, path);
      const durationMs = performance.now() - started;
      failedReloads++;
      const errors = error.issues.filter((i) => i.severity === 'error');
      lastError = {
        message: error.message,
        at: new Date().toISOString(),
        errors: errors.map(({ file, line, col, message }) => ({ file, line, col, message })),
      };
      log({
        level: 'error',
        msg: 'policy reload refused; last good policy stays live',
        code: error.code,
        revision: live.revision,
        error: error.message,
      });
      options.onError?.(error, { durationMs });
      return { ok: false, error, revision: live.revision };
    }
  };

  // One load at a time; a change during a load triggers exactly one more.
  const reload = (): Promise<ReloadOutcome> => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      let outcome = await loadOnce();
      while (again && !closed) {
        again = false;
        outcome = await loadOnce();
      }
      running = undefined;
      return outcome;
    })();
    return running;
  };

  // Reloads when the content moved since the last attempt; a trigger during a check checks again.
  let checking: Promise<void> | undefined;
  let recheck = false;
  const reloadIfChanged = (): Promise<void> => {
    if (checking) {
      recheck = true;
      return checking;
    }
    checking = (async () => {
      do {
        recheck = false;
        if (running) await running;
        if (closed) return;
        const changed = (await contentHash(path)) !== seenHash;
        if (changed) await reload();
        options.onChecked?.(changed);
      } while (recheck && !closed);
    })().finally(() => {
      checking = undefined;
    });
    return checking;
  };

  if (watching) {
    const dir = (await stat(path)).isDirectory() ? path : dirname(path);
    // The directory, and every name in it: editors save through temporary files renamed over the
    // policy, and a ConfigMap swaps a `..data` symlink the policy file points through.
    watcher = watch(dir, { persistent: false }, () => {
      if (timer) clearTimeout(timer);
      timer = setTimeout(() => {
        timer = undefined;
        void reloadIfChanged();
      }, debounceMs);
      timer.unref();
    });
    watcher.on('error', (e) => log({ level: 'error', msg: 'policy watcher failed', error: String(e) }));
  }
  if (pollIntervalMs > 0) {
    poller = setInterval(() => void reloadIfChanged(), pollIntervalMs);
    poller.unref();
  }

  return {
    current: () => live,
    status: () => {
      const s: PolicyStoreStatus = {
        name: live.name,
        revision: live.revision,
        loadedAt: loadedAt.toISOString(),
        files: live.files ?? [],
        reloads,
        failedReloads,
        warnings: live.warnings ?? [],
      };
      if (lastError) s.lastError = lastError;
      return s;
    },
    reload,
    close: () => {
      closed = true;
      if (timer) clearTimeout(timer);
      if (poller) clearInterval(poller);
      watcher?.close();
    },
  };
}
