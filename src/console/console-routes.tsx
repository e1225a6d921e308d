import { type Context, Hono, type MiddlewareHandler } from 'hono';
import { getCookie } from 'hono/cookie';
import type { Child } from 'hono/jsx';
import { z } from 'zod';
import type { RouteEdge, RouteMount } from '../lifecycle/component.ts';
import { type OperatorRole, roleAllows } from '../operators/operator.ts';
import { toProblem } from '../problem/problem-details.ts';
import { storableText } from '../text/storable-text.ts';
import { type ConsoleAssets, loadConsoleAssets } from './console-assets.ts';
import type { ConsoleDeps } from './console-deps.ts';
import { type NavKey, renderPage } from './console-layout.tsx';
import {
  CSRF_FIELD,
  consoleCookie,
  SESSION_COOKIE,
  SessionSigner,
  SIGN_IN_COOKIE,
  type SignedSession,
  signInNonce,
} from './console-session.ts';
import { ErrorView, SignInView } from './other-pages.tsx';

/**
 * The console's HTTP side under /console on the operator surface: security headers on every
 * answer, the sign-in and the session, CSRF and same-origin checks on every POST, role checks on
 * every change, each change written to the audit trail before it is made. The pages themselves are
 * in console-pages.tsx.
 */

/** The console's Content-Security-Policy: only its own files, no inline script or style. */
export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/** Largest console form body, bytes (a label note is at most 1000 characters). */
const MAX_FORM_BYTES = 16 * 1024;

export interface ConsoleSession extends SignedSession {
  token: string;
  csrf: string;
}

export type ConsoleEnv = { Variables: { session: ConsoleSession; form: Record<string, string> } };
export type ConsoleContext = Context<ConsoleEnv>;

/** What the route groups share. */
export interface ConsoleKit {
  deps: ConsoleDeps;
  signer: SessionSigner;
  assets: ConsoleAssets;
  edge: RouteEdge;
  /** A page in the frame, with the signed-in operator when there is one. */
  page(c: ConsoleContext, o: { title: string; current?: NavKey; status?: number; body: Child }): Response;
  /** The HTML error page. */
  fail(c: ConsoleContext, status: 400 | 401 | 403 | 404 | 409 | 503, title: string, detail: string): Response;
  /** Middleware: a signed-in session (otherwise to the sign-in page). */
  session: MiddlewareHandler<ConsoleEnv>;
  /** Middleware: a POST's form, same-origin and with the session's CSRF token (403 otherwise). */
  form: MiddlewareHandler<ConsoleEnv>;
  /** Middleware: the operator's role allows `role`'s changes (403 page otherwise). */
  role(role: OperatorRole, what: string): MiddlewareHandler<ConsoleEnv>;
  secure(c: ConsoleContext): boolean;
}

/**
 * A form posted from a page of this origin, as far as the browser says: Sec-Fetch-Site when sent
 * (every current browser), else the Origin's host. `Origin: null` is what a browser sends under
 * the console's `Referrer-Policy: no-referrer`, so it decides nothing: the CSRF token still does.
 */
function sameOrigin(c: Context): boolean {
  const site = c.req.header('sec-fetch-site');
  if (site !== undefined) return site === 'same-origin';
  const origin = c.req.header('origin');
  if (origin === undefined || origin === 'null') return true;
  try {
    return new URL(origin).host === c.req.header('host');
  } catch {
    return false;
  }
}

async function formOf(c: Context): Promise<Record<string, string>> {
  const type = c.req.header('content-type') ?? '';
  if (!/^application\/x-www-form-urlencoded|^multipart\/form-data/i.test(type)) return {};
  const body = await c.req.parseBody();
  const form: Record<string, string> = {};
  for (const [k, v] of Object.entries(body)) if (typeof v === 'string') form[k] = v;
  return form;
}

function makeKit(deps: ConsoleDeps, edge: RouteEdge): ConsoleKit {
  const signer = new SessionSigner(deps.session);
  const assets = loadConsoleAssets();
  const frameOf = (c: ConsoleContext) => {
    const s = c.get('session');
    return { assets, session: s === undefined ? undefined : { operator: s.operator, csrf: s.csrf } };
  };
  const kit: ConsoleKit = {
    deps,
    signer,
    assets,
    edge,
    page(c, o) {
      const html = renderPage({ frame: frameOf(c), title: o.title, current: o.current, children: o.body });
      return c.html(html, (o.status ?? 200) as 200);
    },
    fail(c, status, title, detail) {
      return kit.page(c, {
        title,
        status,
        body: <ErrorView title={title} detail={detail} status={status} />,
      });
    },
    async session(c, next) {
      const cookie = getCookie(c, SESSION_COOKIE);
      const vouched = edge.vouchedIdentity(c);
      if (vouched !== undefined && 'unknown' in vouched) {
        // The proxy says who is at the keyboard now, and they may not operate: a cookie left by
        // someone else in this browser does not stand in for them.
        if (cookie !== undefined) {
          c.header(
            'set-cookie',
            consoleCookie(SESSION_COOKIE, '', { maxAgeSeconds: 0, secure: kit.secure(c) }),
          );
        }
        return kit.fail(
          c,
          403,
          'Not an operator',
          'The identity your sign-in proxy gives has no operator role: RISKGATE_SSO_OPERATORS lists who may operate.',
        );
      }
      const fromProxy = await ssoSession(c, signer.verify(cookie), kit);
      const token = fromProxy ?? cookie;
      const verified = signer.verify(token);
      // A session outlives no change of its operator: a key removed or a role changed ends it.
      const signed = verified !== undefined && edge.stillOperates(verified.operator) ? verified : undefined;
      if (signed === undefined || token === undefined) {
        if (c.req.path.endsWith('.json')) return c.json({ error: 'Sign in again.' }, 401);
        const url = new URL(c.req.url);
        const back = c.req.method === 'GET' ? `${url.pathname}${url.search}` : '/console/decisions';
        if (token !== undefined) {
          c.header(
            'set-cookie',
            consoleCookie(SESSION_COOKIE, '', { maxAgeSeconds: 0, secure: kit.secure(c) }),
          );
        }
        return c.redirect(`/console/sign-in?next=${encodeURIComponent(back)}`, 303);
      }
      c.set('session', { ...signed, token, csrf: signer.csrfFor(token) });
      // The operator as the rest of the edge knows one (the audit trail's `recordChange` reads it).
      c.set('principal', { keyId: signed.operator.keyId, role: 'operator', operator: signed.operator });
      await next();
    },
    async form(c, next) {
      const token = c.get('session')?.token;
      return checkedForm(c, next, token, kit);
    },
    role(role, what) {
      return async (c, next) => {
        const { operator } = c.get('session');
        if (!roleAllows(operator.role, role)) {
          return kit.fail(
            c,
            403,
            'Not allowed',
            `${what} takes the ${role} role; you are signed in as ${operator.role}.`,
          );
        }
        await next();
      };
    },
    secure(c) {
      return deps.session.secureCookie === true || new URL(c.req.url).protocol === 'https:';
    },
  };
  return kit;
}

/**
 * With single sign-on (RISKGATE_TRUSTED_IDENTITY_HEADER, believed only from RISKGATE_TRUSTED_PROXIES:
 * the edge's `resolveOperator`), the operator the proxy names is signed in without a key: a fresh
 * session token (set as the cookie, the sign-in audited) unless the cookie's session is already
 * that operator's. Undefined without such an identity, or when the cookie's session is theirs.
 */
async function ssoSession(
  c: ConsoleContext,
  current: SignedSession | undefined,
  kit: ConsoleKit,
): Promise<string | undefined> {
  const sso = kit.edge.resolveOperator(c);
  if (sso === undefined || sso.keyId !== 'sso') return undefined;
  const held = current?.operator;
  if (held !== undefined && held.keyId === 'sso' && held.name === sso.name && held.role === sso.role) {
    return undefined;
  }
  c.set('principal', { keyId: sso.keyId, role: 'operator', operator: sso });
  await kit.edge.recordChange(c, { action: 'session.sign_in', target: sso.name, detail: { via: 'sso' } });
  const token = kit.signer.sign(sso);
  c.header(
    'set-cookie',
    consoleCookie(SESSION_COOKIE, token, {
      maxAgeSeconds: kit.signer.sessionMs / 1000,
      secure: kit.secure(c),
    }),
  );
  return token;
}

/** A POST's form when it is same-origin and carries the CSRF token of `token`; the 403 page otherwise. */
export async function checkedForm(
  c: ConsoleContext,
  next: () => Promise<void>,
  token: string | undefined,
  kit: ConsoleKit,
): Promise<Response | undefined> {
  if (!sameOrigin(c)) {
    return kit.fail(c, 403, 'Refused', 'This form was sent from another site, so it was not accepted.');
  }
  const form = await formOf(c);
  if (!kit.signer.csrfMatches(token, form[CSRF_FIELD])) {
    return kit.fail(
      c,
      403,
      'Refused',
      'The form’s CSRF token is missing or wrong (an old page, or a form from elsewhere): reload the page and try again.',
    );
  }
  c.set('form', form);
  await next();
  return undefined;
}

/** Where to go after signing in: a console path only (never another site). */
function safeNext(next: string | undefined): string {
  return next !== undefined && /^\/console\/[^/\\]/.test(next) && !next.includes('//')
    ? next
    : '/console/decisions';
}

function mountSignIn(ui: Hono<ConsoleEnv>, kit: ConsoleKit): void {
  const { signer, deps } = kit;
  const signInForm = (c: ConsoleContext, nonce: string, status: 200 | 401, error?: string) =>
    kit.page(c, {
      title: 'Sign in',
      status,
      body: (
        <SignInView
          csrf={signer.csrfFor(`sign-in:${nonce}`)}
          next={safeNext(c.req.query('next') ?? c.get('form')?.next)}
          error={error}
          noKeys={deps.session.operatorKeys.length === 0}
        />
      ),
    });
  ui.get('/sign-in', (c) => {
    if (signer.verify(getCookie(c, SESSION_COOKIE)) !== undefined)
      return c.redirect('/console/decisions', 303);
    const nonce = signInNonce();
    c.header(
      'set-cookie',
      consoleCookie(SIGN_IN_COOKIE, nonce, { maxAgeSeconds: 3600, secure: kit.secure(c) }),
    );
    return signInForm(c, nonce, 200);
  });
  ui.post(
    '/sign-in',
    kit.edge.limitBody(MAX_FORM_BYTES),
    (c, next) => {
      const nonce = getCookie(c, SIGN_IN_COOKIE);
      return checkedForm(c, next, nonce === undefined ? undefined : `sign-in:${nonce}`, kit);
    },
    async (c) => {
      const form = c.get('form');
      const key = form.key ?? '';
      const resolve = deps.resolveOperator ?? kit.edge.operatorOfKey;
      const operator = key.length > 0 && key.length <= 1024 ? resolve(key) : undefined;
      if (operator === undefined) {
        return signInForm(c, getCookie(c, SIGN_IN_COOKIE)!, 401, 'That is not an operator key.');
      }
      // Audited like a change (no session while the trail cannot record one).
      c.set('principal', { keyId: operator.keyId, role: 'operator', operator });
      await kit.edge.recordChange(c, { action: 'session.sign_in', target: operator.name });
      const secure = kit.secure(c);
      c.header(
        'set-cookie',
        consoleCookie(SESSION_COOKIE, signer.sign(operator), {
          maxAgeSeconds: signer.sessionMs / 1000,
          secure,
        }),
      );
      c.header('set-cookie', consoleCookie(SIGN_IN_COOKIE, '', { maxAgeSeconds: 0, secure }), {
        append: true,
      });
      return c.redirect(safeNext(form.next), 303);
    },
  );
  ui.post('/sign-out', kit.edge.limitBody(MAX_FORM_BYTES), kit.session, kit.form, async (c) => {
    await kit.edge.recordChange(c, { action: 'session.sign_out', target: c.get('session').operator.name });
    c.header('set-cookie', consoleCookie(SESSION_COOKIE, '', { maxAgeSeconds: 0, secure: kit.secure(c) }));
    return c.redirect('/console/sign-in', 303);
  });
}

/** The security headers of every console answer; pages are never cached, assets for a year. */
const securityHeaders: MiddlewareHandler = async (c, next) => {
  await next();
  const h = c.res.headers;
  h.set('content-security-policy', CONSOLE_CSP);
  h.set('x-content-type-options', 'nosniff');
  h.set('referrer-policy', 'no-referrer');
  h.set('x-frame-options', 'DENY');
  h.set('cross-origin-opener-policy', 'same-origin');
  if (!h.has('cache-control')) h.set('cache-control', 'no-store');
};

/**
 * The console app: `mountPages` adds the signed-in pages and changes behind the session. Errors
 * are answered with the HTML error page (never a stack, never a secret).
 */
export function consoleApp(
  deps: ConsoleDeps,
  edge: RouteEdge,
  mountPages: (ui: Hono<ConsoleEnv>, kit: ConsoleKit) => void,
): Hono<ConsoleEnv> {
  const kit = makeKit(deps, edge);
  const ui = new Hono<ConsoleEnv>();
  ui.use(securityHeaders);
  ui.onError((error, c) => {
    const problem = toProblem(error);
    const status = ([400, 401, 403, 404, 409, 503] as const).find((s) => s === problem.status) ?? 503;
    return kit.fail(c, status, problem.title, problem.detail);
  });
  ui.get('/assets/:name', (c) => {
    const asset = kit.assets.byName(c.req.param('name'));
    if (asset === undefined) return c.text('No such asset.', 404);
    return c.body(asset.body, 200, {
      'content-type': asset.contentType,
      'cache-control': 'public, max-age=31536000, immutable',
    });
  });
  ui.get('/', (c) => c.redirect('/console/decisions', 303));
  mountSignIn(ui, kit);
  ui.use(kit.session);
  mountPages(ui, kit);
  ui.all('*', (c) =>
    kit.fail(c, 404, 'Not found', `There is no console page at ${c.req.path.slice(0, 200)}.`),
  );
  return ui;
}

/** A label form's fields. */
export const labelFormSchema = z.object({
  label: z.enum(['fraud', 'legit'], { message: 'choose fraud or legit' }),
  note: storableText()
    .trim()
    .max(1000, 'must be at most 1000 characters')
    .optional()
    .transform((v) => (v === '' ? undefined : v)),
});

/** The console as routes on the operator surface (`/console`). */
export function consoleRoutesWith(
  deps: ConsoleDeps,
  mountPages: (ui: Hono<ConsoleEnv>, kit: ConsoleKit) => void,
): RouteMount {
  return {
    surface: 'operator',
    // HTML pages for a browser (README, "Console"), not the API: no declarations, not documented.
    routes: [],
    pagesUnder: '/console',
    mount(app, edge) {
      app.route('/console', consoleApp(deps, edge, mountPages));
    },
  };
}
