import type { AdminClient } from '../admin/admin-client.ts';
import type { SignalFetcher } from '../policy/inputs/input-row.ts';
import type { CompiledPolicy, PolicyAction, PolicySignalName } from '../policy/policy-types.ts';
import type { SignalsClient } from '../signals/signals-client.ts';

/**
 * What the decision service needs from the upstream clients and the policy engine, and nothing
 * more. The composition root (src/service/vendor-clients.ts) binds them to the real clients; tests bind them to the same real clients
 * against the sandbox.
 */

export type { SignalFetcher };

/** The Trust Signals client, as /decide uses it: one method per signal, named as the policy names them. */
export type SignalsPort = Pick<SignalsClient, PolicySignalName>;

/** The fetcher of `client`'s signals, each by the policy's name. */
export function signalFetcher(client: SignalsPort): SignalFetcher {
  return ((name, query, options) =>
    (client[name] as (q: unknown, o: unknown) => Promise<unknown>)(query, options)) as SignalFetcher;
}

/**
 * The Admin API calls /decide and its actions make: reads through the client's short-lived cache
 * (a burst of logins of one user costs one read), writes direct (they drop that user's cached
 * reads). A 304 and a 410 on a write are outcomes, not errors.
 */
export type AdminPort = Pick<
  AdminClient,
  'getUserCached' | 'getUserDevicesCached' | 'updateUser' | 'deleteDevice' | 'createOneTimeCode'
>;

/** The active policy; hot reload swaps what `current()` returns. */
export interface PolicySource {
  current(): CompiledPolicy;
}

/* "Was this you?" (src/ask-user/, docs/ask-user.md): what a decision asks for, and what it gets. */

/** What a link asks about: a challenged or denied login of a known user. */
export interface AskUserQuestion {
  decisionId: string;
  accountId: string;
  userId: string;
  verdict: 'challenge' | 'deny';
  /** The policy's `askUser.onNo` lock-outs, as they stand now. */
  onNo: readonly PolicyAction[];
}

/** The link an event carries: where the user answers, and until when. */
export interface AskUserLink {
  url: string;
  /** RFC 3339. */
  expiresAt: string;
}

export interface AskUserLinks {
  /** Stores the question and gives its link; rejects when the control database does not take it. */
  ask(question: AskUserQuestion): Promise<AskUserLink>;
}
