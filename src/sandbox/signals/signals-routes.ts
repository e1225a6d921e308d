import { type Context, Hono } from 'hono';
import { MAX_BATCH_ITEMS, MIN_BATCH_ITEMS } from '../../signals/identifiers.ts';
import {
  SIGNAL_TYPES,
  SUPPORTING_SIGNAL_TYPES,
  type SupportingSignalType,
} from '../../signals/signal-schemas.ts';
import { parseRfc3339 } from '../../timing/rfc3339.ts';
import type { AccessTokens, VerifiedToken } from '../oauth/access-tokens.ts';
import { OBSERVATIONS_WRITE_SCOPE, SIGNALS_READ_SCOPE } from '../oauth/oauth-clients.ts';
import { mediaType } from '../oauth/oauth-routes.ts';
import type { SandboxClock, SandboxCredentials, SignalThresholds } from '../sandbox-config.ts';
import { signalsErrorResponse as errorResponse } from '../vendor-api-errors.ts';
import { computeActiveCall } from './active-call.ts';
import { computeGeolocation, computeGeovelocity } from './geolocation.ts';
import { computeNewBrowser, MATCH_SCOPES, type MatchScope } from './new-browser.ts';
import { type CollectedObservation, collectionBodySchema } from './observation.ts';
import type { ObservationStore } from './observation-store.ts';
import { ALL_TYPES, computeHistoricalProximity, computeLatestProximity } from './proximity.ts';
import {
  BASELINE_SCOPES,
  type BaselineScope,
  type RatOutcome,
  scoreRemoteAccessTool,
} from './remote-access-tool.ts';
import {
  type PairedRequest,
  parsePairedRequest,
  parseRatRequest,
  parseSingleUnitRequest,
  type Query,
  type RatRequest,
  SignalParamError,
  singleValuedQuery,
} from './signal-request.ts';

export interface SignalsRoutesDeps {
  store: ObservationStore;
  tokens: AccessTokens;
  credentials: SandboxCredentials;
  thresholds: SignalThresholds;
  clock: SandboxClock;
  /** Called with the item count of every batch POST whose body is a JSON array (stats). */
  onBatch?: (items: number) => void;
}

const SUPPORTING: ReadonlySet<string> = new Set(SUPPORTING_SIGNAL_TYPES);
const COOLDOWN = /^\d{1,10}$/;
const DAY_MS = 24 * 3600 * 1000;

/**
 * The Trust Signals API (docs/vendor-api.md#signals) and the Collection endpoint that feeds it.
 *
 * Order of checks on every signal GET (documented in docs/sandbox.md, "How the signals are computed"): 401 (token missing, malformed, bad
 * signature, expired, not yet valid, other scheme, alg none) → 403 insufficient_scope (not a
 * Retrieval token: no `signals:read` or wrong audience) → 400 invalid_request (parameters, in the
 * order of docs/vendor-api.md#signal-endpoints; the message names the parameter) → 403 forbidden
 * (serviceId differs from the token's service_id) → 200.
 */
export function createSignalsRoutes(deps: SignalsRoutesDeps): Hono {
  const { store, tokens, credentials, thresholds, clock } = deps;
  const app = new Hono();

  const isRetrieval = (t: VerifiedToken) =>
    t.scopes.has(SIGNALS_READ_SCOPE) && t.audiences.includes(credentials.signalsAudience);

  /** Runs a signal GET through the check order above; `compute` returns the 200 body. */
  const signalGet =
    <P extends { serviceId: string }>(
      parse: (q: Query, nowMs: number) => P,
      compute: (p: P, q: Query, nowMs: number) => unknown,
    ) =>
    async (c: Context) => {
      const verdict = await tokens.verifyAuthorization(c.req.header('authorization'));
      if (!verdict.ok) return errorResponse(401, 'invalid_token', verdict.message);
      if (!isRetrieval(verdict.token)) {
        return errorResponse(
          403,
          'insufficient_scope',
          `a Retrieval token (scope ${SIGNALS_READ_SCOPE}) is required`,
        );
      }
      const nowMs = clock.now();
      let params: P;
      let body: unknown;
      try {
        const q = singleValuedQuery(c.req.queries());
        params = parse(q, nowMs);
        if (params.serviceId !== verdict.token.claims.service_id) {
          return errorResponse(403, 'forbidden', "serviceId does not match the token's service_id");
        }
        body = compute(params, q, nowMs);
      } catch (err) {
        if (err instanceof SignalParamError) return errorResponse(400, 'invalid_request', err.message);
        throw err;
      }
      return c.json(body);
    };

  const selectSide = (serviceId: string, side: PairedRequest['subject'], window: PairedRequest['window']) =>
    store.select(serviceId, side.accountId, side.filter, window.startMs, window.endMs);

  app.get(
    '/api/v1/signals/geolocation',
    signalGet(parseSingleUnitRequest, (p) => computeGeolocation(selectSide(p.serviceId, p.side, p.window))),
  );
  app.get(
    '/api/v1/signals/geovelocity',
    signalGet(parseSingleUnitRequest, (p) =>
      computeGeovelocity(selectSide(p.serviceId, p.side, p.window), thresholds.geovelocityThresholdKmh),
    ),
  );
  app.get(
    '/api/v1/signals/active-call',
    signalGet(parseSingleUnitRequest, (p) => computeActiveCall(selectSide(p.serviceId, p.side, p.window))),
  );

  const parseProximity = (q: Query, nowMs: number) => ({
    ...parsePairedRequest(q, nowMs),
    types: supportingSignalTypes(q),
  });
  for (const [path, computeProximity] of [
    ['/api/v1/signals/latest-proximity', computeLatestProximity],
    ['/api/v1/signals/historical-proximity', computeHistoricalProximity],
  ] as const) {
    app.get(
      path,
      signalGet(parseProximity, (p) =>
        computeProximity(
          selectSide(p.serviceId, p.subject, p.window),
          selectSide(p.serviceId, p.baseline, p.window),
          p.types,
        ),
      ),
    );
  }

  app.get(
    '/api/v1/signals/new-browser',
    signalGet(
      (q, nowMs) => {
        const p = parsePairedRequest(q, nowMs, true);
        const matchScope = (q.matchScope ?? 'browser_profile') as MatchScope;
        if (!MATCH_SCOPES.includes(matchScope)) {
          throw new SignalParamError('matchScope', 'must be browser_profile or full_fingerprint');
        }
        let cooldownSeconds = 3600;
        if (q.cooldownSeconds !== undefined) {
          if (!COOLDOWN.test(q.cooldownSeconds))
            throw new SignalParamError('cooldownSeconds', 'must be an integer >= 0');
          cooldownSeconds = Number(q.cooldownSeconds);
        }
        return { ...p, matchScope, cooldownSeconds };
      },
      (p, _q, nowMs) =>
        computeNewBrowser({
          subject: selectSide(p.serviceId, p.subject, p.window),
          baseline: p.explicitBaselineAccount ? selectSide(p.serviceId, p.baseline, p.window) : undefined,
          matchScope: p.matchScope,
          cooldownCutoffMs: nowMs - p.cooldownSeconds * 1000,
        }),
    ),
  );

  const scoreRat = (r: RatRequest, scope: BaselineScope, fromMs: number, nowMs: number): RatOutcome => {
    const account = store
      .account(r.serviceId, r.accountId)
      .filter((o) => o.timeMs >= fromMs && o.timeMs <= nowMs);
    return scoreRemoteAccessTool({ account, filter: r.filter, baselineScope: scope, thresholds });
  };

  app.get(
    '/api/v1/signals/remote-access-tool',
    signalGet(
      (q) => {
        const r = parseRatRequest(q);
        const scope = (q.baselineScope ?? 'interaction_anchored') as BaselineScope;
        if (!BASELINE_SCOPES.includes(scope)) {
          throw new SignalParamError('baselineScope', 'must be interaction_anchored or full_history');
        }
        return { ...r, scope };
      },
      (p, _q, nowMs) => {
        // The single endpoint reads every stored session (no lookback): full_history means all of it.
        const outcome = scoreRat(p, p.scope, Number.NEGATIVE_INFINITY, nowMs);
        return {
          signalType: SIGNAL_TYPES.remoteAccessTool,
          success: outcome.success,
          ...(outcome.reason && { reason: outcome.reason }),
          ...(outcome.result && { result: outcome.result }),
          unitId: p.filter.unitId,
          verificationStatus: p.filter.verificationStatus,
          interactionId: p.filter.interactionId,
          ...(outcome.success && outcome.observationTime && { observationTime: outcome.observationTime }),
        };
      },
    ),
  );

  /**
   * Batch: 401 stays top level; a Content-Type other than application/json or a size outside 1..100
   * is a bare 400 (empty body). An item that breaks the single endpoint's parameter rules makes the
   * whole request a 400 naming it (`[3].accountId: ...`), as the single endpoint would. A token that is
   * not a Retrieval token, or an item whose serviceId differs from the token's, gives that item
   * `forbidden`. Items are scored interaction_anchored over the last `ratBatchLookbackDays`.
   */
  app.post('/api/v1/signals/remote-access-tool', async (c) => {
    const verdict = await tokens.verifyAuthorization(c.req.header('authorization'));
    if (!verdict.ok) return errorResponse(401, 'invalid_token', verdict.message);
    if (mediaType(c.req.header('content-type') ?? '') !== 'application/json')
      return new Response(null, { status: 400 });
    let items: unknown;
    try {
      items = JSON.parse(await c.req.text());
    } catch {
      return errorResponse(400, 'invalid_request', 'body: must be a JSON array');
    }
    if (!Array.isArray(items)) return errorResponse(400, 'invalid_request', 'body: must be a JSON array');
    deps.onBatch?.(items.length);
    if (items.length < MIN_BATCH_ITEMS || items.length > MAX_BATCH_ITEMS)
      return new Response(null, { status: 400 });

    const requests: RatRequest[] = [];
    for (let i = 0; i < items.length; i++) {
      const item = items[i] as unknown;
      if (typeof item !== 'object' || item === null || Array.isArray(item)) {
        return errorResponse(400, 'invalid_request', `[${i}]: must be an object`);
      }
      const q: Query = {};
      for (const [k, v] of Object.entries(item)) {
        if (typeof v !== 'string')
          return errorResponse(400, 'invalid_request', `[${i}].${k}: must be a string`);
        q[k] = v;
      }
      try {
        requests.push(parseRatRequest(q));
      } catch (err) {
        if (err instanceof SignalParamError)
          return errorResponse(400, 'invalid_request', `[${i}].${err.message}`);
        throw err;
      }
    }
    const nowMs = clock.now();
    const fromMs = nowMs - thresholds.ratBatchLookbackDays * DAY_MS;
    const retrieval = isRetrieval(verdict.token);
    const results = requests.map((r) => {
      const echo = {
        accountId: r.accountId,
        unitId: r.filter.unitId,
        verificationStatus: r.filter.verificationStatus,
        interactionId: r.filter.interactionId,
      };
      if (!retrieval || r.serviceId !== verdict.token.claims.service_id) {
        return { ...echo, success: false, reason: 'forbidden' };
      }
      let outcome: RatOutcome;
      try {
        outcome = scoreRat(r, 'interaction_anchored', fromMs, nowMs);
      } catch {
        outcome = { success: false, reason: 'internalError' };
      }
      return {
        ...echo,
        success: outcome.success,
        ...(outcome.reason && { reason: outcome.reason }),
        ...(outcome.result && { result: outcome.result }),
        ...(outcome.success && outcome.observationTime && { observationTime: outcome.observationTime }),
      };
    });
    return c.json({ signalType: SIGNAL_TYPES.remoteAccessTool, results });
  });

  /**
   * Collection (docs/vendor-api.md#collections): a JSON array of observations, Collection token (scope
   * observations:write). Answers 200 `{ "accepted": n }`; nothing is stored unless every item is valid.
   */
  app.post('/api/v1/collections', async (c) => {
    const verdict = await tokens.verifyAuthorization(c.req.header('authorization'));
    if (!verdict.ok) return errorResponse(401, 'invalid_token', verdict.message);
    const t = verdict.token;
    if (!t.scopes.has(OBSERVATIONS_WRITE_SCOPE) || !t.audiences.includes(credentials.collectionAudience)) {
      return errorResponse(
        403,
        'insufficient_scope',
        `a Collection token (scope ${OBSERVATIONS_WRITE_SCOPE}) is required`,
      );
    }
    if (mediaType(c.req.header('content-type') ?? '') !== 'application/json') {
      return errorResponse(400, 'invalid_request', 'Content-Type must be application/json');
    }
    let raw: unknown;
    try {
      raw = JSON.parse(await c.req.text());
    } catch {
      return errorResponse(400, 'invalid_request', 'body: must be valid JSON');
    }
    const parsed = collectionBodySchema.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      const path = issue.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('');
      return errorResponse(400, 'invalid_request', `${path.replace(/^\./, '') || 'body'}: ${issue.message}`);
    }
    const nowMs = clock.now();
    const forbidden = parsed.data.findIndex((o) => o.serviceId !== t.claims.service_id);
    if (forbidden !== -1) {
      return errorResponse(
        403,
        'forbidden',
        `[${forbidden}].serviceId does not match the token's service_id`,
      );
    }
    for (const o of parsed.data) store.add(toStored(o, nowMs));
    return c.json({ accepted: parsed.data.length });
  });

  return app;
}

function supportingSignalTypes(q: Query): readonly SupportingSignalType[] {
  const s = q.supportingSignal;
  if (s === undefined) return ALL_TYPES;
  if (!SUPPORTING.has(s))
    throw new SignalParamError('supportingSignal', 'must be one supporting-signal type');
  return [s as SupportingSignalType];
}

function toStored(o: CollectedObservation, nowMs: number) {
  const { observedAt, ...rest } = o;
  return { ...rest, timeMs: (observedAt === undefined ? undefined : parseRfc3339(observedAt)) ?? nowMs };
}
