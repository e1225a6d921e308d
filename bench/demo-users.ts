import { DEFAULT_CREDENTIALS } from '../src/sandbox/sandbox-config.ts';
import { formatRfc2822, signRequest } from '../src/vendor-auth/hmac-signature.ts';

/**
 * The Admin API user id of each demo account. The sandbox generates ids when it seeds (and again on
 * every reset), so the bench asks for them after each reset, as a login backend would know them:
 * `GET /srv/admin/v1/users?username=`, signed like any Admin call (docs/vendor-api.md#signing).
 */
export async function lookUpUserIds(
  sandboxUrl: string,
  usernames: readonly string[],
): Promise<Record<string, string>> {
  const c = DEFAULT_CREDENTIALS;
  const ids: Record<string, string> = {};
  for (const username of usernames) {
    const url = new URL('/srv/admin/v1/users', sandboxUrl);
    url.searchParams.set('username', username);
    const date = formatRfc2822(new Date());
    const authorization = signRequest(
      {
        date,
        method: 'GET',
        host: url.host,
        protocol: url.protocol,
        path: url.pathname,
        query: url.searchParams,
      },
      c.serviceId,
      c.adminApiKey,
    );
    const response = await fetch(url, {
      headers: { 'svc-date': date, authorization },
      signal: AbortSignal.timeout(30_000),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`GET ${url}: ${response.status} ${text.slice(0, 300)}`);
    const body = JSON.parse(text) as { users?: { username: string; user_id: string }[] };
    const id = body.users?.find((u) => u.username === username)?.user_id;
    if (id === undefined) throw new Error(`the sandbox has no demo user ${username}`);
    ids[username] = id;
  }
  return ids;
}
