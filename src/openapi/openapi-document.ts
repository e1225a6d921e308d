import { z } from 'zod';
import { auditEntrySchema, auditPageSchema, auditQuerySchema } from '../audit/audit-routes.ts';
import { MAX_CALLBACK_BODY_BYTES } from '../callbacks/jws-signature.ts';
import { decideRequestSchema, MAX_DECIDE_BODY_BYTES } from '../decide/decide-request.ts';
import { decideResponseSchema } from '../decide/decide-response.ts';
import { decisionsQuerySchema } from '../decision-store/decision-routes.ts';
import { ruleReportSchema } from '../decision-store/rule-report-routes.ts';
import { ErrorCode } from '../errors/riskgate-error.ts';
import {
  feedbackRequestSchema,
  feedbackResponseSchema,
  MAX_FEEDBACK_BODY_BYTES,
} from '../feedback/feedback-request.ts';
import {
  addEntrySchema,
  importBodySchema,
  importQuerySchema,
  importResultSchema,
  listEntrySchema,
  listPageSchema,
  listsSchema,
  MAX_ENTRY_BODY_BYTES,
  MAX_IMPORT_BODY_BYTES,
  MAX_IMPORT_ENTRIES,
  pageQuerySchema,
  reasonQuerySchema,
  removeBodySchema,
} from '../lists/list-api.ts';
import { lockoutsQuerySchema, unlockRequestSchema } from '../lockouts/lockout-routes.ts';
import { PROMETHEUS_CONTENT_TYPE } from '../observability/metrics.ts';
import { actionsQuerySchema } from '../outbox/outbox-view.ts';
import {
  MAX_OUTCOME_BODY_BYTES,
  outcomeRequestSchema,
  outcomeResponseSchema,
} from '../outcomes/outcome-request.ts';
import { policyReloadSchema } from '../policy/policy-routes.ts';
import {
  MAX_POLICY_VERSION_BODY_BYTES,
  newPolicyVersionSchema,
  POLICY_VERSION_STEP_ACTIONS,
  policyVersionListQuerySchema,
  policyVersionListSchema,
  policyVersionSchema,
  revertPolicyVersionSchema,
} from '../policy-versions/policy-version-routes.ts';
import { PROBLEM_CONTENT_TYPE, statusOfCode } from '../problem/problem-details.ts';
import {
  createSnoozeSchema,
  endSnoozeBodySchema,
  endSnoozeQuerySchema,
  MAX_SNOOZE_BODY_BYTES,
  snoozeListSchema,
  snoozeQuerySchema,
  snoozeSchema,
} from '../snoozes/snooze-api.ts';
import {
  actionsSchema,
  callbackAckSchema,
  decisionPageSchema,
  healthSchema,
  lockoutSchema,
  lockoutsSchema,
  outboxEntrySchema,
  policiesSchema,
  policyStatusSchema,
  problemSchema,
  readinessSchema,
  ruleStatsSchema,
  storedDecisionSchema,
  timestampSchema,
} from './response-schemas.ts';

/**
 * The OpenAPI 3.1 description of every route riskgate serves, generated from the zod schemas that
 * validate requests and describe answers. Each problem answer is listed under the status its
 * `RG_ERR_*` code maps to (src/problem/problem-details.ts), with the codes it can carry. Served at
 * `GET /openapi.json` and committed as `docs/openapi.json` (`npm run openapi`); tests keep both
 * equal and validate real answers of every route against it.
 */

/** Which of riskgate's audiences a route serves (`x-riskgate-surface`, and a tag of the same name). */
export type RouteSurface = 'caller' | 'probe' | 'operator' | 'vendor';

/**
 * The named schemas as components, in one conversion: a schema used inside another is a `$ref`
 * to its component, not a copy.
 */
function componentSchemas(io: 'input' | 'output', named: Record<string, z.ZodType>): Record<string, object> {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries(named)) registry.add(schema, { id });
  const { schemas } = z.toJSONSchema(registry, {
    target: 'draft-2020-12',
    io,
    unrepresentable: 'any',
    uri: (id) => `#/components/schemas/${id}`,
  });
  return Object.fromEntries(
    Object.entries(schemas).map(([id, { $schema: _, $id: __, ...rest }]) => [id, rest]),
  );
}

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io,
    unrepresentable: 'any',
  });
  return rest;
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: object) => ({ 'application/json': { schema } });

/** The headers some answers come with (components.headers). */
const HEADERS = {
  RetryAfter: {
    description: 'Seconds to wait before trying again.',
    schema: { type: 'integer', minimum: 1 },
  },
  Allow: { description: 'The methods this path takes.', schema: { type: 'string' } },
  WwwAuthenticate: { description: '`Bearer realm="riskgate"`.', schema: { type: 'string' } },
};
const header = (name: keyof typeof HEADERS) => ({ $ref: `#/components/headers/${name}` });

/** The headers some problem codes come with. */
const CODE_HEADERS: Partial<Record<ErrorCode, Record<string, object>>> = {
  [ErrorCode.UNAUTHENTICATED]: { 'WWW-Authenticate': header('WwwAuthenticate') },
  [ErrorCode.METHOD_NOT_ALLOWED]: { Allow: header('Allow') },
  [ErrorCode.OVERLOADED]: { 'Retry-After': header('RetryAfter') },
  [ErrorCode.RATE_LIMITED]: { 'Retry-After': header('RetryAfter') },
  [ErrorCode.DECISION_LOG_UNAVAILABLE]: { 'Retry-After': header('RetryAfter') },
};

type CodeNotes = Partial<Record<ErrorCode, string>>;

/**
 * Problem answers by status: each code's note, keyed by the status it maps to. The body is the
 * Problem schema narrowed to that status and those codes.
 */
function problems(notes: CodeNotes): Record<string, object> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of Object.keys(notes) as ErrorCode[]) {
    const status = statusOfCode(code);
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const responses: Record<string, object> = {};
  for (const [status, codes] of byStatus) {
    const headers = Object.assign({}, ...codes.map((c) => CODE_HEADERS[c] ?? {}));
    responses[String(status)] = {
      description: codes.map((c) => `\`${c}\`: ${notes[c]}`).join('\n\n'),
      ...(Object.keys(headers).length > 0 && { headers }),
      content: {
        [PROBLEM_CONTENT_TYPE]: {
          schema: {
            allOf: [
              ref('Problem'),
              {
                type: 'object',
                properties: { status: { const: status }, code: { enum: codes } },
              },
            ],
          },
        },
      },
    };
  }
  return responses;
}

/**
 * Whatever the route: another method on its path (one with a parameter too),
 * and a bug.
 */
const EVERY_ROUTE: CodeNotes = {
  [ErrorCode.METHOD_NOT_ALLOWED]: 'Another method on this path; `Allow` lists the ones it takes.',
  [ErrorCode.INTERNAL]: 'A bug in riskgate (never bad input): no detail of its own, the service log has it.',
};

const OPERATOR_KEY: CodeNotes = {
  [ErrorCode.UNAUTHENTICATED]: 'Missing or unknown operator key (a caller key never opens it).',
  [ErrorCode.FORBIDDEN]:
    'No operator key is configured (RISKGATE_OPS_KEYS): every request is refused, and the detail says how to configure one. Or the operator’s role is below the route’s (the detail names both), or a trusted proxy named an identity RISKGATE_SSO_OPERATORS does not list.',
  [ErrorCode.NOT_FOUND]:
    'On RISKGATE_PORT while RISKGATE_OPS_PORT is set: the operator routes are on the ops port.',
};

/** A change an operator makes: written to the audit trail first, refused when it cannot be. */
const AUDITED_CHANGE: CodeNotes = {
  [ErrorCode.AUDIT_UNAVAILABLE]:
    'The audit trail (RISKGATE_DATABASE) cannot record the change: it is refused, and not made.',
};

/** Node's HTTP server answers it itself, without a body, and closes the connection. */
const REQUEST_TIMEOUT = {
  '408': {
    description:
      'The request did not arrive whole within RISKGATE_REQUEST_TIMEOUT_MS (its headers within RISKGATE_HEADERS_TIMEOUT_MS); answered by the HTTP server, without a body.',
  },
};

const SURFACES: Record<RouteSurface, string> = {
  caller:
    'Login backends, with a caller key (RISKGATE_API_KEYS); admission control sheds them under overload.',
  probe: 'Liveness and readiness: open on every port, no key.',
  operator:
    'Operators, with an operator key (RISKGATE_OPS_KEYS), never a caller key; on RISKGATE_OPS_PORT when it is set, else on RISKGATE_PORT.',
  vendor:
    'The vendor’s Admin API callbacks, signed (x-jws-signature); served once a callback key is configured.',
};

function operation(surface: RouteSurface, op: Record<string, unknown>, responses: object): object {
  return { tags: [surface], 'x-riskgate-surface': surface, ...op, responses };
}

/** Operator routes are served on RISKGATE_PORT, or on RISKGATE_OPS_PORT when it is set. */
const SERVICE_SERVER = {
  url: 'http://{host}:{port}',
  description: 'RISKGATE_PORT: every route unless RISKGATE_OPS_PORT moves the operator routes.',
  variables: {
    host: { default: 'localhost', description: 'Where riskgate listens (RISKGATE_HOST).' },
    port: { default: '8080', description: 'RISKGATE_PORT.' },
  },
};
const OPS_SERVER = {
  url: 'http://{opsHost}:{opsPort}',
  description: 'RISKGATE_OPS_PORT, when set: the operator routes and the probes, nothing else.',
  variables: {
    opsHost: { default: '127.0.0.1', description: 'RISKGATE_OPS_HOST.' },
    opsPort: { default: '9090', description: 'RISKGATE_OPS_PORT (no default: this is an example).' },
  },
};
const BOTH_PORTS = [SERVICE_SERVER, OPS_SERVER];

/**
 * An operator route, on either port, behind the operator key. `extra` adds problem codes (and may
 * say more about a 404).
 */
function operatorRoute(
  method: 'get' | 'post' | 'delete',
  op: {
    operationId: string;
    summary: string;
    description?: string;
    parameters?: object[];
    requestBody?: object;
  },
  ok: object,
  extra: CodeNotes = {},
  okStatus: '200' | '201' | '202' = '200',
): object {
  return {
    servers: BOTH_PORTS,
    [method]: operation(
      'operator',
      { ...op, security: [{ opsKey: [] }] },
      {
        [okStatus]: ok,
        ...problems({ ...OPERATOR_KEY, ...extra, ...EVERY_ROUTE }),
      },
    ),
  };
}

const OUTBOX_ROUTE: CodeNotes = {
  [ErrorCode.OUTBOX_UNAVAILABLE]:
    'The outbox’s database (RISKGATE_DATABASE) did not answer: down, refused or too slow.',
};
const NO_OUTBOX = 'With RISKGATE_OUTBOX=memory there is no outbox: 404.';

/** `route` with `Retry-After` on its `status` answer of `method` (a route-specific header). */
function withRetryAfter(method: string, status: string, route: object): object {
  const answer = (route as Record<string, { responses: Record<string, { headers?: object }> }>)[method]!
    .responses[status]!;
  answer.headers = { ...answer.headers, 'Retry-After': header('RetryAfter') };
  return route;
}

/** The 404 of a route steering one action: no such action, another method, or no outbox here. */
const unknownAction = (state: string) =>
  `No ${state} action with this id. ${OPERATOR_KEY[ErrorCode.NOT_FOUND]} ${NO_OUTBOX}`;

const actionIdParameter = {
  name: 'id',
  in: 'path',
  required: true,
  description: 'The action’s id (`<decisionId>:<type>:<target>`), URL-encoded.',
  schema: { type: 'string' },
};

const DECISION_STORE_ROUTE: CodeNotes = {
  [ErrorCode.DECISION_STORE_UNAVAILABLE]:
    'The decision store (SQLite, PostgreSQL) did not answer: down, refused or too slow. Decisions go on meanwhile.',
};
const STORE_OFF = 'With RISKGATE_DECISION_STORE=off there is no decision store: 404.';

/** Builds the document; `version` is riskgate's package version. */
export function buildOpenApiDocument(version: string): Record<string, unknown> {
  return {
    openapi: '3.1.0',
    info: {
      title: 'riskgate',
      version,
      summary: 'Real-time login risk decisions: allow, challenge or deny, with reasons.',
      description:
        'Every error riskgate answers itself is RFC 9457 problem+json with a stable `RG_ERR_*` `code`; a path it does not serve is 404 (`RG_ERR_NOT_FOUND`). Operations carry `x-riskgate-surface` (and the tag of the same name): `caller`, `probe`, `operator` or `vendor`.',
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    servers: [SERVICE_SERVER],
    tags: Object.entries(SURFACES).map(([name, description]) => ({ name, description })),
    components: documentComponents(),
    paths: {
      ...callerPaths(),
      ...outcomePaths(),
      ...probePaths(),
      ...operatorPaths(),
      ...listPaths(),
      ...snoozePaths(),
      ...policyVersionPaths(),
      ...lockoutPaths(),
      ...vendorPaths(),
    },
  };
}

/** Security schemes, shared headers and the named schemas the operations refer to. */
function documentComponents(): Record<string, unknown> {
  return {
    securitySchemes: {
      callerKey: { type: 'http', scheme: 'bearer', description: 'A key of RISKGATE_API_KEYS.' },
      opsKey: { type: 'http', scheme: 'bearer', description: 'A key of RISKGATE_OPS_KEYS.' },
      callbackSignature: {
        type: 'apiKey',
        in: 'header',
        name: 'x-jws-signature',
        description:
          'A detached JWS (HS256, the callback signature key) over the raw body, as the Admin API signs its callbacks.',
      },
    },
    headers: HEADERS,
    schemas: {
      ...componentSchemas('input', {
        DecideRequest: decideRequestSchema,
        FeedbackRequest: feedbackRequestSchema,
        AddListEntry: addEntrySchema,
        ListImport: importBodySchema,
        RemoveListEntry: removeBodySchema,
        UnlockRequest: unlockRequestSchema,
        CreateSnooze: createSnoozeSchema,
        NewPolicyVersion: newPolicyVersionSchema,
        RevertPolicyVersion: revertPolicyVersionSchema,
        EndSnooze: endSnoozeBodySchema,
      }),
      ...componentSchemas('output', {
        DecideResponse: decideResponseSchema,
        FeedbackResponse: feedbackResponseSchema,
        OutcomeRequest: outcomeRequestSchema,
        OutcomeResponse: outcomeResponseSchema,
        Problem: problemSchema,
        Health: healthSchema,
        Readiness: readinessSchema,
        Policies: policiesSchema,
        PolicyVersion: policyVersionSchema,
        PolicyVersions: policyVersionListSchema,
        PolicyStatus: policyStatusSchema,
        RuleStats: ruleStatsSchema,
        RuleReport: ruleReportSchema,
        Actions: actionsSchema,
        OutboxEntry: outboxEntrySchema,
        AuditPage: auditPageSchema,
        AuditEntry: auditEntrySchema,
        PolicyReload: policyReloadSchema,
        Lockouts: lockoutsSchema,
        Lockout: lockoutSchema,
        CallbackAck: callbackAckSchema,
        DecisionPage: decisionPageSchema,
        StoredDecision: storedDecisionSchema,
        Timestamp: timestampSchema,
        Lists: listsSchema,
        ListPage: listPageSchema,
        ListEntry: listEntrySchema,
        ListImportResult: importResultSchema,
        Snooze: snoozeSchema,
        Snoozes: snoozeListSchema,
      }),
    },
  };
}

/** The caller surface: /decide and /feedback. */
function callerPaths(): Record<string, unknown> {
  return {
    '/decide': {
      post: operation(
        'caller',
        {
          operationId: 'decide',
          summary: 'Decide on one login attempt',
          security: [{ callerKey: [] }],
          requestBody: {
            required: true,
            description: `JSON, at most ${MAX_DECIDE_BODY_BYTES} bytes.`,
            content: json(ref('DecideRequest')),
          },
        },
        {
          '200': {
            description:
              'The decision. Upstream failures never fail it: they mark it `degraded`. Under overload, a policy with an `overload` verdict answers it here (`reason: overloaded`).',
            headers: {
              'Server-Timing': {
                description:
                  'total, each upstream call, policy evaluation and queue, in milliseconds (absent on an overload verdict).',
                schema: { type: 'string' },
              },
            },
            content: json(ref('DecideResponse')),
          },
          ...problems({
            [ErrorCode.INVALID_INPUT]:
              'Invalid JSON, a field breaking its rule (`field` names it), or userId/deviceId naming Admin records of another account.',
            [ErrorCode.UNAUTHENTICATED]: 'Missing or unknown caller key.',
            [ErrorCode.PAYLOAD_TOO_LARGE]: `Body over ${MAX_DECIDE_BODY_BYTES} bytes.`,
            [ErrorCode.UNSUPPORTED_MEDIA_TYPE]: 'Content type other than application/json.',
            [ErrorCode.OVERLOADED]:
              'Shed by admission control (RISKGATE_MAX_IN_FLIGHT, RISKGATE_MAX_EVENT_LOOP_DELAY_MS), before any work; `Retry-After` says when to try again.',
            [ErrorCode.DECISION_LOG_UNAVAILABLE]:
              'The decision log is failing and RISKGATE_DECISION_LOG_ON_FAILURE=refuse: no decision goes unaudited.',
            ...EVERY_ROUTE,
          }),
          ...REQUEST_TIMEOUT,
        },
      ),
    },
    '/feedback': {
      post: operation(
        'caller',
        {
          operationId: 'feedback',
          summary: 'Label a decision fraud or legit (for replay --labels)',
          description:
            'With the caller key that asked for the decision, or an operator key with the analyst role (which labels any decision, recorded in the audit trail first).',
          security: [{ callerKey: [] }, { opsKey: [] }],
          requestBody: {
            required: true,
            description: `JSON, at most ${MAX_FEEDBACK_BODY_BYTES} bytes.`,
            content: json(ref('FeedbackRequest')),
          },
        },
        {
          '202': {
            description:
              'Recorded in the decision log as a `feedback` line, with the id of the key that sent it.',
            content: json(ref('FeedbackResponse')),
          },
          ...problems({
            [ErrorCode.INVALID_INPUT]:
              'Invalid JSON, a decisionId that is not a UUID, or a label other than fraud or legit; `field` names it.',
            [ErrorCode.UNAUTHENTICATED]: 'Missing or unknown key (a caller key, or an operator key).',
            [ErrorCode.FORBIDDEN]: 'An operator whose role is below analyst (the detail names both roles).',
            ...AUDITED_CHANGE,
            [ErrorCode.NOT_FOUND]:
              'No decision with this id made with this caller key that this riskgate remembers (an operator key labels any).',
            [ErrorCode.PAYLOAD_TOO_LARGE]: `Body over ${MAX_FEEDBACK_BODY_BYTES} bytes.`,
            [ErrorCode.UNSUPPORTED_MEDIA_TYPE]: 'Content type other than application/json.',
            [ErrorCode.RATE_LIMITED]:
              'This key sends feedback past its rate (RISKGATE_FEEDBACK_RATE, RISKGATE_FEEDBACK_BURST).',
            [ErrorCode.OVERLOADED]: 'Shed by admission control, like a decision.',
            [ErrorCode.DECISION_LOG_UNAVAILABLE]:
              'RISKGATE_DECISION_LOG is off (the label would be lost), or failing with RISKGATE_DECISION_LOG_ON_FAILURE=refuse.',
            [ErrorCode.FEEDBACK_UNAVAILABLE]:
              'With RISKGATE_WORKERS > 1: the primary, which keeps the recent decisions, did not answer in time.',
            ...EVERY_ROUTE,
          }),
          ...REQUEST_TIMEOUT,
        },
      ),
    },
  };
}

/** The caller surface's report of what became of a login: POST /decisions/{decisionId}/outcome. */
function outcomePaths(): Record<string, unknown> {
  return {
    '/decisions/{decisionId}/outcome': {
      post: operation(
        'caller',
        {
          operationId: 'reportOutcome',
          summary: 'Report what became of a login: the step-up result or a later account event',
          description:
            'With the caller key that asked for the decision, or an operator key with the analyst role (for a decision in the decision store, recorded in the audit trail first). Kept with the decision; a failed step-up after a challenge and a user-reported fraud point to fraud, a passed step-up after a challenge to legit, below any analyst label (README, "Outcomes from the login backend"). Answered once the decision store has it: the rule report counts it at once.',
          security: [{ callerKey: [] }, { opsKey: [] }],
          parameters: [
            {
              name: 'decisionId',
              in: 'path',
              required: true,
              description: 'The `decisionId` of a /decide answer (a UUID).',
              schema: { type: 'string', format: 'uuid' },
            },
          ],
          requestBody: {
            required: true,
            description: `JSON, at most ${MAX_OUTCOME_BODY_BYTES} bytes.`,
            content: json(ref('OutcomeRequest')),
          },
        },
        {
          '202': {
            description:
              'Recorded in the decision log as an `outcome` line and in the decision store; the same outcome again is kept once.',
            content: json(ref('OutcomeResponse')),
          },
          ...problems({
            [ErrorCode.INVALID_INPUT]:
              'Invalid JSON, a decisionId that is not a UUID, an unknown type, result or event, or an `at` that is not RFC 3339; `field` names it.',
            [ErrorCode.UNAUTHENTICATED]: 'Missing or unknown key (a caller key, or an operator key).',
            [ErrorCode.FORBIDDEN]: 'An operator whose role is below analyst (the detail names both roles).',
            ...AUDITED_CHANGE,
            [ErrorCode.NOT_FOUND]:
              'No decision with this id made with this caller key that this riskgate remembers (an operator key: none in the decision store).',
            [ErrorCode.PAYLOAD_TOO_LARGE]: `Body over ${MAX_OUTCOME_BODY_BYTES} bytes.`,
            [ErrorCode.UNSUPPORTED_MEDIA_TYPE]: 'Content type other than application/json.',
            [ErrorCode.RATE_LIMITED]:
              'This key reports past its rate (RISKGATE_FEEDBACK_RATE, RISKGATE_FEEDBACK_BURST, a bucket of its own).',
            [ErrorCode.OVERLOADED]: 'Shed by admission control, like a decision.',
            [ErrorCode.DECISION_LOG_UNAVAILABLE]:
              'RISKGATE_DECISION_LOG is off (the outcome would be lost), or failing with RISKGATE_DECISION_LOG_ON_FAILURE=refuse.',
            [ErrorCode.FEEDBACK_UNAVAILABLE]:
              'With RISKGATE_WORKERS > 1: the primary, which keeps the recent decisions, did not answer in time.',
            ...EVERY_ROUTE,
          }),
          ...REQUEST_TIMEOUT,
        },
      ),
    },
  };
}

/** The probes, open on every surface: /healthz and /readyz. */
function probePaths(): Record<string, unknown> {
  return {
    '/healthz': {
      servers: BOTH_PORTS,
      get: operation(
        'probe',
        {
          operationId: 'health',
          summary: 'Liveness: the process answers',
          description:
            'Always 200 while the process runs; the vendor token, open circuit breakers and the decision log are details, never a reason to restart.',
          security: [],
        },
        { '200': { description: 'Alive.', content: json(ref('Health')) }, ...problems(EVERY_ROUTE) },
      ),
    },
    '/readyz': {
      servers: BOTH_PORTS,
      get: operation(
        'probe',
        {
          operationId: 'readiness',
          summary: 'Readiness: this process can answer /decide as well as any replica',
          description:
            'Ready once a policy is loaded and the inputs it reads are warm (the token held, the event history within its lag, the lists loaded); `inputs` says which one holds it back and why. The vendor failing is never a reason: every replica shares it, and failing them all would turn a degraded service into none.',
          security: [],
        },
        {
          '200': {
            description: 'Ready: a policy is loaded and the inputs it reads are warm.',
            content: json(ref('Readiness')),
          },
          '503': {
            description:
              'Not ready: an input the policy reads not warm yet after the start, or behind for longer than RISKGATE_READY_GRACE_MS (`checks.<input>` false, `inputs.<input>` says why), shutting down (`checks.draining`), or the decision log failing with RISKGATE_DECISION_LOG_ON_FAILURE=refuse (`checks.decisionLog`). The body is the readiness report, not a problem.',
            content: json(ref('Readiness')),
          },
          ...problems(EVERY_ROUTE),
        },
      ),
    },
  };
}

/** The operator endpoints: metrics, policies, the API document, the outbox. */
function operatorPaths(): Record<string, unknown> {
  return {
    '/metrics': operatorRoute(
      'get',
      { operationId: 'metrics', summary: 'Prometheus metrics' },
      {
        description: 'Prometheus text exposition (every worker’s, gathered, with RISKGATE_WORKERS above 1).',
        content: { [PROMETHEUS_CONTENT_TYPE]: { schema: { type: 'string' } } },
      },
    ),
    '/policies': operatorRoute(
      'get',
      { operationId: 'policies', summary: 'The active policy (and the shadow one)' },
      {
        description:
          'Name, revision, when loaded, its files, reload counts, warnings, the last refused edit.',
        content: json(ref('Policies')),
      },
    ),
    '/policies/reload': operatorRoute(
      'post',
      {
        operationId: 'reloadPolicy',
        summary: 'Load the policy files now (the admin role; audited)',
        description:
          'The watcher reloads on its own; this is for a change it cannot see. Recorded in the audit trail before the reload.',
      },
      {
        description:
          'The outcome: the new revision, or why the files were refused (the last good policy stays live).',
        content: json(ref('PolicyReload')),
      },
      AUDITED_CHANGE,
    ),
    '/audit': operatorRoute(
      'get',
      {
        operationId: 'listAudit',
        summary: 'The audit trail: every change operators made, newest first',
        description:
          'Who (name, role, key id or `sso`), what, to what, when and from where; filtered by actor, action or target, paged with `cursor`.',
        parameters: queryParameters(auditQuerySchema),
      },
      { description: 'A page of entries, newest first.', content: json(ref('AuditPage')) },
      {
        [ErrorCode.INVALID_INPUT]: 'A query parameter breaking its rule; `field` names it.',
        [ErrorCode.AUDIT_UNAVAILABLE]: 'The audit trail’s database did not answer.',
      },
    ),
    '/policies/stats': operatorRoute(
      'get',
      { operationId: 'policyStats', summary: 'Rule hit counts on live traffic, per revision' },
      {
        description: 'Since start, the last few revisions of the active and the shadow policy.',
        content: json(ref('RuleStats')),
      },
    ),
    '/rules/report': operatorRoute(
      'get',
      {
        operationId: 'ruleReport',
        summary: 'Each rule’s quality on live traffic, from the decision store',
        description:
          'For the active and the shadow revision: decisions and each rule’s fires over 1 h, 24 h and 7 d, an hourly series, precision and recall against the current labels, the rules that never fired, and the active × shadow verdict agreement.',
      },
      { description: 'The report, its windows ending at `generatedAt`.', content: json(ref('RuleReport')) },
      {
        [ErrorCode.DECISION_STORE_UNAVAILABLE]:
          'The decision store’s database (RISKGATE_DATABASE) did not answer: down, refused or too slow.',
      },
    ),
    '/openapi.json': operatorRoute(
      'get',
      { operationId: 'openapi', summary: 'This document' },
      {
        description: 'The OpenAPI 3.1 document (also committed as docs/openapi.json).',
        content: json({ type: 'object', required: ['openapi', 'info', 'paths'] }),
      },
    ),
    ...actionPaths(),
    ...decisionPaths(),
  };
}

/** The outbox's operator endpoints. */
function actionPaths(): Record<string, unknown> {
  return {
    '/actions': operatorRoute(
      'get',
      {
        operationId: 'listActions',
        summary: 'The outbox: counts and the newest actions',
        description: NO_OUTBOX,
        parameters: queryParameters(actionsQuerySchema),
      },
      {
        description: 'Pending and dead counts, the oldest pending age, the newest entries.',
        content: json(ref('Actions')),
      },
      {
        [ErrorCode.INVALID_INPUT]: 'A query parameter breaking its rule; `field` names it.',
        ...OUTBOX_ROUTE,
        [ErrorCode.NOT_FOUND]: `${OPERATOR_KEY[ErrorCode.NOT_FOUND]} ${NO_OUTBOX}`,
      },
    ),
    '/actions/{id}/retry': operatorRoute(
      'post',
      {
        operationId: 'retryAction',
        summary: 'Deliver a dead (or dropped) action again, now (the admin role; audited)',
        description: NO_OUTBOX,
        parameters: [actionIdParameter],
      },
      { description: 'The action, pending again.', content: json(ref('OutboxEntry')) },
      { ...OUTBOX_ROUTE, ...AUDITED_CHANGE, [ErrorCode.NOT_FOUND]: unknownAction('dead or dropped') },
    ),
    '/actions/{id}': operatorRoute(
      'delete',
      {
        operationId: 'dropAction',
        summary: 'Drop a pending or dead action: it is never delivered (the admin role; audited)',
        description: `Its final \`action\` line goes to the decision log. ${NO_OUTBOX}`,
        parameters: [actionIdParameter],
      },
      { description: 'The action, dropped.', content: json(ref('OutboxEntry')) },
      { ...OUTBOX_ROUTE, ...AUDITED_CHANGE, [ErrorCode.NOT_FOUND]: unknownAction('pending or dead') },
    ),
  };
}

/** The decision store's operator endpoints. */
function decisionPaths(): Record<string, unknown> {
  return {
    '/decisions': operatorRoute(
      'get',
      {
        operationId: 'listDecisions',
        summary: 'Decisions from the decision store, filtered, newest first',
        description: `Paged by cursor: each page's \`nextCursor\` gives the older ones. ${STORE_OFF}`,
        parameters: queryParameters(decisionsQuerySchema),
      },
      {
        description: 'A page of decisions (and counts by verdict with `counts=true`).',
        content: json(ref('DecisionPage')),
      },
      {
        [ErrorCode.INVALID_INPUT]: 'A query parameter breaking its rule (or unknown); `field` names it.',
        ...DECISION_STORE_ROUTE,
        [ErrorCode.NOT_FOUND]: `${OPERATOR_KEY[ErrorCode.NOT_FOUND]} ${STORE_OFF}`,
      },
    ),
    '/decisions/{decisionId}': operatorRoute(
      'get',
      {
        operationId: 'getDecision',
        summary: 'One decision whole: its logged line, labels and actions',
        parameters: [
          {
            name: 'decisionId',
            in: 'path',
            required: true,
            description: 'The decision’s id.',
            schema: { type: 'string' },
          },
        ],
      },
      { description: 'The decision.', content: json(ref('StoredDecision')) },
      {
        ...DECISION_STORE_ROUTE,
        [ErrorCode.NOT_FOUND]: `No such decision in the store (never made, past retention, not written yet). ${OPERATOR_KEY[ErrorCode.NOT_FOUND]} ${STORE_OFF}`,
      },
    ),
  };
}

const LIST_ROUTE: CodeNotes = {
  [ErrorCode.NOT_FOUND]: `No list of this name in the active policy (its \`lists\`). ${OPERATOR_KEY[ErrorCode.NOT_FOUND]}`,
  [ErrorCode.DATABASE_UNAVAILABLE]:
    'The lists database (RISKGATE_DATABASE) did not answer: down, refused or too slow.',
};
const LIST_CHANGE: CodeNotes = {
  ...LIST_ROUTE,
  ...AUDITED_CHANGE,
  [ErrorCode.INVALID_INPUT]:
    'A value not of the list’s kind (an `ip` list takes an address or CIDR), a missing reason, a ttl out of range; `field` names it.',
  [ErrorCode.UNSUPPORTED_MEDIA_TYPE]: 'A body that is not JSON.',
};
const listNameParameter = {
  name: 'name',
  in: 'path',
  required: true,
  description: 'A list the active policy declares (`lists.<name>`).',
  schema: { type: 'string' },
};
const LIST_CHANGE_NOTE =
  'An admin’s. Written to the audit trail before it is made (refused, 503, when it cannot be), then to the database, then told as an event; every replica’s decisions see it within 2 s.';

/** The runtime lists (src/lists/list-routes.ts). */
function listPaths(): Record<string, unknown> {
  return {
    '/lists': operatorRoute(
      'get',
      {
        operationId: 'listLists',
        summary: 'The runtime lists the active policy declares, with their counts',
      },
      {
        description: 'Each list and its unexpired entries; how current this process’s snapshot is.',
        content: json(ref('Lists')),
      },
      { [ErrorCode.DATABASE_UNAVAILABLE]: LIST_ROUTE[ErrorCode.DATABASE_UNAVAILABLE]! },
    ),
    '/lists/{name}': operatorRoute(
      'get',
      {
        operationId: 'listEntries',
        summary: 'One list’s unexpired entries, by value, a page at a time',
        parameters: [listNameParameter, ...queryParameters(pageQuerySchema)],
      },
      { description: 'The list and a page of its entries.', content: json(ref('ListPage')) },
      { ...LIST_ROUTE, [ErrorCode.INVALID_INPUT]: 'A query parameter breaking its rule; `field` names it.' },
    ),
    '/lists/{name}/entries': operatorRoute(
      'post',
      {
        operationId: 'addListEntry',
        summary: 'Add an entry (or replace one: its author, reason and expiry)',
        description: LIST_CHANGE_NOTE,
        parameters: [listNameParameter],
        requestBody: {
          required: true,
          description: `JSON, at most ${MAX_ENTRY_BODY_BYTES} bytes.`,
          content: json(ref('AddListEntry')),
        },
      },
      { description: 'The entry as kept (an `ip` entry as its network).', content: json(ref('ListEntry')) },
      { ...LIST_CHANGE, [ErrorCode.PAYLOAD_TOO_LARGE]: `Body over ${MAX_ENTRY_BODY_BYTES} bytes.` },
      '201',
    ),
    '/lists/{name}/entries/{value}': operatorRoute(
      'delete',
      {
        operationId: 'removeListEntry',
        summary: 'Remove an entry, with a reason',
        description: `${LIST_CHANGE_NOTE} The reason comes as the \`reason\` query parameter or a JSON body.`,
        parameters: [
          listNameParameter,
          {
            name: 'value',
            in: 'path',
            required: true,
            description: 'The entry (a CIDR’s `/` URL-encoded as `%2F`).',
            schema: { type: 'string' },
          },
          ...queryParameters(reasonQuerySchema),
        ],
        requestBody: { required: false, content: json(ref('RemoveListEntry')) },
      },
      { description: 'The entry removed.', content: json(ref('ListEntry')) },
      {
        ...LIST_CHANGE,
        [ErrorCode.NOT_FOUND]: `No such list, or no unexpired entry of this value in it. ${OPERATOR_KEY[ErrorCode.NOT_FOUND]}`,
        [ErrorCode.PAYLOAD_TOO_LARGE]: `Body over ${MAX_ENTRY_BODY_BYTES} bytes.`,
      },
    ),
    '/lists/{name}/import': operatorRoute(
      'post',
      {
        operationId: 'importListEntries',
        summary: 'Add many entries at once',
        description: `${LIST_CHANGE_NOTE} One audit entry for the import, one event per entry. A JSON array, or JSON lines (\`application/x-ndjson\`), of at most ${MAX_IMPORT_ENTRIES} entries; an entry without a reason or ttl takes the query's.`,
        parameters: [listNameParameter, ...queryParameters(importQuerySchema)],
        requestBody: {
          required: true,
          description: `At most ${MAX_IMPORT_BODY_BYTES} bytes.`,
          content: {
            ...json(ref('ListImport')),
            'application/x-ndjson': { schema: { type: 'string', description: 'One entry object per line.' } },
          },
        },
      },
      { description: 'How many entries were added.', content: json(ref('ListImportResult')) },
      { ...LIST_CHANGE, [ErrorCode.PAYLOAD_TOO_LARGE]: `Body over ${MAX_IMPORT_BODY_BYTES} bytes.` },
      '201',
    ),
  };
}

const VERSIONS_DATABASE: CodeNotes = {
  [ErrorCode.DATABASE_UNAVAILABLE]:
    'The policy versions database (RISKGATE_DATABASE) did not answer: down, refused or too slow.',
};
const VERSION_STEP_NOTE =
  'An admin’s. Written to the audit trail before it is made (refused, 503, when it cannot be). A version’s content never changes (PUT, PATCH and DELETE answer 405); its state moves draft → proposed → approved → active (or rejected, withdrawn), docs/policy-versions.md.';
const versionIdParameter = {
  name: 'id',
  in: 'path',
  required: true,
  description: 'The version’s id.',
  schema: { type: 'string' },
};

/** Policy versions (src/policy-versions/policy-version-routes.ts). */
function policyVersionPaths(): Record<string, unknown> {
  const steps = Object.fromEntries(
    Object.keys(POLICY_VERSION_STEP_ACTIONS).map((step) => [
      `/policy-versions/{id}/${step}`,
      operatorRoute(
        'post',
        {
          operationId: `${step}PolicyVersion`,
          summary: `${step[0]!.toUpperCase()}${step.slice(1)} a policy version`,
          description: `${VERSION_STEP_NOTE}${step === 'approve' ? ' The author cannot approve their own version (four eyes).' : ''}${step === 'activate' ? ' Every replica serves it within about RISKGATE_POLICY_VERSION_POLL_MS.' : ''}`,
          parameters: [versionIdParameter],
        },
        { description: 'The version after the step.', content: json(ref('PolicyVersion')) },
        {
          ...VERSIONS_DATABASE,
          ...AUDITED_CHANGE,
          [ErrorCode.NOT_FOUND]: 'No such version.',
          [ErrorCode.POLICY_VERSION_CONFLICT]: 'The version is not in a state this step starts from.',
          ...(step === 'approve' && {
            [ErrorCode.POLICY_SELF_APPROVAL]: 'The approving admin is the version’s author.',
          }),
        },
      ),
    ]),
  );
  return {
    '/policy-versions': {
      ...operatorRoute(
        'get',
        {
          operationId: 'listPolicyVersions',
          summary: 'The policy versions, newest first',
          parameters: queryParameters(policyVersionListQuerySchema),
        },
        { description: 'A page of versions (without their YAML).', content: json(ref('PolicyVersions')) },
        {
          ...VERSIONS_DATABASE,
          [ErrorCode.INVALID_INPUT]: 'A query parameter breaking its rule; `field` names it.',
        },
      ),
      ...operatorRoute(
        'post',
        {
          operationId: 'createPolicyVersion',
          summary: 'Make a draft from a policy YAML (it must compile)',
          description: VERSION_STEP_NOTE,
          requestBody: {
            required: true,
            description: `JSON, the YAML at most ${MAX_POLICY_VERSION_BODY_BYTES} bytes.`,
            content: json(ref('NewPolicyVersion')),
          },
        },
        { description: 'The draft as kept.', content: json(ref('PolicyVersion')) },
        {
          ...VERSIONS_DATABASE,
          ...AUDITED_CHANGE,
          [ErrorCode.INVALID_INPUT]:
            'A policy that does not compile (`field`: yaml, the detail says where and why), or a missing message.',
          [ErrorCode.UNSUPPORTED_MEDIA_TYPE]: 'A body that is not JSON.',
          [ErrorCode.PAYLOAD_TOO_LARGE]: 'Body too large.',
        },
        '201',
      ),
    },
    '/policy-versions/{id}': operatorRoute(
      'get',
      {
        operationId: 'getPolicyVersion',
        summary: 'One policy version, with its YAML',
        parameters: [versionIdParameter],
      },
      { description: 'The version.', content: json(ref('PolicyVersion')) },
      { ...VERSIONS_DATABASE, [ErrorCode.NOT_FOUND]: 'No such version.' },
    ),
    ...steps,
    '/policy-versions/{id}/revert': operatorRoute(
      'post',
      {
        operationId: 'revertPolicyVersion',
        summary: 'Make a new version carrying an earlier one’s YAML (history is never rewritten)',
        description: VERSION_STEP_NOTE,
        parameters: [versionIdParameter],
        requestBody: { required: true, content: json(ref('RevertPolicyVersion')) },
      },
      { description: 'The new version.', content: json(ref('PolicyVersion')) },
      {
        ...VERSIONS_DATABASE,
        ...AUDITED_CHANGE,
        [ErrorCode.NOT_FOUND]: 'No such version.',
        [ErrorCode.POLICY_VERSION_CONFLICT]: 'The version cannot be restored from its state.',
        [ErrorCode.INVALID_INPUT]: 'A missing message; `field` names it.',
        [ErrorCode.UNSUPPORTED_MEDIA_TYPE]: 'A body that is not JSON.',
      },
      '201',
    ),
  };
}

const SNOOZE_DATABASE: CodeNotes = {
  [ErrorCode.DATABASE_UNAVAILABLE]:
    'The snoozes database (RISKGATE_DATABASE) did not answer: down, refused or too slow.',
};
const SNOOZE_CHANGE_NOTE =
  'An analyst’s. Written to the audit trail before it is made (refused, 503, when it cannot be), then to the database; every replica’s decisions see it within 2 s.';

/** Rule snoozes (src/snoozes/snooze-routes.ts). */
function snoozePaths(): Record<string, unknown> {
  return {
    '/snoozes': {
      ...operatorRoute(
        'get',
        {
          operationId: 'listSnoozes',
          summary: 'Active rule snoozes, by rule or by entity, the ones ending soonest first',
          parameters: queryParameters(snoozeQuerySchema),
        },
        {
          description: 'The active snoozes; how current this process’s snapshot is.',
          content: json(ref('Snoozes')),
        },
        {
          ...SNOOZE_DATABASE,
          [ErrorCode.INVALID_INPUT]: 'A query parameter breaking its rule; `field` names it.',
        },
      ),
      ...operatorRoute(
        'post',
        {
          operationId: 'createSnooze',
          summary: 'Snooze one rule for one account, user, unit or IP/CIDR until a time',
          description: `${SNOOZE_CHANGE_NOTE} Decisions then treat the rule as not matched for that entity, and say so in \`explanation.snoozed\`.`,
          requestBody: {
            required: true,
            description: `JSON, at most ${MAX_SNOOZE_BODY_BYTES} bytes.`,
            content: json(ref('CreateSnooze')),
          },
        },
        { description: 'The snooze as kept (an `ip` snooze as its network).', content: json(ref('Snooze')) },
        {
          ...SNOOZE_DATABASE,
          ...AUDITED_CHANGE,
          [ErrorCode.INVALID_INPUT]:
            'A rule the active policy does not have, a value not of its entity, an `until` past or beyond RISKGATE_MAX_SNOOZE_DAYS, a missing reason; `field` names it.',
          [ErrorCode.UNSUPPORTED_MEDIA_TYPE]: 'A body that is not JSON.',
          [ErrorCode.PAYLOAD_TOO_LARGE]: `Body over ${MAX_SNOOZE_BODY_BYTES} bytes.`,
        },
        '201',
      ),
    },
    '/snoozes/{id}': operatorRoute(
      'delete',
      {
        operationId: 'endSnooze',
        summary: 'End a snooze early, with a reason (the rule is back for its entity)',
        description: `${SNOOZE_CHANGE_NOTE} The reason comes as the \`reason\` query parameter or a JSON body; the snooze stays, ended, for the record.`,
        parameters: [
          {
            name: 'id',
            in: 'path',
            required: true,
            description: 'The snooze’s id.',
            schema: { type: 'string' },
          },
          ...queryParameters(endSnoozeQuerySchema),
        ],
        requestBody: { required: false, content: json(ref('EndSnooze')) },
      },
      { description: 'The snooze, ended.', content: json(ref('Snooze')) },
      {
        ...SNOOZE_DATABASE,
        ...AUDITED_CHANGE,
        [ErrorCode.NOT_FOUND]: `No active snooze of this id. ${OPERATOR_KEY[ErrorCode.NOT_FOUND]}`,
        [ErrorCode.INVALID_INPUT]: 'A missing or empty reason; `field` names it.',
        [ErrorCode.PAYLOAD_TOO_LARGE]: `Body over ${MAX_SNOOZE_BODY_BYTES} bytes.`,
      },
    ),
  };
}

const DATABASE_ROUTE: CodeNotes = {
  [ErrorCode.DATABASE_UNAVAILABLE]:
    'The database (RISKGATE_DATABASE) did not answer: down, refused or too slow.',
};

const lockoutIdParameter = {
  name: 'id',
  in: 'path',
  required: true,
  description: 'The lock-out’s id (its decision’s).',
  schema: { type: 'string' },
};

/** The operator surface's lock-out records and their undo (src/lockouts/). */
function lockoutPaths(): Record<string, unknown> {
  return {
    '/lockouts': operatorRoute(
      'get',
      {
        operationId: 'listLockouts',
        summary: 'The lock-outs riskgate drove or withheld, newest first',
        parameters: queryParameters(lockoutsQuerySchema),
      },
      { description: 'A page of lock-outs.', content: json(ref('Lockouts')) },
      {
        [ErrorCode.INVALID_INPUT]: 'A query parameter breaking its rule; `field` names it.',
        ...DATABASE_ROUTE,
      },
    ),
    '/lockouts/{id}': operatorRoute(
      'get',
      { operationId: 'getLockout', summary: 'One lock-out', parameters: [lockoutIdParameter] },
      { description: 'The lock-out.', content: json(ref('Lockout')) },
      {
        [ErrorCode.NOT_FOUND]: `No lock-out with this id. ${OPERATOR_KEY[ErrorCode.NOT_FOUND]}`,
        ...DATABASE_ROUTE,
      },
    ),
    '/lockouts/{id}/unlock': withRetryAfter(
      'post',
      '503',
      operatorRoute(
        'post',
        {
          operationId: 'unlockLockout',
          summary: 'Unlock the user of a lock-out (Admin API status enabled, through the outbox)',
          description:
            'Written to the audit trail first (refused when it cannot be), then, in one database transaction, queued in the outbox (durable, retried over its horizon) and recorded: this lock-out and the user’s others still in force become `unlocked`, and `lockout.ended` is queued (emitted once that transaction committed). The Admin API call is the outbox’s, after the answer: 202, `unlockStatus` `queued` (later `done`, or `failed` once dead-lettered), and the audit entry’s outcome reads `queued`. A lock-out that had ended (unlocked by another admin, its end come), before or during the unlock, is refused 409, nothing done, the audit outcome `refused`. An outbox that did not take the unlock durably in time is a 503 with `Retry-After`, nothing done, the audit outcome `failed`: an unlock held in this process only (the database did not answer in time) is withdrawn, so if its write lands later it changes nothing.',
          parameters: [lockoutIdParameter],
          requestBody: {
            required: true,
            description: 'JSON, at most 4096 bytes.',
            content: json(ref('UnlockRequest')),
          },
        },
        {
          description:
            'Queued: the lock-out, `unlocked`, with `unlockStatus` `queued` (the Admin API call follows through the outbox; `GET /lockouts/{id}` shows it `done`).',
          content: json(ref('Lockout')),
        },
        {
          [ErrorCode.INVALID_INPUT]: 'Invalid JSON or a missing or blank `reason`; `field` names it.',
          [ErrorCode.PAYLOAD_TOO_LARGE]: 'A body over 4096 bytes.',
          [ErrorCode.UNSUPPORTED_MEDIA_TYPE]: 'A body that is not JSON.',
          [ErrorCode.NOT_FOUND]: `No lock-out with this id. ${OPERATOR_KEY[ErrorCode.NOT_FOUND]}`,
          [ErrorCode.CONFLICT]:
            'The lock-out had ended (another admin unlocked it, or its end came), before or during this unlock: nothing done; `detail` says how it ended.',
          [ErrorCode.AUDIT_UNAVAILABLE]:
            'The audit trail did not take the unlock (or none is configured): nothing changed.',
          [ErrorCode.OUTBOX_UNAVAILABLE]:
            'The outbox’s database (RISKGATE_DATABASE) did not take the unlock durably in time (down, refused, too slow): nothing changed; try again after `Retry-After`.',
          ...DATABASE_ROUTE,
        },
        '202',
      ),
    ),
  };
}

/** What the vendor calls: the Admin API's callbacks. */
function vendorPaths(): Record<string, unknown> {
  return {
    '/callbacks/admin': {
      post: operation(
        'vendor',
        {
          operationId: 'adminCallback',
          summary: 'The Admin API’s enrollment and migration callbacks',
          description:
            'Served on RISKGATE_PORT once a callback signature key is configured (RISKGATE_CALLBACK_SIGNATURE_KEY), else 404. Logged by kind and ids, never the activation code.',
          security: [{ callbackSignature: [] }],
          requestBody: {
            required: true,
            description: `The callback as the Admin API sends it (JSON, at most ${MAX_CALLBACK_BODY_BYTES} bytes), signed over its raw bytes.`,
            content: json({ type: 'object' }),
          },
        },
        {
          '200': { description: 'Verified and logged.', content: json(ref('CallbackAck')) },
          ...problems({
            [ErrorCode.INVALID_INPUT]: 'The body, signed correctly, is not valid JSON.',
            [ErrorCode.INVALID_SIGNATURE]:
              'x-jws-signature missing, not verifying over this body, or not canonical unpadded base64url.',
            [ErrorCode.CALLBACK_REPLAYED]: 'This signed callback was already received: not processed again.',
            [ErrorCode.PAYLOAD_TOO_LARGE]: `Body over ${MAX_CALLBACK_BODY_BYTES} bytes.`,
            [ErrorCode.NOT_FOUND]: 'No callback signature key is configured: the route is not served.',
            ...EVERY_ROUTE,
          }),
          ...REQUEST_TIMEOUT,
        },
      ),
    },
  };
}

/** OpenAPI query parameters from a zod object schema of a query. */
function queryParameters(schema: z.ZodObject): object[] {
  const { properties = {}, required = [] } = jsonSchema(schema, 'input') as {
    properties?: Record<string, { description?: string }>;
    required?: string[];
  };
  return Object.entries(properties).map(([name, property]) => ({
    name,
    in: 'query',
    required: required.includes(name),
    schema: property,
  }));
}

/** Where the document is committed, relative to the repository root. */
export const OPENAPI_FILE = 'docs/openapi.json';

/** The committed file's text: the document, two-space indented, with a final newline. */
export function openApiFileText(version: string): string {
  return `${JSON.stringify(buildOpenApiDocument(version), null, 2)}\n`;
}
