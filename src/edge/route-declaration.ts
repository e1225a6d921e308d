import type { Context, Handler, Hono, MiddlewareHandler } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { z } from 'zod';
import { ErrorCode } from '../errors/riskgate-error.ts';
import type { DirectRequest } from './direct-form.ts';
import { inputErrorOf, jsonBodyOf, limitBody, readJsonBody } from './json-body.ts';

/**
 * A route declared once: its method and path, who it serves, what it takes (zod schemas of its
 * path, query and body) and what it answers. The same declaration registers the hono handler
 * (`route.mount`), checks the request in that handler (`route.queryOf`, `route.pathOf`,
 * `route.bodyOf`: the very schemas the document shows) and becomes the route's operation in the
 * OpenAPI document (src/openapi/openapi-document.ts assembles them; docs/architecture.md, "How to
 * declare a route"). A handler registered any other way fails test/openapi-contract.test.ts.
 */

/** Which of riskgate's audiences a route serves (`x-riskgate-surface`, and a tag of the same name). */
export type DocumentSurface = 'caller' | 'probe' | 'operator' | 'vendor';

/** The problem codes a route may answer, each with what it means there. */
export type CodeNotes = Partial<Record<ErrorCode, string>>;

/** A request body schema the document names (`#/components/schemas/<component>`). */
export interface NamedSchema<S extends z.ZodType = z.ZodType> {
  component: string;
  schema: S;
  /**
   * The same check, without zod, of the bodies it certainly accepts: what `schema` would return,
   * or undefined to let `schema` decide (and word the 400). For a hot route (issue 32).
   */
  accept?: (json: unknown) => z.output<S> | undefined;
}

/** One answer of a route that is not a problem. */
export interface ResponseDeclaration {
  description: string;
  /**
   * The body: the name of a component schema (src/openapi/openapi-document.ts), or a JSON Schema
   * written out. None: an answer without a body.
   */
  schema?: string | Record<string, unknown>;
  /** Default `application/json`. */
  contentType?: string;
  /** Headers the answer comes with, OpenAPI header objects by name. */
  headers?: Record<string, object>;
}

/** What a route declares (see {@link declareRoute}). */
export interface RouteSpec<
  P extends z.ZodObject | undefined = undefined,
  Q extends z.ZodObject | undefined = undefined,
  B extends z.ZodType | undefined = undefined,
> {
  method: 'get' | 'post' | 'delete';
  /** The OpenAPI path template (`/lists/{name}`); hono's (`/lists/:name`) is derived from it. */
  path: string;
  surface: DocumentSurface;
  operationId: string;
  summary: string;
  description?: string;
  /**
   * Who may call it, as OpenAPI security requirements. Default by surface: `caller` the caller
   * key, `operator` the operator key, `vendor` the callback signature, `probe` none.
   */
  security?: Record<string, string[]>[];
  /** The path parameters, each with its `describe()`; `route.pathOf(c)` checks them (400 naming the field). */
  params?: P;
  /** The query; `route.queryOf(c)` checks it (400 naming the field). */
  query?: Q;
  body?: {
    /** The JSON body; `route.bodyOf(c)` reads and checks it (415/400 naming the field). */
    schema?: NamedSchema<NonNullable<B>>;
    /** A body described but read by the handler itself (a signed callback's raw bytes). */
    jsonSchema?: Record<string, unknown>;
    /** Default true. */
    required?: boolean;
    /** 413 past it, before the body is read: `mount` puts `limitBody` right before the handler. */
    maxBytes?: number;
    /**
     * Default (with `maxBytes`) `JSON, at most <maxBytes> bytes.`, the document's; one given must
     * name `<maxBytes> bytes` too (test/openapi-contract.test.ts).
     */
    description?: string;
    /** Other content types it takes besides JSON (JSON Schema by content type). */
    alsoAccepts?: Record<string, Record<string, unknown>>;
  };
  /** The answers that are not problems, by status. */
  responses: Record<number, ResponseDeclaration>;
  /**
   * The problems this route answers beyond its surface's own (the operator key's, a bug's, another
   * method's), by code; listed under the status each code maps to.
   */
  problems?: CodeNotes;
  /** Problem statuses that come with `Retry-After` here although their codes do not always. */
  retryAfterOn?: number[];
}

/** A declared route: what the document reads, and what its handler uses. */
export interface RouteDeclaration<
  P extends z.ZodObject | undefined = z.ZodObject | undefined,
  Q extends z.ZodObject | undefined = z.ZodObject | undefined,
  B extends z.ZodType | undefined = z.ZodType | undefined,
> extends RouteSpec<P, Q, B> {
  /** hono's path (`:name` for `{name}`). */
  readonly honoPath: string;
  /**
   * Registers `handlers` (middlewares, the handler last) on `app` for this method and path, with
   * `limitBody(body.maxBytes)` right before the handler when the body declares one.
   */
  mount(app: Hono, ...handlers: [...MiddlewareHandler[], Handler]): void;
  /** The checked path parameters (400 `RG_ERR_INVALID_INPUT` naming the field otherwise). */
  pathOf(c: Context): z.output<NonNullable<P>>;
  /** The checked query (400 `RG_ERR_INVALID_INPUT` naming the field otherwise). */
  queryOf(c: Context): z.output<NonNullable<Q>>;
  /** The checked JSON body (415, or 400 naming the field, otherwise). */
  bodyOf(c: Context): Promise<z.output<NonNullable<B>>>;
  /** `bodyOf` of a request served straight from node:http (src/edge/direct-form.ts). */
  directBodyOf(request: DirectRequest): Promise<z.output<NonNullable<B>>>;
  /**
   * Mounts, after `guards`, the handler of a route that answers one value (a change, as a rule):
   * its path checked, then its body read (each when declared: 400 or 415 naming the field, before
   * anything is done), both given to `answer`, and what that returns sent as JSON with `status`;
   * with 204, no body.
   */
  serve(
    app: Hono,
    guards: MiddlewareHandler[],
    status: ContentfulStatusCode | 204,
    answer: (c: Context, path: Checked<P>, body: Checked<B>) => Promise<unknown>,
  ): void;
}

/** What a declared schema checks a request's part into; undefined when none is declared. */
export type Checked<S extends z.ZodType | undefined> = S extends z.ZodType ? z.output<S> : undefined;

/** Any declared route, as a mount lists them and the document reads them. */
// biome-ignore lint/suspicious/noExplicitAny: a list of routes whose schemas differ
export type AnyRouteDeclaration = RouteDeclaration<any, any, any>;

/** Where a declaration is kept on the handler it registered (read by the route-coverage test). */
export const DECLARED_BY = Symbol('riskgate.routeDeclaration');

/** Declares a route: see {@link RouteSpec}. */
export function declareRoute<
  P extends z.ZodObject | undefined = undefined,
  Q extends z.ZodObject | undefined = undefined,
  B extends z.ZodType | undefined = undefined,
>(spec: RouteSpec<P, Q, B>): RouteDeclaration<P, Q, B> {
  const honoPath = spec.path.replace(/\{(\w+)\}/g, ':$1');
  const bodySchema = spec.body?.schema?.schema;
  const acceptBody = spec.body?.schema?.accept;
  const declaration: RouteDeclaration<P, Q, B> = {
    ...spec,
    honoPath,
    mount(app, ...handlers) {
      const handler = handlers[handlers.length - 1] as Handler;
      const before = handlers.slice(0, -1) as MiddlewareHandler[];
      const maxBytes = spec.body?.maxBytes;
      // The handler itself carries its declaration (no wrapper: nothing added to a request's path).
      const tagged = tag(handler, declaration);
      const chain = maxBytes === undefined ? [...before, tagged] : [...before, limitBody(maxBytes), tagged];
      (app.on as (method: string, path: string, ...handlers: Handler[]) => Hono)(
        spec.method.toUpperCase(),
        honoPath,
        ...chain,
      );
    },
    pathOf(c) {
      const parsed = spec.params!.safeParse(c.req.param());
      if (!parsed.success) throw inputErrorOf(parsed.error, 'The path');
      return parsed.data as z.output<NonNullable<P>>;
    },
    queryOf(c) {
      const parsed = spec.query!.safeParse(c.req.query());
      if (!parsed.success) throw inputErrorOf(parsed.error, 'The query');
      return parsed.data as z.output<NonNullable<Q>>;
    },
    bodyOf(c) {
      return readJsonBody(c, bodySchema!, acceptBody) as Promise<z.output<NonNullable<B>>>;
    },
    directBodyOf(request) {
      return jsonBodyOf(
        request.req.headers['content-type'],
        request.text,
        bodySchema!,
        acceptBody,
      ) as Promise<z.output<NonNullable<B>>>;
    },
    serve(app, guards, status, answer) {
      declaration.mount(app, ...guards, async (c) => {
        const path = (spec.params === undefined ? undefined : declaration.pathOf(c)) as Checked<P>;
        const body = (bodySchema === undefined ? undefined : await declaration.bodyOf(c)) as Checked<B>;
        const value = await answer(c, path, body);
        return status === 204 ? c.body(null, 204) : c.json(value as object, status);
      });
    },
  };
  return declaration;
}

/** `handler` marked as `declaration`'s (a handler two routes share is wrapped for the second). */
function tag(handler: Handler, declaration: AnyRouteDeclaration): Handler {
  const marked = handler as Handler & { [DECLARED_BY]?: AnyRouteDeclaration };
  const target: Handler & { [DECLARED_BY]?: AnyRouteDeclaration } =
    marked[DECLARED_BY] === undefined ? marked : (c, next) => handler(c, next);
  Object.defineProperty(target, DECLARED_BY, { value: declaration });
  return target;
}

/** The declaration a handler was registered by, if any. */
export function declarationOf(handler: unknown): AnyRouteDeclaration | undefined {
  return (handler as { [DECLARED_BY]?: AnyRouteDeclaration } | undefined)?.[DECLARED_BY];
}

/** Every route: another method on its path, and a bug. */
export const EVERY_ROUTE: CodeNotes = {
  [ErrorCode.METHOD_NOT_ALLOWED]: 'Another method on this path; `Allow` lists the ones it takes.',
  [ErrorCode.INTERNAL]: 'A bug in riskgate (never bad input): no detail of its own, the service log has it.',
};

/** Every operator route: the operator key and where the operator routes are served. */
export const OPERATOR_KEY: CodeNotes = {
  [ErrorCode.UNAUTHENTICATED]: 'Missing or unknown operator key (a caller key never opens it).',
  [ErrorCode.FORBIDDEN]:
    'No operator key is configured (RISKGATE_OPS_KEYS): every request is refused, and the detail says how to configure one. Or the operator’s role is below the route’s (the detail names both), or a trusted proxy named an identity RISKGATE_SSO_OPERATORS does not list.',
  [ErrorCode.NOT_FOUND]:
    'On RISKGATE_PORT while RISKGATE_OPS_PORT is set: the operator routes are on the ops port.',
};

/** An operator route's 404 note: `why` it may not be found, then the operator surface's own. */
export const notFoundNote = (why: string): string => `${why} ${OPERATOR_KEY[ErrorCode.NOT_FOUND]}`;

/** A change an operator makes: written to the audit trail first, refused when it cannot be. */
export const AUDITED_CHANGE: CodeNotes = {
  [ErrorCode.AUDIT_UNAVAILABLE]:
    'The audit trail (RISKGATE_DATABASE) cannot record the change: it is refused, and not made.',
};

/** A route answering from `store` of the database ("The snoozes database"): its 503. */
export function storeUnavailableNote(store: string): CodeNotes {
  return {
    [ErrorCode.DATABASE_UNAVAILABLE]: `${store} (RISKGATE_DATABASE) did not answer: down, refused or too slow.`,
  };
}

/** A route answering from the database (lists, lock-outs). */
export const DATABASE_ROUTE: CodeNotes = storeUnavailableNote('The database');

/** A JSON body's problems: not JSON, or over `maxBytes` (refused before it is read). */
export function jsonBodyProblems(maxBytes?: number): CodeNotes {
  return {
    [ErrorCode.UNSUPPORTED_MEDIA_TYPE]: 'A body that is not JSON.',
    [ErrorCode.PAYLOAD_TOO_LARGE]:
      maxBytes === undefined ? 'Body too large.' : `Body over ${maxBytes} bytes.`,
  };
}

/** A query parameter breaking its rule. */
export const QUERY_RULE_NOTE = 'A query parameter breaking its rule; `field` names it.';
