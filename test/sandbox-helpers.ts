import { audienceScope } from '../src/auth/token-manager.ts';
import type { RunningSandbox } from '../src/sandbox/server.ts';

/** Shared by the sandbox's own tests: real HTTP against a started sandbox. */

export type ClientKind = 'retrieval' | 'collection';

export function basicAuth(id: string, secret: string): string {
  return `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;
}

export function scopeFor(sb: RunningSandbox, kind: ClientKind): string {
  const c = sb.config.credentials;
  const audience = kind === 'retrieval' ? c.signalsAudience : c.collectionAudience;
  return audienceScope(c.idp, audience);
}

export function requestToken(
  sb: RunningSandbox,
  kind: ClientKind,
  body?: string,
  auth?: string,
): Promise<Response> {
  const c = sb.config.credentials;
  const header =
    auth ??
    (kind === 'retrieval'
      ? basicAuth(c.retrievalClientId, c.retrievalClientSecret)
      : basicAuth(c.collectionClientId, c.collectionClientSecret));
  return fetch(`${sb.url}/oauth/v2/token`, {
    method: 'POST',
    headers: { authorization: header, 'content-type': 'application/x-www-form-urlencoded' },
    body:
      body ?? new URLSearchParams({ grant_type: 'client_credentials', scope: scopeFor(sb, kind) }).toString(),
  });
}

export async function getToken(sb: RunningSandbox, kind: ClientKind = 'retrieval'): Promise<string> {
  const res = await requestToken(sb, kind);
  if (res.status !== 200) throw new Error(`token request failed: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { access_token: string }).access_token;
}

/** GET a signal; `params` gets `serviceId` from the sandbox unless given (pass `null` to omit). */
export function getSignal(
  sb: RunningSandbox,
  signalName: string,
  params: Record<string, string | null>,
  token: string | undefined,
  authorization?: string,
  signal?: AbortSignal,
): Promise<Response> {
  const q = new URLSearchParams();
  const all: Record<string, string | null> = { serviceId: sb.config.credentials.serviceId, ...params };
  for (const [k, v] of Object.entries(all)) if (v !== null) q.set(k, v);
  const headers: Record<string, string> = {};
  if (authorization !== undefined) headers.authorization = authorization;
  else if (token !== undefined) headers.authorization = `Bearer ${token}`;
  return fetch(`${sb.url}/api/v1/signals/${signalName}?${q}`, { headers, ...(signal && { signal }) });
}

/** Writes observations through the Collection endpoint; serviceId defaults to the sandbox's. */
export async function collect(
  sb: RunningSandbox,
  token: string,
  observations: Record<string, unknown>[],
): Promise<Response> {
  const body = observations.map((o) => ({ serviceId: sb.config.credentials.serviceId, ...o }));
  return fetch(`${sb.url}/api/v1/collections`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

/** RFC 3339 of `msAgo` milliseconds before `nowMs`. */
export function isoAgo(nowMs: number, msAgo: number): string {
  return new Date(nowMs - msAgo).toISOString();
}

export const MINUTE = 60_000;
export const HOUR = 3_600_000;
export const DAY = 86_400_000;
