import { z } from 'zod';
import { auditEntrySchema, auditPageSchema } from '../audit/audit-routes.ts';
import { decideResponseSchema } from '../decide/decide-response.ts';
import { ruleReportSchema } from '../decision-store/rule-report-routes.ts';
import {
  type AnyRouteDeclaration,
  type CodeNotes,
  type DocumentSurface,
  EVERY_ROUTE,
  OPERATOR_KEY,
} from '../edge/route-declaration.ts';
import { ErrorCode } from '../errors/riskgate-error.ts';
import { feedbackResponseSchema } from '../feedback/feedback-request.ts';
import { importResultSchema, listEntrySchema, listPageSchema, listsSchema } from '../lists/list-api.ts';
import { outcomeResponseSchema } from '../outcomes/outcome-request.ts';
import { policyReloadSchema } from '../policy/policy-routes.ts';
import {
  policyRolloutSchema,
  policyScheduleSchema,
} from '../policy-versions/policy-version-rollout-routes.ts';
import { policyVersionListSchema, policyVersionSchema } from '../policy-versions/policy-version-routes.ts';
import { PROBLEM_CONTENT_TYPE, statusOfCode } from '../problem/problem-details.ts';
import {
  claimNextSchema,
  reviewCaseDetailSchema,
  reviewCaseSchema,
  reviewListSchema,
} from '../review-queue/review-api.ts';
import { snoozeListSchema, snoozeSchema } from '../snoozes/snooze-api.ts';
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
 * The OpenAPI 3.1 description of every route riskgate serves, assembled from the routes'
 * declarations (src/edge/route-declaration.ts: each route declares its method, path, request
 * schemas, answers and problem codes once, and registers its handler with the same declaration).
 * This module adds only what every route shares: the surfaces, servers, security schemes, the
 * answer schemas as named components, and each problem answer listed under the status its
 * `RG_ERR_*` code maps to (src/problem/problem-details.ts), with the codes it can carry. Served at
 * `GET /openapi.json` and committed as `docs/openapi.json` (`npm run openapi`); tests keep both
 * equal and validate real answers of every route against it.
 */

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

/**
 * The answers' schemas by component name (a route's `responses` name them). Request bodies are
 * named by the routes that read them.
 */
const ANSWER_SCHEMAS: Record<string, z.ZodType> = {
  DecideResponse: decideResponseSchema,
  FeedbackResponse: feedbackResponseSchema,
  OutcomeResponse: outcomeResponseSchema,
  Problem: problemSchema,
  Health: healthSchema,
  Readiness: readinessSchema,
  Policies: policiesSchema,
  PolicyVersion: policyVersionSchema,
  PolicyVersions: policyVersionListSchema,
  PolicyRollout: policyRolloutSchema,
  PolicySchedule: policyScheduleSchema,
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
  ReviewCase: reviewCaseSchema,
  ReviewCaseDetail: reviewCaseDetailSchema,
  ReviewCases: reviewListSchema,
  ReviewClaim: claimNextSchema,
};

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

/**
 * Problem answers by status: each code's note, keyed by the status it maps to. The body is the
 * Problem schema narrowed to that status and those codes. `retryAfterOn`: statuses whose answer
 * comes with `Retry-After` on this route.
 */
function problems(notes: CodeNotes, retryAfterOn: readonly number[] = []): Record<string, object> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of Object.keys(notes) as ErrorCode[]) {
    const status = statusOfCode(code);
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const responses: Record<string, object> = {};
  for (const [status, codes] of byStatus) {
    const headers = Object.assign(
      {},
      ...codes.map((c) => CODE_HEADERS[c] ?? {}),
      retryAfterOn.includes(status) ? { 'Retry-After': header('RetryAfter') } : {},
    );
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

/** Node's HTTP server answers it itself, without a body, and closes the connection. */
const REQUEST_TIMEOUT = {
  '408': {
    description:
      'The request did not arrive whole within RISKGATE_REQUEST_TIMEOUT_MS (its headers within RISKGATE_HEADERS_TIMEOUT_MS); answered by the HTTP server, without a body.',
  },
};

const SURFACES: Record<DocumentSurface, string> = {
  caller:
    'Login backends, with a caller key (RISKGATE_API_KEYS); admission control sheds them under overload.',
  probe: 'Liveness and readiness: open on every port, no key.',
  operator:
    'Operators, with an operator key (RISKGATE_OPS_KEYS), never a caller key; on RISKGATE_OPS_PORT when it is set, else on RISKGATE_PORT.',
  vendor:
    'The vendor’s Admin API callbacks, signed (x-jws-signature); served once a callback key is configured.',
};

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

/** What each surface adds to its routes: where served, the key, the problems every one answers. */
const SURFACE_RULES: Record<
  DocumentSurface,
  { bothPorts: boolean; security: Record<string, string[]>[]; problems: CodeNotes; timeout: boolean }
> = {
  caller: { bothPorts: false, security: [{ callerKey: [] }], problems: {}, timeout: true },
  vendor: { bothPorts: false, security: [{ callbackSignature: [] }], problems: {}, timeout: true },
  probe: { bothPorts: true, security: [], problems: {}, timeout: false },
  operator: { bothPorts: true, security: [{ opsKey: [] }], problems: OPERATOR_KEY, timeout: false },
};

/** One route's operation. */
function operationOf(route: AnyRouteDeclaration): Record<string, unknown> {
  const rules = SURFACE_RULES[route.surface];
  const parameters = [
    ...(route.params === undefined ? [] : parametersOf(route.params, 'path')),
    ...(route.query === undefined ? [] : parametersOf(route.query, 'query')),
  ];
  const body = route.body;
  const bodyNote = body === undefined ? undefined : bodyDescription(body);
  const answers: Record<string, object> = {};
  for (const [status, answer] of Object.entries(route.responses)) {
    const { description, schema, contentType = 'application/json', headers } = answer;
    answers[status] = {
      description,
      ...(headers !== undefined && { headers }),
      ...(schema !== undefined && {
        content: { [contentType]: { schema: typeof schema === 'string' ? ref(schema) : schema } },
      }),
    };
  }
  return {
    tags: [route.surface],
    'x-riskgate-surface': route.surface,
    operationId: route.operationId,
    summary: route.summary,
    ...(route.description !== undefined && { description: route.description }),
    ...(parameters.length > 0 && { parameters }),
    security: route.security ?? rules.security,
    ...(body !== undefined && {
      requestBody: {
        required: body.required ?? true,
        ...(bodyNote !== undefined && { description: bodyNote }),
        content: {
          'application/json': {
            schema: body.schema !== undefined ? ref(body.schema.component) : (body.jsonSchema ?? {}),
          },
          ...body.alsoAccepts,
        },
      },
    }),
    responses: {
      ...answers,
      ...problems({ ...rules.problems, ...route.problems, ...EVERY_ROUTE }, route.retryAfterOn),
      ...(rules.timeout && REQUEST_TIMEOUT),
    },
  };
}

/** A body's description as declared, or else its size limit's (`RouteSpec.body.description`). */
function bodyDescription(body: NonNullable<AnyRouteDeclaration['body']>): string | undefined {
  return (
    body.description ?? (body.maxBytes === undefined ? undefined : `JSON, at most ${body.maxBytes} bytes.`)
  );
}

/** The request bodies the routes name, by component name (a name given twice must be one schema). */
function requestSchemas(routes: readonly AnyRouteDeclaration[]): Record<string, z.ZodType> {
  const named: Record<string, z.ZodType> = {};
  for (const route of routes) {
    const body = route.body?.schema;
    if (body === undefined) continue;
    if (named[body.component] !== undefined && named[body.component] !== body.schema) {
      throw new Error(`Two request schemas are named ${body.component}.`);
    }
    named[body.component] = body.schema;
  }
  return named;
}

/**
 * Builds the document from `routes` (the declarations of every route riskgate serves, in the
 * order their paths are listed); `version` is riskgate's package version.
 */
export function buildOpenApiDocument(
  version: string,
  routes: readonly AnyRouteDeclaration[],
): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    paths[route.path] ??= {};
    const item = paths[route.path]!;
    if (item[route.method] !== undefined) throw new Error(`${route.method} ${route.path} is declared twice.`);
    if (SURFACE_RULES[route.surface].bothPorts) item.servers = BOTH_PORTS;
    item[route.method] = operationOf(route);
  }
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
    components: documentComponents(routes),
    paths,
  };
}

/** Security schemes, shared headers and the named schemas the operations refer to. */
function documentComponents(routes: readonly AnyRouteDeclaration[]): Record<string, unknown> {
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
      ...componentSchemas('input', requestSchemas(routes)),
      ...componentSchemas('output', ANSWER_SCHEMAS),
    },
  };
}

/**
 * OpenAPI parameters from a zod object schema of a path or a query: each property's description
 * becomes the parameter's (a path parameter's), its schema the rest.
 */
function parametersOf(schema: z.ZodObject, where: 'path' | 'query'): object[] {
  const { properties = {}, required = [] } = jsonSchema(schema, 'input') as {
    properties?: Record<string, { description?: string }>;
    required?: string[];
  };
  return Object.entries(properties).map(([name, property]) => {
    if (where === 'query') {
      return { name, in: 'query', required: required.includes(name), schema: property };
    }
    const { description, ...rest } = property;
    return { name, in: 'path', required: true, description, schema: rest };
  });
}

/** Where the document is committed, relative to the repository root. */
export const OPENAPI_FILE = 'docs/openapi.json';

/** The committed file's text: the document, two-space indented, with a final newline. */
export function openApiFileText(version: string, routes: readonly AnyRouteDeclaration[]): string {
  return `${JSON.stringify(buildOpenApiDocument(version, routes), null, 2)}\n`;
}
