import type { LifecycleLog } from '../lifecycle/component.ts';
import type { CompileOptions } from './policy-compiler.ts';
import { createPolicyStore, type PolicyStore } from './policy-store.ts';
import type { CompiledPolicy } from './policy-types.ts';

/** The shadow policy (RISKGATE_SHADOW_POLICY_PATH): evaluated after each answer, never acted on. */
export interface ShadowPolicy {
  current(): CompiledPolicy | undefined;
  status(): object;
  close(): void;
  /** Settles once the first load was tried (loaded or not); never rejects. */
  ready: Promise<void>;
}

/** How often a candidate that did not load is tried again, milliseconds. */
const SHADOW_RETRY_MS = 5000;

/**
 * The shadow policy's store. A candidate that does not load never touches the active policy: it is
 * reported (log, `GET /policies`, the reload metric) and tried again every 5 s until it loads; once
 * loaded it reloads on change like the active one, keeping its last good revision on a bad edit.
 */
export function openShadowPolicy(
  path: string,
  debounceMs: number,
  log: LifecycleLog,
  onReload: (result: 'ok' | 'error') => void,
  compile?: CompileOptions,
): ShadowPolicy {
  let store: PolicyStore | undefined;
  let lastError: string | undefined;
  let closed = false;
  let retry: NodeJS.Timeout | undefined;
  const tryOpen = async () => {
    try {
      const opened = await createPolicyStore({
        path,
        debounceMs,
        log: (line) => log({ ...line, shadow: true }),
        onReload: () => onReload('ok'),
        onError: () => onReload('error'),
        compile,
      });
      if (closed) {
        opened.close();
        return;
      }
      store = opened;
      lastError = undefined;
      clearInterval(retry);
      log({ level: 'info', msg: 'shadow policy loaded', path, revision: opened.current().revision });
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (message !== lastError)
        log({ level: 'error', msg: 'shadow policy not loaded', path, error: message });
      lastError = message;
    }
  };
  const ready = tryOpen();
  retry = setInterval(() => {
    if (store === undefined) void tryOpen();
  }, SHADOW_RETRY_MS);
  retry.unref();
  return {
    ready,
    current: () => store?.current(),
    status: () => store?.status() ?? { path, loaded: false, ...(lastError !== undefined && { lastError }) },
    close: () => {
      closed = true;
      clearInterval(retry);
      store?.close();
    },
  };
}
