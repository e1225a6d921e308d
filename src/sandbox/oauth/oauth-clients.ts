import type { SandboxCredentials } from '../sandbox-config.ts';

/** The permission scope a Retrieval token carries (docs/vendor-api.md#oauth-token). */
export const SIGNALS_READ_SCOPE = 'signals:read';
/** The permission scope a Collection token carries (docs/vendor-api.md#collections). */
export const OBSERVATIONS_WRITE_SCOPE = 'observations:write';

/** One provisioned OAuth client. */
export interface OAuthClient {
  kind: 'retrieval' | 'collection';
  clientId: string;
  clientSecret: string;
  audience: string;
  /** The scope written into its tokens' `scope` claim. */
  permission: string;
}

/** The two clients of the integration: Retrieval (signals) and Collection (observations). */
export function oauthClientsOf(credentials: SandboxCredentials): OAuthClient[] {
  return [
    {
      kind: 'retrieval',
      clientId: credentials.retrievalClientId,
      clientSecret: credentials.retrievalClientSecret,
      audience: credentials.signalsAudience,
      permission: SIGNALS_READ_SCOPE,
    },
    {
      kind: 'collection',
      clientId: credentials.collectionClientId,
      clientSecret: credentials.collectionClientSecret,
      audience: credentials.collectionAudience,
      permission: OBSERVATIONS_WRITE_SCOPE,
    },
  ];
}
