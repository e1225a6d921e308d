/**
 * A console session over plain HTTP, as a browser without script keeps one: sign in with an
 * operator key (the sign-in form's nonce cookie and CSRF token), then pages and forms with the
 * session cookie and its CSRF token. Redirects are not followed: a test reads the 303 itself.
 */

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

/** The `name=value` of `res`'s Set-Cookie header for `name`. */
export function cookieOf(res: Response, name: string): string | undefined {
  return res.headers
    .getSetCookie()
    .find((c) => c.startsWith(`${name}=`))
    ?.split(';')[0];
}

/** The CSRF token a page's forms carry. */
export const csrfIn = (html: string) => /name="csrf" value="([^"]+)"/.exec(html)?.[1];

export interface ConsoleClient {
  cookie: string;
  csrf: string;
  get(path: string): Promise<Response>;
  /** A form POST with the session's CSRF token added. */
  post(path: string, form?: Record<string, string>): Promise<Response>;
}

/** Signs in to the console at `url` with operator `key`; throws when it is refused. */
export async function consoleSignIn(url: string, key: string): Promise<ConsoleClient> {
  const form = await fetch(`${url}/console/sign-in`);
  const nonce = cookieOf(form, 'riskgate_console_sign_in');
  const token = csrfIn(await form.text());
  const res = await fetch(`${url}/console/sign-in`, {
    method: 'POST',
    redirect: 'manual',
    headers: { ...FORM, cookie: nonce ?? '' },
    body: new URLSearchParams({ csrf: token ?? '', key, next: '/console/decisions' }),
  });
  const cookie = cookieOf(res, 'riskgate_console');
  if (res.status !== 303 || cookie === undefined) throw new Error(`console sign-in refused: ${res.status}`);
  const page = await fetch(`${url}/console/decisions`, { headers: { cookie } });
  const csrf = csrfIn(await page.text());
  if (csrf === undefined) throw new Error('the console page carries no CSRF token');
  return {
    cookie,
    csrf,
    get: (path) => fetch(`${url}${path}`, { headers: { cookie }, redirect: 'manual' }),
    post: (path, fields = {}) =>
      fetch(`${url}${path}`, {
        method: 'POST',
        redirect: 'manual',
        headers: { ...FORM, cookie },
        body: new URLSearchParams({ csrf, ...fields }),
      }),
  };
}
