/**
 * Well-known sandbox credentials and tunables. Every module of the sandbox reads them from here;
 * `src/dev/sandbox-main.ts` overrides them from the environment (names in docs/sandbox.md, "Credentials").
 */
export interface SandboxCredentials {
  serviceId: string;
  organizationId: string;
  adminApiKey: string;
  serviceLogApiKey: string;
  organizationLogApiKey: string;
  callbackSignatureKey: string;
  retrievalClientId: string;
  retrievalClientSecret: string;
  collectionClientId: string;
  collectionClientSecret: string;
  /** Audience of Retrieval tokens. */
  signalsAudience: string;
  /** Audience of Collection tokens. */
  collectionAudience: string;
  /** The `<idp>` in `urn:<idp>:iam:org:project:id:<audience>:aud`. */
  idp: string;
}

export const DEFAULT_CREDENTIALS: SandboxCredentials = {
  serviceId: '7ef5fbc3-8a0d-4a44-8a5c-3b1f2a1e9c10',
  organizationId: '0d7c4a8e-2b1f-4c39-9e55-6a1b2c3d4e5f',
  adminApiKey: 'sandbox-admin-key',
  serviceLogApiKey: 'sandbox-service-log-key',
  organizationLogApiKey: 'sandbox-org-log-key',
  callbackSignatureKey: 'sandbox-callback-key',
  retrievalClientId: '3f1c9a52-7d4e-4b8a-9c21-5e6f7a8b9c0d',
  retrievalClientSecret: 'sandbox-retrieval-secret',
  collectionClientId: '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d',
  collectionClientSecret: 'sandbox-collection-secret',
  signalsAudience: 'riskgate-signals',
  collectionAudience: 'riskgate-collection',
  idp: 'sandbox',
};

/** The signal thresholds the sandbox makes configurable (docs/vendor-api.md#signal-thresholds). */
export interface SignalThresholds {
  /** Geovelocity plausibility threshold, km/h (strict `>`). Default 1000. */
  geovelocityThresholdKmh: number;
  /** Remote access tool: minimum mouse events in the session. Default 20. */
  ratMinMouseEvents: number;
  /** Remote access tool: minimum keystroke events in the session. Default 10. */
  ratMinKeystrokeEvents: number;
  /** Remote access tool: minimum prior sessions (same user and platform). Default 3. */
  ratMinPriorSessions: number;
  /** Batch remote access tool lookback, days. Default 31. */
  ratBatchLookbackDays: number;
}

export const DEFAULT_THRESHOLDS: SignalThresholds = {
  geovelocityThresholdKmh: 1000,
  ratMinMouseEvents: 20,
  ratMinKeystrokeEvents: 10,
  ratMinPriorSessions: 3,
  ratBatchLookbackDays: 31,
};

/** Everything a sandbox instance is built from. */
export interface SandboxConfig {
  credentials: SandboxCredentials;
  thresholds: SignalThresholds;
  /**
   * Access token lifetime, seconds (docs/vendor-api.md#oauth-token: default 43200; `expires_in` is
   * this minus 1).
   */
  tokenLifetimeSeconds: number;
  /** Accepted clock skew of HMAC dates, seconds (docs/vendor-api.md#signing: 300). */
  hmacSkewSeconds: number;
}

/** A clock the sandbox reads instead of `Date.now()`, so tests can move time. Milliseconds. */
export interface SandboxClock {
  now(): number;
}
