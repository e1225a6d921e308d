import { readFile } from 'node:fs/promises';
import { resolveSecretFiles } from '../config/riskgate-config.ts';
import { parseOperatorKeyEntry } from '../operators/operator-keys.ts';
import type { CliIo } from './policy-commands.ts';

/**
 * The CLI's way to a running riskgate's operator endpoints (the `lists` and the policy versions'
 * commands): every change then goes through the same checks, audit trail and sharing as from the
 * API. Where: `--url`, else 127.0.0.1 on RISKGATE_OPS_PORT (or RISKGATE_PORT, default 8080), as
 * the service reads them. Who: the key in `--key-file`, else the first RISKGATE_OPS_KEYS entry
 * (RISKGATE_OPS_KEYS_FILE too): its operator is the one the audit trail names. The key is sent as
 * a bearer token and never printed.
 */

/** Each request's own timeout, milliseconds. */
export const OPERATOR_REQUEST_TIMEOUT_MS = 10_000;

export interface OperatorTargetOptions {
  env: Readonly<Record<string, string | undefined>>;
  url?: string | undefined;
  keyFile?: string | undefined;
}

export interface OperatorTarget {
  url: string;
  key: string;
}

/** A refusal as riskgate said it (RFC 9457 problem details), or none when it did not answer. */
export type OperatorAnswer =
  | { ok: true; body: Record<string, unknown> }
  | { ok: false; status?: number; problem?: Record<string, unknown> };

/** Where and as whom; undefined (said why on `io.err`) when there is no key. */
export async function operatorTarget(
  o: OperatorTargetOptions,
  io: CliIo,
): Promise<OperatorTarget | undefined> {
  const port = o.env.RISKGATE_OPS_PORT?.trim() || o.env.RISKGATE_PORT?.trim() || '8080';
  const url = (o.url ?? `http://127.0.0.1:${port}`).replace(/\/+$/, '');
  if (o.keyFile !== undefined) {
    try {
      return { url, key: (await readFile(o.keyFile, 'utf8')).trim() };
    } catch (error) {
      io.err(`riskgate: cannot read --key-file: ${(error as Error).message}`);
      return undefined;
    }
  }
  let env: Record<string, string | undefined>;
  try {
    env = resolveSecretFiles(o.env);
  } catch (error) {
    io.err(`riskgate: ${(error as Error).message}`);
    return undefined;
  }
  const first = env.RISKGATE_OPS_KEYS?.split(',')[0]?.trim();
  const entry = first ? parseOperatorKeyEntry(first) : undefined;
  if (entry === undefined || typeof entry === 'string') {
    io.err(
      'riskgate: no operator key: pass --key-file <file> or set RISKGATE_OPS_KEYS as the service has it',
    );
    return undefined;
  }
  return { url, key: entry.key };
}

/**
 * One call to riskgate, bounded by {@link OPERATOR_REQUEST_TIMEOUT_MS}; a refusal or a failure is
 * printed (its problem detail, and each bad field when there are several), never the key.
 */
export async function callOperator(
  t: OperatorTarget,
  io: CliIo,
  method: string,
  path: string,
  body?: { json: unknown } | { ndjson: string },
): Promise<OperatorAnswer> {
  let res: Response;
  try {
    res = await fetch(`${t.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${t.key}`,
        ...(body !== undefined && {
          'content-type': 'json' in body ? 'application/json' : 'application/x-ndjson',
        }),
      },
      ...(body !== undefined && { body: 'json' in body ? JSON.stringify(body.json) : body.ndjson }),
      signal: AbortSignal.timeout(OPERATOR_REQUEST_TIMEOUT_MS),
    });
  } catch (error) {
    io.err(`riskgate: ${t.url} did not answer: ${(error as Error).message}`);
    return { ok: false };
  }
  const text = await res.text();
  let parsed: Record<string, unknown> = {};
  try {
    parsed = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  } catch {
    // not JSON: the status says enough
  }
  if (!res.ok) {
    const field = typeof parsed.field === 'string' ? ` (${parsed.field})` : '';
    io.err(
      `riskgate: ${res.status} ${String(parsed.code ?? '')}: ${String(parsed.detail ?? text.slice(0, 200))}${field}`,
    );
    const errors = Array.isArray(parsed.errors) ? (parsed.errors as { message?: unknown }[]) : [];
    if (errors.length > 1) for (const e of errors) io.err(`  ${String(e.message)}`);
    return { ok: false, status: res.status, problem: parsed };
  }
  return { ok: true, body: parsed };
}
