import type { AddressInfo } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import { InputError } from '../errors/riskgate-error.ts';
import { createSandboxApp, type SandboxApp } from './create-sandbox-app.ts';
import { type FaultRule, faultRulesSchema } from './faults/fault-rule.ts';
import {
  DEFAULT_CREDENTIALS,
  DEFAULT_THRESHOLDS,
  type SandboxConfig,
  type SandboxCredentials,
  type SignalThresholds,
} from './sandbox-config.ts';
import { loadScenario } from './scenario/load-scenario.ts';
import type { ScenarioInput } from './scenario/scenario-schema.ts';

/** How to start a sandbox. Every field is optional. */
export interface SandboxOptions {
  /** TCP port; 0 (default) picks a free one. */
  port?: number;
  /** Interface to bind. Default 127.0.0.1. */
  host?: string;
  /** Overrides of the well-known credentials (DEFAULT_CREDENTIALS). */
  credentials?: Partial<SandboxCredentials>;
  /** Overrides of the signal thresholds (DEFAULT_THRESHOLDS). */
  thresholds?: Partial<SignalThresholds>;
  /**
   * Access token lifetime, seconds. Default 43200 (docs/vendor-api.md#oauth-token); `expires_in` is this
   * minus 1.
   */
  tokenLifetimeSeconds?: number;
  /** `'default'` (the demo accounts, default), `'empty'`, a YAML file path, or a Scenario object. */
  scenario?: 'default' | 'empty' | string | ScenarioInput;
  /** Faults active from the start, after the scenario's own. */
  faults?: FaultRule[];
  /** Suppress error logging. Default false. */
  quiet?: boolean;
}

/** A listening sandbox. */
export interface RunningSandbox {
  /** `http://127.0.0.1:PORT`, no trailing slash. */
  url: string;
  port: number;
  config: SandboxConfig;
  /** Stops listening and closes every connection, hanging ones included. */
  stop(): Promise<void>;
  /** The in-process sandbox (clock, stats, faults, observations) for tests that need more. */
  sandbox: SandboxApp;
}

/** Default access token lifetime, seconds (docs/vendor-api.md#oauth-token). */
export const DEFAULT_TOKEN_LIFETIME_SECONDS = 43_200;

/** Resolves options into a config (defaults applied, values checked). */
export function sandboxConfigOf(options: SandboxOptions = {}): SandboxConfig {
  const lifetime = options.tokenLifetimeSeconds ?? DEFAULT_TOKEN_LIFETIME_SECONDS;
  if (!Number.isInteger(lifetime) || lifetime < 1) {
    throw new InputError('tokenLifetimeSeconds must be a positive integer', [
      { field: 'tokenLifetimeSeconds', message: 'must be a positive integer' },
    ]);
  }
  return {
    credentials: { ...DEFAULT_CREDENTIALS, ...options.credentials },
    thresholds: { ...DEFAULT_THRESHOLDS, ...options.thresholds },
    tokenLifetimeSeconds: lifetime,
    hmacSkewSeconds: 300,
  };
}

/**
 * Starts a sandbox on `host:port` serving the OAuth, Trust Signals, Admin and Log APIs and the
 * `/sandbox/...` control API. Resolves once it listens.
 */
export async function startSandbox(options: SandboxOptions = {}): Promise<RunningSandbox> {
  const config = sandboxConfigOf(options);
  const scenario = await loadScenario(options.scenario);
  const faults = options.faults === undefined ? [] : faultRulesSchema.parse(options.faults);
  const sandbox = await createSandboxApp({
    config,
    scenario,
    faults,
    ...(options.quiet && { logError: () => {} }),
  });
  const host = options.host ?? '127.0.0.1';
  const server = createAdaptorServer({ fetch: sandbox.app.fetch });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://${urlHost(host)}:${port}`;
  sandbox.setPublicUrl(url);

  let stopping: Promise<void> | undefined;
  return {
    url,
    port,
    config,
    sandbox,
    stop() {
      stopping ??= new Promise<void>((resolve) => {
        sandbox.shutdown();
        server.close(() => resolve());
        if ('closeAllConnections' in server) server.closeAllConnections();
      });
      return stopping;
    },
  };
}

/** The host part of the URL clients should use for a bind address. */
function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}
