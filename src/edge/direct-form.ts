import type { IncomingMessage } from 'node:http';
import type { ContextVariableMap, Handler, MiddlewareHandler } from 'hono';

/**
 * A route's middlewares and handler in a second form, for serving the request straight from the
 * node:http listener (src/http/direct-route.ts), without @hono/node-server's Request and Response
 * or hono's dispatch: at 200 decisions a second those were ~15 % of the /decide path's CPU in
 * process (issue 32, bench/RESULTS.md). Each form sits on the function it mirrors, so a route's
 * chain is declared once (its `mount`); a chain with one middleware lacking a form is never served
 * directly.
 *
 * A guard's form only ever lets a request through. A request it is not sure of, one the guard
 * would refuse included, makes `check` answer false: hono then serves the whole request, refusal and
 * all, exactly as without the direct path. So `check` may write only into `vars` (thrown away
 * then); the guard's work when the request is served is `enter`, and after its answer `leave`.
 */

/** The variables a request's guards set for its handler (hono's `c.set`). */
export type DirectVars = Partial<ContextVariableMap>;

/** An answer made without hono: the problem code of a problem answer, for the request metrics. */
export interface DirectAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
  code?: string | undefined;
}

/** A middleware's form (see above). */
export interface DirectGuard {
  /** Whether it certainly lets `req` through (no refusal, no other path of its own). */
  check(req: IncomingMessage, vars: DirectVars): boolean;
  /** Its work before the handler, once every guard let the request through. */
  enter?(req: IncomingMessage, vars: DirectVars): void;
  /** Its work once the answer is made and before it is written (the answer's headers included). */
  leave?(req: IncomingMessage, vars: DirectVars, answer: DirectAnswer): void;
}

/** What a handler's form is given. */
export interface DirectRequest {
  req: IncomingMessage;
  vars: DirectVars;
  /** `c.req.url`: the absolute URL. */
  url: string;
  /** Aborted when the client hangs up before its answer is written (`c.req.raw.signal`). */
  signal: AbortSignal;
  /** The body as text (`c.req.text()`): rejects when the client hangs up first. */
  text(): Promise<string>;
}

/** A handler's form: the answer, or an error the app's one error handler renders. */
export type DirectHandler = (request: DirectRequest) => Promise<DirectAnswer>;

const GUARD = Symbol('riskgate.directGuard');
const HANDLER = Symbol('riskgate.directHandler');

/** `middleware`, carrying its direct form. */
export function withDirectGuard<M extends MiddlewareHandler>(middleware: M, guard: DirectGuard): M {
  Object.defineProperty(middleware, GUARD, { value: guard });
  return middleware;
}

/** `handler`, carrying its direct form. */
export function withDirectHandler<H extends Handler>(handler: H, direct: DirectHandler): H {
  Object.defineProperty(handler, HANDLER, { value: direct });
  return handler;
}

/** A middleware's direct form, if it has one. */
export function directGuardOf(middleware: unknown): DirectGuard | undefined {
  return (middleware as { [GUARD]?: DirectGuard } | undefined)?.[GUARD];
}

/** A handler's direct form, if it has one. */
export function directHandlerOf(handler: unknown): DirectHandler | undefined {
  return (handler as { [HANDLER]?: DirectHandler } | undefined)?.[HANDLER];
}

/** A guard that lets every request through, doing nothing (a pass-through middleware's form). */
export const PASS_THROUGH: DirectGuard = { check: () => true };
