import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Hono } from 'hono';
import {
  type DirectAnswer,
  type DirectGuard,
  type DirectHandler,
  type DirectVars,
  directGuardOf,
  directHandlerOf,
} from '../edge/direct-form.ts';

/**
 * Routes an app also serves straight from the node:http listener (issue 32): the route's own
 * middlewares and handler in their direct forms (src/edge/direct-form.ts), the app's error
 * handler for what the handler throws. A request any guard is not sure of, another method, a
 * path with a query, a host @hono/node-server would check further: the app serves it, unchanged.
 */

/** The app's error handler, for a request served directly: the problem answer for `error`. */
export type DirectErrorAnswer = (error: unknown, req: IncomingMessage, path: string) => DirectAnswer;

interface DirectRoute {
  guards: readonly DirectGuard[];
  handler: DirectHandler;
  onError: DirectErrorAnswer;
}

/** Routes an app asked to serve directly, with its error handler's direct form. */
const ASKED = new WeakMap<Hono, { method: string; path: string; onError: DirectErrorAnswer }[]>();

/**
 * Serves `method` `path` of `app` directly too, when every handler hono would run for it (the
 * app's middlewares, then the route's, up to its handler: read from hono's own router once the app
 * is complete, in `withDirectRoutes`) has a direct form; else not at all.
 */
export function serveDirectly(app: Hono, method: string, path: string, onError: DirectErrorAnswer): void {
  const asked = ASKED.get(app) ?? [];
  ASKED.set(app, asked);
  asked.push({ method: method.toUpperCase(), path, onError });
}

/**
 * The handlers hono matches for `method` `path`, in order, as its dispatch composes them: so a
 * middleware added anywhere before the route's handler is in the chain, and one without a direct
 * form turns the direct path off rather than being skipped.
 */
function chainOf(app: Hono, method: string, path: string): readonly unknown[] {
  return app.router.match(method, path)[0].map((matched) => matched[0][0]);
}

/** The direct routes of a complete `app` (every route and middleware registered). */
function directRoutesOf(app: Hono): Map<string, DirectRoute> | undefined {
  const routes = new Map<string, DirectRoute>();
  for (const { method, path, onError } of ASKED.get(app) ?? []) {
    const chain = chainOf(app, method, path);
    // The handler answers without calling `next`: what hono matched after it never runs.
    const at = chain.findIndex((h) => directHandlerOf(h) !== undefined);
    if (at < 0) continue;
    const handler = directHandlerOf(chain[at])!;
    const guards = chain.slice(0, at).map(directGuardOf);
    if (guards.some((g) => g === undefined)) continue;
    routes.set(`${method} ${path}`, { guards: guards as DirectGuard[], handler, onError });
  }
  return routes.size === 0 ? undefined : routes;
}

/** The host names @hono/node-server takes as they are (any other it checks through `URL`). */
const PLAIN_HOST = /^[a-z0-9._-]+(?::(?:[1-5]\d{3,4}|[6-9]\d{3}))?$/;

/** `listener` (the app's, through @hono/node-server), with `app`'s direct routes served before it. */
export function withDirectRoutes(app: Hono, listener: RequestListener): RequestListener {
  const routes = directRoutesOf(app);
  if (routes === undefined) return listener;
  return (req, res) => {
    const route = routes.get(`${req.method} ${req.url}`);
    const host = req.headers.host;
    if (
      route === undefined ||
      host === undefined ||
      !PLAIN_HOST.test(host) ||
      // A header sent twice: Node keeps one of some (authorization, content-type), hono reads all.
      req.rawHeaders.length !== 2 * Object.keys(req.headers).length ||
      !serve(route, req, res, host)
    ) {
      listener(req, res);
    }
  };
}

const decoder = new TextDecoder();

/** Serves `req` on `route`, or answers false having done nothing (a guard was not sure). */
function serve(route: DirectRoute, req: IncomingMessage, res: ServerResponse, host: string): boolean {
  const vars: DirectVars = {};
  const { guards } = route;
  for (const guard of guards) if (!guard.check(req, vars)) return false;
  for (const guard of guards) guard.enter?.(req, vars);
  const controller = new AbortController();
  // As @hono/node-server's Request: the signal aborts when the client leaves before its answer.
  res.once('close', () => {
    if (req.errored || !res.writableFinished) controller.abort();
  });
  const path = req.url!;
  const finish = (answer: DirectAnswer): void => {
    for (let i = guards.length - 1; i >= 0; i--) guards[i]!.leave?.(req, vars, answer);
    res.statusCode = answer.status;
    for (const name in answer.headers) res.setHeader(name, answer.headers[name]!);
    // The length from `end`: where Node writes it (after its own headers), as through the adapter.
    res.end(answer.body);
  };
  route
    .handler({
      req,
      vars,
      url: `${(req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http'}://${host}${path}`,
      signal: controller.signal,
      text: () => bodyText(req),
    })
    .then(finish, (error: unknown) => finish(route.onError(error, req, path)))
    // Writing the answer failed (a guard's `leave`, a header): an unhandled rejection is fatal in
    // riskgate (src/riskgate-process.ts), so the error is logged by the app's handler and this
    // connection alone is cut: its caller sees a failed request, never half an answer.
    .catch((error: unknown) => {
      route.onError(error, req, path);
      res.destroy();
    });
  return true;
}

/** The request's body, decoded as @hono/node-server does (a TextDecoder: a BOM is dropped). */
function bodyText(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const onData = (chunk: Buffer) => chunks.push(chunk);
    const onEnd = () => {
      cleanup();
      resolve(decoder.decode(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
    };
    const onError = (error: Error) => {
      cleanup();
      reject(error);
    };
    const onClose = () => {
      cleanup();
      reject(new Error('aborted'));
    };
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}
