/**
 * The vendor calls of the two reference servers (bench/floor-server.ts, bench/peer-server.ts): what
 * any implementation of the shipped policy must say to the vendor for a login, written plainly with
 * node:http's neighbour undici and riskgate's own query and signing functions (a reference still
 * has to say the same things to the vendor), and nothing else. Per login: the signals the body's
 * platform allows, with the policy's params; the remote access tool batched as riskgate batches it
 * (issue 32: one item per POST made the FLOOR pay 3.6-3.8 upstream calls per answer against
 * riskgate's 2.7-3.0); the Admin user and devices behind a 2-second cache; and the Admin writes of
 * the actions, each first appended to a local outbox file as riskgate's outbox appends it.
 *
 * Env: the RISKGATE_* vendor variables the bench gives riskgate; RISKGATE_RAT_BATCH_WINDOW_MS (the
 * same window riskgate is given, default riskgate's); REFERENCE_STATE_DIR, where the outbox file
 * goes (default the OS temp dir).
 */
import { openSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { ADMIN_PREFIX, signAdminRequest } from '../src/admin/admin-client.ts';
import type { DecideRequest } from '../src/decide/decide-request.ts';
import { applicability, buildSignalQuery } from '../src/policy/inputs/signal-queries.ts';
import type { PolicySignalName } from '../src/policy/policy-types.ts';
import { DEFAULT_WINDOW_MS } from '../src/signals/rat-batcher.ts';
import { newBrowserQuery, proximityQuery, singleUnitQuery } from '../src/signals/signal-params.ts';
import { createSigningKey } from '../src/vendor-auth/hmac-signature.ts';

const env = process.env;
const signalsUrl = new URL(env.RISKGATE_SIGNALS_URL!);
const adminUrl = new URL(env.RISKGATE_ADMIN_URL!);
const serviceId = env.RISKGATE_SERVICE_ID!;
const agent = new Agent({ connections: 128, keepAliveTimeout: 30_000 });
const signer = {
  serviceId,
  apiKey: createSigningKey(env.RISKGATE_ADMIN_API_KEY!),
  host: adminUrl.host,
  protocol: adminUrl.protocol,
};
const windowMs = Number(env.RISKGATE_RAT_BATCH_WINDOW_MS ?? DEFAULT_WINDOW_MS);
/** The vendor's limit of items per remote-access-tool POST (docs/vendor-api.md#remote-access-tool). */
const MAX_ITEMS = 100;

/** The signals the shipped policy reads and their params (policies/login.yaml). */
export const SIGNALS: readonly PolicySignalName[] = [
  'remoteAccessTool',
  'newBrowser',
  'latestProximity',
  'geovelocity',
  'activeCall',
];
const PARAMS: Partial<Record<PolicySignalName, Record<string, string | number>>> = {
  remoteAccessTool: { baselineScope: 'interaction_anchored' },
  newBrowser: { matchScope: 'browser_profile', cooldownSeconds: 3600 },
};
const signalsPath = `${signalsUrl.pathname.replace(/\/$/, '')}/signals/`;
const prefix = `?serviceId=${serviceId}`;

/** Per-call timeout, ms, when the caller gives one (the FLOOR gives none: a floor waits). */
type Timeout = number | undefined;
const timeouts = (ms: Timeout) => (ms === undefined ? {} : { headersTimeout: ms, bodyTimeout: ms });

let token = '';
/** Fetches the Retrieval token once (the bench's run is shorter than its lifetime). */
export async function fetchToken(): Promise<void> {
  const audience = env.RISKGATE_SIGNALS_AUDIENCE!;
  const scope = audience.startsWith('urn:')
    ? audience
    : `urn:${env.RISKGATE_SIGNALS_IDP}:iam:org:project:id:${audience}:aud`;
  const basic = Buffer.from(`${env.RISKGATE_CLIENT_ID}:${env.RISKGATE_CLIENT_SECRET}`).toString('base64');
  const res = await request(`${env.RISKGATE_AUTH_URL}/oauth/v2/token`, {
    method: 'POST',
    dispatcher: agent,
    headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: `grant_type=client_credentials&scope=${encodeURIComponent(scope)}`,
  });
  token = ((await res.body.json()) as { access_token: string }).access_token;
}

/** The parts of the vendor's signal answers the policy reads. */
export interface SignalAnswer {
  success?: boolean;
  reason?: string;
  result?: {
    anomaly?: boolean;
    anomalyConfidence?: number;
    onCall?: boolean;
    known?: boolean;
    mismatchedFields?: string[];
    proximityConfidence?: number;
    maxSpeedKmh?: number;
  };
}

async function signal(path: string, ms: Timeout): Promise<SignalAnswer> {
  const res = await request(`${signalsUrl.origin}${path}`, {
    dispatcher: agent,
    headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
    ...timeouts(ms),
  });
  if (res.statusCode !== 200) {
    await res.body.text();
    throw new Error(`signal ${res.statusCode}`);
  }
  return (await res.body.json()) as SignalAnswer;
}

/**
 * The remote-access-tool batcher, as src/signals/rat-batcher.ts sends: a batch goes out when it
 * holds 100 items, at the end of the current event-loop turn while no batch is in flight, and
 * after the window otherwise. A failed batch fails each of its lookups.
 */
interface Lookup {
  item: Record<string, string>;
  resolve: (a: SignalAnswer) => void;
  reject: (e: unknown) => void;
}
let open: Lookup[] = [];
let scheduled = false;
let inflight = 0;
function ratLookup(r: DecideRequest, ms: Timeout): Promise<SignalAnswer> {
  return new Promise((resolve, reject) => {
    const item = {
      serviceId,
      accountId: r.accountId,
      unitId: r.unitId!,
      verificationStatus: r.verificationStatus!,
      interactionId: r.interactionId!,
    };
    open.push({ item, resolve, reject });
    if (open.length >= MAX_ITEMS) sendBatch(ms);
    else if (!scheduled) {
      scheduled = true;
      if (inflight === 0) setImmediate(sendBatch, ms);
      else setTimeout(sendBatch, windowMs, ms);
    }
  });
}
function sendBatch(ms: Timeout): void {
  scheduled = false;
  const batch = open;
  open = [];
  if (batch.length === 0) return;
  inflight++;
  request(`${signalsUrl.origin}${signalsPath}remote-access-tool`, {
    method: 'POST',
    dispatcher: agent,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(batch.map((l) => l.item)),
    ...timeouts(ms),
  })
    .then(async (res) => {
      const results = ((await res.body.json()) as { results?: SignalAnswer[] }).results ?? [];
      batch.forEach((l, i) => {
        const answer = results[i];
        if (answer) l.resolve(answer);
        else l.reject(new Error('no result'));
      });
    })
    .catch((error: unknown) => {
      for (const l of batch) l.reject(error);
    })
    .finally(() => {
      inflight--;
    });
}

const adminCache = new Map<string, { at: number; value: Promise<unknown> }>();
/** A signed Admin read behind a 2-second cache (riskgate's `getUserCached`). */
function adminRead(path: string, ms: Timeout): Promise<unknown> {
  const hit = adminCache.get(path);
  if (hit !== undefined && performance.now() - hit.at < 2000) return hit.value;
  const signed = signAdminRequest(signer, new Date().toUTCString(), 'GET', path, undefined, undefined);
  const value = request(`${adminUrl.origin}${signed.path}`, {
    dispatcher: agent,
    headers: signed.headers,
    ...timeouts(ms),
  }).then(async (res) => {
    if (res.statusCode !== 200) {
      await res.body.text();
      throw new Error(`admin ${res.statusCode}`);
    }
    return res.body.json();
  });
  value.catch(() => adminCache.delete(path));
  adminCache.set(path, { at: performance.now(), value });
  return value;
}

/**
 * The local outbox: every action is appended (its spec, one JSON line, the size of riskgate's outbox
 * row) before its Admin call and marked done after it, with a plain `write` each (no fsync, as
 * riskgate's SQLite outbox commits with `synchronous = NORMAL` by default).
 */
const outbox = openSync(
  join(env.REFERENCE_STATE_DIR ?? tmpdir(), `reference-outbox-${process.pid}.ndjson`),
  'a',
);

/**
 * A signed Admin write (riskgate's `updateUser` / `createOneTimeCode`); a changed user drops its
 * cached reads. With `outboxId` (an after-answer action, not the one-time code the answer carries)
 * it goes through the outbox file.
 */
export async function adminWrite(
  method: 'PUT' | 'POST' | 'DELETE',
  path: string,
  body: unknown,
  outboxId?: string,
  ms?: Timeout,
): Promise<unknown> {
  const json = body === undefined ? undefined : JSON.stringify(body);
  if (outboxId !== undefined) {
    writeSync(outbox, `${JSON.stringify({ id: outboxId, method, path, body: json, at: Date.now() })}\n`);
  }
  const signed = signAdminRequest(signer, new Date().toUTCString(), method, path, undefined, json);
  const res = await request(`${adminUrl.origin}${signed.path}`, {
    method,
    dispatcher: agent,
    headers: signed.headers,
    body: json,
    ...timeouts(ms),
  });
  const text = await res.body.text();
  if (outboxId !== undefined) {
    writeSync(outbox, `${JSON.stringify({ id: outboxId, done: res.statusCode, at: Date.now() })}\n`);
  }
  if (method === 'PUT' && res.statusCode !== 304) {
    adminCache.delete(path);
    adminCache.delete(`${path}/devices`);
  }
  return text === '' ? undefined : JSON.parse(text);
}

/** The Admin path of the body's user, or undefined without a userId. */
export function userPath(r: DecideRequest): string | undefined {
  return r.userId === undefined ? undefined : `${ADMIN_PREFIX}/users/${r.userId}`;
}

/** What the vendor answered for one login; a missing entry was not applicable, `null` unavailable. */
export interface Answers {
  signals: Partial<Record<PolicySignalName, SignalAnswer | null>>;
  user?: unknown;
  devices?: unknown;
}

/**
 * Every read of one login, in parallel, each bounded by `timeoutMs(name)` when given. Resolves
 * once every call is back; a failed or timed-out call leaves `null`.
 */
export async function gather(r: DecideRequest, timeoutMs: (name: string) => Timeout): Promise<Answers> {
  const now = Date.now();
  const answers: Answers = { signals: {} };
  const calls: Promise<unknown>[] = [];
  const keep = (name: PolicySignalName, call: Promise<SignalAnswer>) =>
    calls.push(
      call.then(
        (a) => {
          answers.signals[name] = a;
        },
        () => {
          answers.signals[name] = null;
        },
      ),
    );
  for (const name of SIGNALS) {
    if (applicability(name, r) !== 'ok') continue;
    const q = buildSignalQuery(name, r, PARAMS[name]) as never;
    const ms = timeoutMs(name);
    switch (name) {
      case 'remoteAccessTool':
        keep(name, ratLookup(r, ms));
        break;
      case 'newBrowser':
        keep(name, signal(`${signalsPath}new-browser${newBrowserQuery(prefix, q, now)}`, ms));
        break;
      case 'latestProximity':
        keep(name, signal(`${signalsPath}latest-proximity${proximityQuery(prefix, q, now)}`, ms));
        break;
      case 'geovelocity':
        keep(name, signal(`${signalsPath}geovelocity${singleUnitQuery(prefix, q, now)}`, ms));
        break;
      case 'activeCall':
        keep(name, signal(`${signalsPath}active-call${singleUnitQuery(prefix, q, now)}`, ms));
        break;
    }
  }
  const user = userPath(r);
  if (user !== undefined) {
    for (const [key, path] of [
      ['user', user],
      ['devices', `${user}/devices`],
    ] as const) {
      calls.push(
        adminRead(path, timeoutMs(key)).then(
          (v) => {
            answers[key] = v;
          },
          () => {
            answers[key] = null;
          },
        ),
      );
    }
  }
  await Promise.all(calls);
  return answers;
}
