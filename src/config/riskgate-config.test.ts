import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import {
  defaultWorkers,
  describeUnknownVariable,
  loadConfig,
  SECRET_VARIABLES,
  unknownVariables,
} from './riskgate-config.ts';

const UPSTREAM = {
  RISKGATE_API_KEYS: 'caller-key-0123456789,caller-key-abcdefghij',
  RISKGATE_SERVICE_ID: '7ef5fbc3-8a0d-4a44-8a5c-3b1f2a1e9c10',
  RISKGATE_SIGNALS_URL: 'https://signals.example.com/api/v1/',
  RISKGATE_AUTH_URL: 'https://auth.example.com',
  RISKGATE_CLIENT_ID: '3f1c9a52-7d4e-4b8a-9c21-5e6f7a8b9c0d',
  RISKGATE_CLIENT_SECRET: 'top-secret-value',
  RISKGATE_SIGNALS_AUDIENCE: 'riskgate-signals',
  RISKGATE_SIGNALS_IDP: 'vendor-idp',
  RISKGATE_ADMIN_URL: 'https://admin.example.com',
  RISKGATE_ADMIN_API_KEY: 'admin-secret-value',
};

function errorOf(fn: () => unknown): Error & { code?: string } {
  try {
    fn();
  } catch (error) {
    return error as Error & { code?: string };
  }
  throw new Error('expected a throw');
}

describe('loadConfig', () => {
  it('applies the documented defaults and sandbox mode when no upstream is configured', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 8080,
      sandboxPort: 4010,
      apiKeys: undefined,
      policyPath: 'policies/',
      deadlineMs: 300,
      decisionLog: { kind: 'stdout' },
      upstream: undefined,
      stateDir: '.riskgate/',
      signalsConnections: 128,
      adminConnections: 64,
      ratBatchWindowMs: 1,
      ratCacheMs: 5000,
    });
    expect(loadConfig({ RISKGATE_STATE_DIR: '/var/lib/riskgate' }).stateDir).toBe('/var/lib/riskgate');
  });

  it('listens on loopback on the sandbox and on every interface with a vendor, unless RISKGATE_HOST says', () => {
    expect(loadConfig({}).host).toBe('127.0.0.1');
    expect(loadConfig(UPSTREAM).host).toBe('0.0.0.0');
    expect(loadConfig({ ...UPSTREAM, RISKGATE_HOST: '10.1.2.3' }).host).toBe('10.1.2.3');
    expect(loadConfig({ RISKGATE_HOST: '::' }).host).toBe('::');
  });

  it('reads the ops port and ops keys, and refuses an ops port that is the main port', () => {
    expect(loadConfig({})).toMatchObject({ opsPort: undefined, opsKeys: undefined });
    expect(
      loadConfig({ RISKGATE_OPS_PORT: '9090', RISKGATE_OPS_KEYS: 'ops-key-0123456789abc' }),
    ).toMatchObject({
      opsPort: 9090,
      opsKeys: ['ops-key-0123456789abc'],
    });
    expect(errorOf(() => loadConfig({ RISKGATE_OPS_PORT: '8080' })).message).toBe(
      'RISKGATE_OPS_PORT must differ from RISKGATE_PORT (unset it to serve both on one port)',
    );
    expect(errorOf(() => loadConfig({ RISKGATE_OPS_PORT: 'x' })).message).toMatch(
      /^RISKGATE_OPS_PORT must be/,
    );
    expect(errorOf(() => loadConfig({ RISKGATE_OPS_KEYS: 'short' })).message).toMatch(
      /^RISKGATE_OPS_KEYS each key must be at least 16 characters/,
    );
  });

  it('reads named operator keys (name:role:key) beside plain ones, and names a bad entry without its key', () => {
    const keys = 'alice:viewer:alice-key-0123456789,bob:admin:bob-key-0123456789ab,plain-key-0123456789';
    expect(loadConfig({ RISKGATE_OPS_KEYS: keys }).opsKeys).toEqual(keys.split(','));
    const cases: [string, RegExp][] = [
      [
        'alice:viewer:short-key',
        /^RISKGATE_OPS_KEYS each key must be at least 16 characters \(the key of operator alice\)$/,
      ],
      ['al ice:viewer:alice-key-0123456789', /^RISKGATE_OPS_KEYS must not contain spaces/],
      ['al!ce:viewer:alice-key-0123456789', /^RISKGATE_OPS_KEYS an operator name must be 1-64 letters/],
      [
        'a:viewer:a-key-0123456789abcdef,a:admin:b-key-0123456789abcdef',
        /^RISKGATE_OPS_KEYS names operator a twice/,
      ],
      [
        'a:viewer:a-key-0123456789abcdef,b:admin:a-key-0123456789abcdef',
        /^RISKGATE_OPS_KEYS gives one key twice/,
      ],
    ];
    for (const [value, message] of cases) {
      const error = errorOf(() => loadConfig({ RISKGATE_OPS_KEYS: value }));
      expect(error.message, value).toMatch(message);
      expect(error.message).not.toMatch(/key-0123456789|short-key/);
    }
  });

  it('reads a trusted proxy and its identity header, and refuses a header believed from anywhere', () => {
    expect(loadConfig({}).trustedProxy).toBeUndefined();
    const sso = loadConfig({
      RISKGATE_TRUSTED_PROXIES: '10.0.0.0/8, 192.168.1.5',
      RISKGATE_TRUSTED_IDENTITY_HEADER: 'X-Forwarded-Email',
      RISKGATE_SSO_OPERATORS: 'Alice@example.com:analyst,bob@example.com:admin',
    }).trustedProxy!;
    expect(sso.proxies.map((p) => p.text)).toEqual(['10.0.0.0/8', '192.168.1.5/32']);
    expect(sso.identityHeader).toBe('x-forwarded-email');
    expect([...sso.operators!]).toEqual([
      ['alice@example.com', 'analyst'],
      ['bob@example.com', 'admin'],
    ]);
    const refused: [Record<string, string>, RegExp][] = [
      [
        { RISKGATE_TRUSTED_IDENTITY_HEADER: 'X-Email', RISKGATE_SSO_OPERATORS: 'a@b.c:viewer' },
        /^RISKGATE_TRUSTED_PROXIES is required/,
      ],
      [
        { RISKGATE_TRUSTED_PROXIES: '10.0.0.1', RISKGATE_TRUSTED_IDENTITY_HEADER: 'X-Email' },
        /^RISKGATE_SSO_OPERATORS is required/,
      ],
      [
        { RISKGATE_TRUSTED_PROXIES: '10.0.0.1', RISKGATE_SSO_OPERATORS: 'a@b.c:viewer' },
        /^RISKGATE_TRUSTED_IDENTITY_HEADER is required/,
      ],
      [
        { RISKGATE_TRUSTED_PROXIES: '10.0.0.300' },
        /^RISKGATE_TRUSTED_PROXIES lists "10.0.0.300", which is neither/,
      ],
      [
        {
          RISKGATE_TRUSTED_PROXIES: '10.0.0.1',
          RISKGATE_TRUSTED_IDENTITY_HEADER: 'Authorization',
          RISKGATE_SSO_OPERATORS: 'a@b.c:viewer',
        },
        /^RISKGATE_TRUSTED_IDENTITY_HEADER must not be/,
      ],
      [
        {
          RISKGATE_TRUSTED_PROXIES: '10.0.0.1',
          RISKGATE_TRUSTED_IDENTITY_HEADER: 'X-Email',
          RISKGATE_SSO_OPERATORS: 'a@b.c:root',
        },
        /^RISKGATE_SSO_OPERATORS entries are identity:role/,
      ],
    ];
    for (const [env, message] of refused) expect(errorOf(() => loadConfig(env)).message).toMatch(message);
  });

  it('keeps the ops port on loopback unless RISKGATE_OPS_HOST says, and refuses a network ops port without ops keys', () => {
    expect(loadConfig({ ...UPSTREAM, RISKGATE_OPS_PORT: '9090' })).toMatchObject({
      host: '0.0.0.0',
      opsHost: '127.0.0.1',
    });
    const open = errorOf(() =>
      loadConfig({ ...UPSTREAM, RISKGATE_OPS_PORT: '9090', RISKGATE_OPS_HOST: '0.0.0.0' }),
    );
    expect(open.code).toBe('RG_ERR_INVALID_CONFIG');
    expect(open.message).toMatch(
      /^RISKGATE_OPS_KEYS is required when the ops port listens beyond this machine/,
    );
    for (const host of ['::', '10.0.0.7', 'ops.internal']) {
      expect(() => loadConfig({ RISKGATE_OPS_PORT: '9090', RISKGATE_OPS_HOST: host }), host).toThrow(
        /RISKGATE_OPS_KEYS is required/,
      );
    }
    for (const host of ['127.0.0.1', '127.0.0.2', '::1', '[::1]', 'localhost']) {
      expect(loadConfig({ RISKGATE_OPS_PORT: '9090', RISKGATE_OPS_HOST: host }).opsHost, host).toBe(host);
    }
    expect(
      loadConfig({
        RISKGATE_OPS_PORT: '9090',
        RISKGATE_OPS_HOST: '0.0.0.0',
        RISKGATE_OPS_KEYS: 'ops-key-0123456789abc',
      }).opsHost,
    ).toBe('0.0.0.0');
  });

  it('sizes the upstream connection pools from the environment, within bounds', () => {
    const config = loadConfig({ RISKGATE_SIGNALS_CONNECTIONS: '256', RISKGATE_ADMIN_CONNECTIONS: '16' });
    expect(config).toMatchObject({ signalsConnections: 256, adminConnections: 16 });
    expect(errorOf(() => loadConfig({ RISKGATE_SIGNALS_CONNECTIONS: '0' })).message).toMatch(
      /^RISKGATE_SIGNALS_CONNECTIONS /,
    );
    expect(errorOf(() => loadConfig({ RISKGATE_ADMIN_CONNECTIONS: 'many' })).message).toMatch(
      /^RISKGATE_ADMIN_CONNECTIONS /,
    );
  });

  it('tunes remote-access-tool batching and its answer cache from the environment, within bounds', () => {
    const config = loadConfig({ RISKGATE_RAT_BATCH_WINDOW_MS: '7.5', RISKGATE_RAT_CACHE_MS: '0' });
    expect(config).toMatchObject({ ratBatchWindowMs: 7.5, ratCacheMs: 0 });
    expect(errorOf(() => loadConfig({ RISKGATE_RAT_BATCH_WINDOW_MS: '51' })).message).toMatch(
      /^RISKGATE_RAT_BATCH_WINDOW_MS /,
    );
    expect(errorOf(() => loadConfig({ RISKGATE_RAT_CACHE_MS: '-1' })).message).toMatch(
      /^RISKGATE_RAT_CACHE_MS /,
    );
  });

  it('reads a full upstream configuration and trims trailing slashes of URLs', () => {
    const config = loadConfig({ ...UPSTREAM, RISKGATE_DECISION_LOG: '/var/log/decisions.ndjson' });
    expect(config.apiKeys).toEqual(['caller-key-0123456789', 'caller-key-abcdefghij']);
    expect(config.upstream?.signalsUrl).toBe('https://signals.example.com/api/v1');
    expect(config.upstream?.logsUrl).toBeUndefined();
    expect(config.decisionLog).toEqual({ kind: 'file', path: '/var/log/decisions.ndjson' });
  });

  it('names a missing upstream variable', () => {
    const { RISKGATE_ADMIN_API_KEY: _, ...env } = UPSTREAM;
    const error = errorOf(() => loadConfig(env));
    expect(error.code).toBe('RG_ERR_INVALID_CONFIG');
    expect(error.message).toBe('RISKGATE_ADMIN_API_KEY is required');
  });

  it('says a missing or empty URL is required, not that it is a malformed URL', () => {
    const { RISKGATE_AUTH_URL: _, ...env } = UPSTREAM;
    expect(errorOf(() => loadConfig(env)).message).toBe('RISKGATE_AUTH_URL is required');
    // riskgate.env.example ships the vendor's variables uncommented and empty, to be filled in.
    expect(errorOf(() => loadConfig({ ...UPSTREAM, RISKGATE_AUTH_URL: '' })).message).toBe(
      'RISKGATE_AUTH_URL is required (it is set, but empty)',
    );
    expect(errorOf(() => loadConfig({ ...UPSTREAM, RISKGATE_SERVICE_ID: ' ' })).message).toBe(
      'RISKGATE_SERVICE_ID is required (it is set, but empty)',
    );
  });

  it('refuses a value that carries an env-file comment (docker --env-file keeps it in the value)', () => {
    const url = errorOf(() =>
      loadConfig({ ...UPSTREAM, RISKGATE_AUTH_URL: 'https://auth.example.com   # token issuer base' }),
    );
    expect(url.message).toMatch(/^RISKGATE_AUTH_URL must not contain spaces or a #/);
    const keys = errorOf(() =>
      loadConfig({ ...UPSTREAM, RISKGATE_API_KEYS: 'caller-key-0123456789   # comma-separated keys' }),
    );
    expect(keys.message).toMatch(/^RISKGATE_API_KEYS must not contain spaces or a #/);
    expect(keys.message).not.toContain('caller-key-0123456789');
  });

  it('names a malformed value without echoing it', () => {
    const error = errorOf(() => loadConfig({ ...UPSTREAM, RISKGATE_AUTH_URL: 'ftp://secret-host' }));
    expect(error.message).toMatch(/^RISKGATE_AUTH_URL /);
    expect(error.message).not.toContain('secret-host');
    expect(errorOf(() => loadConfig({ RISKGATE_DEADLINE_MS: 'soon' })).message).toMatch(
      /^RISKGATE_DEADLINE_MS /,
    );
    expect(errorOf(() => loadConfig({ RISKGATE_PORT: '70000' })).message).toMatch(/^RISKGATE_PORT /);
  });

  it('refuses a half-configured vendor instead of silently using the sandbox', () => {
    const error = errorOf(() => loadConfig({ RISKGATE_ADMIN_URL: 'https://admin.example.com' }));
    expect(error.message).toBe('RISKGATE_SIGNALS_URL is required when RISKGATE_ADMIN_URL is set');
  });

  it('requires caller keys against a real upstream', () => {
    const { RISKGATE_API_KEYS: _, ...env } = UPSTREAM;
    expect(errorOf(() => loadConfig(env)).message).toBe(
      'RISKGATE_API_KEYS is required when an upstream is configured',
    );
  });

  it('refuses short caller keys', () => {
    expect(errorOf(() => loadConfig({ RISKGATE_API_KEYS: 'short' })).message).toMatch(/^RISKGATE_API_KEYS/);
  });

  it('reads secrets from _FILE variables and drops the trailing newline', () => {
    const files: Record<string, string> = { '/run/secrets/admin': 'admin-from-file\n' };
    const { RISKGATE_ADMIN_API_KEY: _, ...env } = UPSTREAM;
    const config = loadConfig({ ...env, RISKGATE_ADMIN_API_KEY_FILE: '/run/secrets/admin' }, (p) => {
      const content = files[p];
      if (content === undefined) throw Object.assign(new Error('nope'), { code: 'ENOENT' });
      return content;
    });
    expect(config.upstream?.adminApiKey).toBe('admin-from-file');
  });

  it('names an unreadable secret file and refuses a secret given twice', () => {
    const missing = errorOf(() => loadConfig({ RISKGATE_API_KEYS_FILE: '/does/not/exist' }));
    expect(missing.message).toBe('RISKGATE_API_KEYS_FILE: cannot read /does/not/exist (ENOENT)');
    const twice = errorOf(() =>
      loadConfig({ ...UPSTREAM, RISKGATE_CLIENT_SECRET_FILE: '/x' }, () => 'from-file'),
    );
    expect(twice.message).toBe(
      'RISKGATE_CLIENT_SECRET and RISKGATE_CLIENT_SECRET_FILE are both set; set only one',
    );
  });

  it('needs the identity provider unless the audience is already the scope URN', () => {
    const { RISKGATE_SIGNALS_IDP: _, ...env } = UPSTREAM;
    expect(errorOf(() => loadConfig(env)).message).toMatch(/^RISKGATE_SIGNALS_IDP is required unless/);
    const urn = 'urn:vendor-idp:iam:org:project:id:riskgate-signals:aud';
    expect(loadConfig({ ...env, RISKGATE_SIGNALS_AUDIENCE: urn }).upstream?.signalsAudience).toBe(urn);
  });

  it('requires the Log API URL and key together', () => {
    const error = errorOf(() => loadConfig({ ...UPSTREAM, RISKGATE_LOG_API_KEY: 'log-key' }));
    expect(error.message).toBe('RISKGATE_LOGS_URL is required when RISKGATE_LOG_API_KEY is set');
  });

  describe('refuses state shared in part, naming both variables and neither value', () => {
    const REDIS = 'redis://:redis-password@redis.example.com:6379';
    const POSTGRES = 'postgres://riskgate:pg-password@db.example.com:5432/riskgate';

    it('counters and the follower lease on Redis with the embedded database (the file or memory)', () => {
      for (const database of [{}, { RISKGATE_DATABASE: 'sqlite' }, { RISKGATE_DATABASE: 'memory' }]) {
        const error = errorOf(() => loadConfig({ ...UPSTREAM, RISKGATE_FEATURE_STORE: REDIS, ...database }));
        expect(error.code).toBe('RG_ERR_INVALID_CONFIG');
        expect(error.message).toMatch(
          /^RISKGATE_FEATURE_STORE keeps velocity counters and the Log API follower's lease on Redis/,
        );
        expect(error.message).toContain('RISKGATE_DATABASE');
        expect(error.message).not.toContain('redis-password');
      }
    });

    it('a shared PostgreSQL with counters left in memory by default', () => {
      const error = errorOf(() => loadConfig({ ...UPSTREAM, RISKGATE_DATABASE: POSTGRES }));
      expect(error.code).toBe('RG_ERR_INVALID_CONFIG');
      expect(error.message).toMatch(
        /^RISKGATE_DATABASE is PostgreSQL, shared by replicas, but RISKGATE_FEATURE_STORE is unset/,
      );
      expect(error.message).not.toContain('pg-password');
    });

    it('accepts all shared, all its own, and one riskgate on PostgreSQL with counters in memory said so', () => {
      const shared = loadConfig({ ...UPSTREAM, RISKGATE_DATABASE: POSTGRES, RISKGATE_FEATURE_STORE: REDIS });
      expect(shared).toMatchObject({ database: { kind: 'postgres' }, featureStore: { kind: 'redis' } });
      expect(loadConfig(UPSTREAM)).toMatchObject({
        database: { kind: 'sqlite' },
        featureStore: { kind: 'memory' },
      });
      const alone = loadConfig({
        ...UPSTREAM,
        RISKGATE_DATABASE: POSTGRES,
        RISKGATE_FEATURE_STORE: 'memory',
      });
      expect(alone).toMatchObject({ database: { kind: 'postgres' }, featureStore: { kind: 'memory' } });
    });
  });
});

describe('RISKGATE_WORKERS default', () => {
  it('is one process on 2 CPUs or fewer, one per CPU above', () => {
    expect([1, 2, 3, 4, 16].map(defaultWorkers)).toEqual([1, 1, 3, 4, 16]);
  });

  it("is this host's choice when unset", () => {
    expect(loadConfig({}).workers).toBe(defaultWorkers(availableParallelism()));
  });
});

describe('unknownVariables', () => {
  it('names each RISKGATE_ variable riskgate does not read, with the one it most resembles', () => {
    const unknown = unknownVariables({
      ...UPSTREAM,
      RISKGATE_PORTT: '8081',
      RISKGATE_AUTH_ULR: 'https://auth.example.com',
      RISKGATE_FLUX_CAPACITOR: 'on',
      PATH: '/usr/bin',
    });
    expect(unknown).toEqual([
      { name: 'RISKGATE_AUTH_ULR', suggestion: 'RISKGATE_AUTH_URL' },
      { name: 'RISKGATE_FLUX_CAPACITOR', suggestion: undefined },
      { name: 'RISKGATE_PORTT', suggestion: 'RISKGATE_PORT' },
    ]);
    expect(describeUnknownVariable(unknown[2]!)).toBe(
      'RISKGATE_PORTT is not a riskgate variable, ignored (did you mean RISKGATE_PORT?)',
    );
  });

  it('knows the secrets read from files and the worker index the primary sets', () => {
    expect(
      unknownVariables({ RISKGATE_API_KEYS_FILE: '/run/secrets/keys', RISKGATE_WORKER_INDEX: '2' }),
    ).toEqual([]);
  });

  it('refuses the memory outbox beside a PostgreSQL database, naming both variables and neither value', () => {
    const url = 'postgres://riskgate:pg-password-value@db.example.com/riskgate';
    const message = errorOf(() =>
      loadConfig({ RISKGATE_DATABASE: url, RISKGATE_FEATURE_STORE: 'memory', RISKGATE_OUTBOX: 'memory' }),
    ).message;
    expect(message).toMatch(/^RISKGATE_OUTBOX=memory .*RISKGATE_DATABASE is PostgreSQL/);
    expect(message).not.toContain('pg-password-value');
    expect(loadConfig({ RISKGATE_DATABASE: url, RISKGATE_FEATURE_STORE: 'memory' }).outbox).toEqual({
      kind: 'database',
    });
    expect(loadConfig({ RISKGATE_OUTBOX: 'memory' }).outbox).toEqual({ kind: 'memory' });
  });

  it("never echoes a secret variable's value in a message, whatever is wrong with it", () => {
    expect(SECRET_VARIABLES.length).toBeGreaterThan(10);
    for (const name of SECRET_VARIABLES) {
      for (const value of ['QzSecretValue', 'QzSecretValue short #', 'QzSecretValue:with:colons']) {
        let message = '';
        try {
          loadConfig({
            ...UPSTREAM,
            RISKGATE_LOGS_URL: 'https://logs.example.com',
            RISKGATE_LOG_API_KEY: 'k',
            [name]: value,
          });
        } catch (error) {
          message = (error as Error).message;
        }
        expect(message, name).not.toContain('QzSecretValue');
      }
    }
  });
});
