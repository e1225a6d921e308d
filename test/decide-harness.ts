import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/config/riskgate-config.ts';
import type { DecisionLog } from '../src/decision-log/decision-log.ts';
import { sandboxUpstream } from '../src/dev/embedded-sandbox.ts';
import type { OutboxEntry } from '../src/outbox/outbox-store.ts';
import type { RunningSandbox, SandboxOptions } from '../src/sandbox/server.ts';
import {
  type RunningRiskgate,
  type StartRiskgateOptions,
  startRiskgate,
} from '../src/service/start-riskgate.ts';
import { eventually } from './support/eventually.ts';
import { sandboxControl } from './support/sandbox-control.ts';
import { startTestSandbox } from './support/test-sandbox.ts';

/**
 * End-to-end harness: the real sandbox and the real riskgate (real clients, policy store, queue),
 * both listening on port 0, talking over HTTP. The decision log is collected in memory.
 */

export const CALLER_KEY = 'test-caller-key-0123456789';
/** The operator key (RISKGATE_OPS_KEYS) of every harness unless its `env` sets another (or '' for none). */
export const OPS_KEY = 'test-ops-key-0123456789abc';

export interface Harness {
  sandbox: RunningSandbox;
  riskgate: RunningRiskgate;
  /** riskgate's base URL. */
  url: string;
  /** RISKGATE_STATE_DIR: a fresh temp dir (the Log API checkpoint). */
  stateDir: string;
  /** Decision log lines, in order. */
  lines: Record<string, unknown>[];
  /** Service log lines (stderr in production), in order. */
  serviceLog: Record<string, unknown>[];
  /** POSTs `body` (serialised unless a string) to /decide with the caller key. */
  decide(body: unknown, init?: { headers?: Record<string, string> }): Promise<HttpAnswer>;
  /**
   * POSTs `body` to /decide with the caller key and hands back a way to hang up: `answer` settles
   * (undefined once hung up) whatever happens, for tests of a caller that goes away.
   */
  decideThenHangUp(body: unknown): { answer: Promise<Response | undefined>; hangUp: () => void };
  /** GETs an operator endpoint (/metrics, /policies, /openapi.json, /actions) with the operator key. */
  ops(path: string): Promise<Response>;
  /** A call to the sandbox's control API (`/sandbox/...`). */
  control(method: string, path: string, body?: unknown): Promise<unknown>;
  /** Calls counted by the sandbox for `route` (e.g. `GET /api/v1/signals/new-browser`). */
  calls(route: string): Promise<number>;
  /**
   * The outbox's entries (any status) matching `filter`. A decision's actions are in the outbox
   * before its answer, so "nothing was queued" is asserted on this at once, with no wait.
   */
  queued(filter?: { target?: string; decisionId?: unknown }): Promise<OutboxEntry[]>;
  stop(): Promise<void>;
}

export interface HttpAnswer {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
}

export interface HarnessOptions {
  /** Policy file contents (written to a temp dir), or a path. Default: the shipped policies/. */
  policy?: { yaml: string } | string;
  deadlineMs?: number;
  sandbox?: SandboxOptions;
  /** Another harness's sandbox (a second riskgate on the same vendor); not stopped by this one. */
  sharedSandbox?: RunningSandbox;
  riskgate?: Partial<Omit<StartRiskgateOptions, 'config' | 'upstream' | 'apiKeys'>>;
  /** Caller keys. Default `[CALLER_KEY]`. */
  apiKeys?: string[];
  /** Further RISKGATE_* variables for loadConfig (e.g. admission limits). */
  env?: Record<string, string>;
  /** Without the Log API (no logsUrl, no key): history is not_configured. */
  withoutLogApi?: boolean;
}

/**
 * Waits (at most 20 s) until riskgate is ready: `/readyz` answers 200 once the inputs the policy
 * reads are warm (the token held, the Log API history read back a day), so no decision of a test
 * is degraded by a start still warming up.
 */
async function untilReady(url: string): Promise<void> {
  await eventually(async () => (await fetch(`${url}/readyz`)).status === 200, {
    timeoutMs: 20_000,
    what: 'riskgate ready (/readyz)',
  });
}

/** Writes a policy file into a fresh temp dir and returns its path. */
export function writePolicy(yaml: string, dir = mkdtempSync(join(tmpdir(), 'riskgate-policy-'))): string {
  const path = join(dir, 'policy.yaml');
  writeFileSync(path, yaml);
  return path;
}

function collectingLog(lines: Record<string, unknown>[]): DecisionLog {
  return {
    write: (record) => {
      lines.push(record as Record<string, unknown>);
    },
    flush: async () => {},
    close: async () => {},
    dropped: 0,
  };
}

export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const sandbox = options.sharedSandbox ?? (await startTestSandbox(options.sandbox));
  const policyPath =
    options.policy === undefined
      ? 'policies/'
      : typeof options.policy === 'string'
        ? options.policy
        : writePolicy(options.policy.yaml);
  const stateDir = mkdtempSync(join(tmpdir(), 'riskgate-state-'));
  const config = loadConfig({
    RISKGATE_PORT: '0',
    RISKGATE_POLICY_PATH: policyPath,
    RISKGATE_DEADLINE_MS: String(options.deadlineMs ?? 300),
    RISKGATE_DECISION_LOG: 'off',
    RISKGATE_STATE_DIR: stateDir,
    RISKGATE_OPS_KEYS: OPS_KEY,
    ...options.env,
  });
  const lines: Record<string, unknown>[] = [];
  const serviceLog: Record<string, unknown>[] = [];
  let riskgate: RunningRiskgate;
  try {
    const upstream = sandboxUpstream(sandbox);
    riskgate = await startRiskgate({
      config,
      upstream: options.withoutLogApi ? { ...upstream, logsUrl: undefined, logApiKey: undefined } : upstream,
      apiKeys: options.apiKeys ?? [CALLER_KEY],
      host: '127.0.0.1',
      log: (line) => {
        serviceLog.push(line);
      },
      decisionLog: collectingLog(lines),
      policyDebounceMs: 50,
      actionQueue: { baseDelayMs: 20, maxDelayMs: 200 },
      ...options.riskgate,
    });
    await untilReady(riskgate.url);
  } catch (error) {
    if (options.sharedSandbox === undefined) await sandbox.stop();
    throw error;
  }

  const control = (method: string, path: string, body?: unknown) =>
    sandboxControl(sandbox.url, method, path, body);

  return {
    sandbox,
    riskgate,
    url: riskgate.url,
    stateDir,
    lines,
    serviceLog,
    ops: (path) => fetch(`${riskgate.url}${path}`, { headers: { authorization: `Bearer ${OPS_KEY}` } }),
    async decide(body, init = {}) {
      const res = await fetch(`${riskgate.url}/decide`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${CALLER_KEY}`,
          'content-type': 'application/json',
          ...init.headers,
        },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : {} };
    },
    decideThenHangUp(body) {
      const gone = new AbortController();
      const answer = fetch(`${riskgate.url}/decide`, {
        method: 'POST',
        headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: gone.signal,
      }).catch(() => undefined);
      return { answer, hangUp: () => gone.abort() };
    },
    control,
    async queued(filter = {}) {
      const entries = await riskgate.outbox.store.list({ limit: 100_000 });
      return entries.filter(
        (e) =>
          (filter.target === undefined || e.spec.target === filter.target) &&
          (filter.decisionId === undefined || e.spec.decisionId === filter.decisionId),
      );
    },
    async calls(route) {
      const stats = (await control('GET', '/sandbox/stats')) as {
        routes: Record<string, Record<string, number>>;
      };
      return Object.values(stats.routes[route] ?? {}).reduce((a, b) => a + b, 0);
    },
    async stop() {
      await riskgate.stop();
      if (options.sharedSandbox === undefined) await sandbox.stop();
    },
  };
}
