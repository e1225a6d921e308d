import type { AskUserLinks } from '../decide/decide-ports.ts';
import type { Clock } from '../timing/clock.ts';
import type { AskUserStore } from './ask-user-store.ts';
import type { TokenCodec } from './ask-user-token.ts';

/**
 * Making a "was this you?" link (docs/ask-user.md): a row in the control database holding what it
 * asks about and what a "no" does, and a token that names the row and nothing else. The port
 * decisions use (`AskUserLinks`) is src/decide/decide-ports.ts's.
 */

export type { AskUserLinks };

/** The path of the public page, before the token (the route: src/ask-user/ask-user-routes.ts). */
export const ASK_USER_PATH = '/ask-user';

export function askUserLinks(o: {
  store: AskUserStore;
  codec: TokenCodec;
  /** Public base URL of the caller surface (RISKGATE_ASK_USER_BASE_URL), no trailing slash. */
  baseUrl: string;
  /** How long a link can be answered, milliseconds (RISKGATE_ASK_USER_TTL_MS). */
  ttlMs: number;
  clock: Clock;
}): AskUserLinks {
  return {
    async ask(q) {
      const { token, key } = o.codec.issue();
      const nowMs = o.clock.nowMs();
      const expiresMs = nowMs + o.ttlMs;
      await o.store.add({
        tokenKey: key,
        decisionId: q.decisionId,
        accountId: q.accountId,
        userId: q.userId,
        verdict: q.verdict,
        onNo: q.onNo.map((a) => ({
          name: a.name ?? a.source,
          ...(a.durationMs !== undefined && { durationMs: a.durationMs }),
          ...(a.escalateWithinMs !== undefined && { escalateWithinMs: a.escalateWithinMs }),
        })),
        createdMs: nowMs,
        expiresMs,
        answeredMs: null,
        answer: null,
      });
      return { url: `${o.baseUrl}${ASK_USER_PATH}/${token}`, expiresAt: new Date(expiresMs).toISOString() };
    },
  };
}
