import { describe, expect, it } from 'vitest';
import { loadConfig } from '../config/riskgate-config.ts';

/** RISKGATE_WEBHOOK_*: what riskgate takes, what it refuses, and that a refusal never echoes a secret. */

const URL_WITH_TOKEN = 'https://hooks.example.com/riskgate?token=receiver-token-123';
const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

function messageOf(env: Record<string, string>, readFile?: (path: string) => string): string {
  try {
    loadConfig(env, readFile);
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error('expected a refusal');
}

describe('the webhook configuration', () => {
  it('is off by default', () => {
    expect(loadConfig({}).webhooks).toBeUndefined();
  });

  it('takes receivers, rotating secrets, events, a timeout and a retry budget', () => {
    const config = loadConfig({
      RISKGATE_WEBHOOK_URLS: `${URL_WITH_TOKEN}, http://127.0.0.1:9000/hook`,
      RISKGATE_WEBHOOK_SECRET: `${SECRET},an-older-plain-secret-of-32-characters`,
      RISKGATE_WEBHOOK_EVENTS: 'lockout.created,decision.denied',
      RISKGATE_WEBHOOK_TIMEOUT_MS: '2500',
      RISKGATE_WEBHOOK_RETRY_HORIZON_SECONDS: '600',
    });
    expect(config.webhooks).toEqual({
      urls: [URL_WITH_TOKEN, 'http://127.0.0.1:9000/hook'],
      secrets: [SECRET, 'an-older-plain-secret-of-32-characters'],
      events: ['lockout.created', 'decision.denied'],
      timeoutMs: 2500,
      retryHorizonMs: 600_000,
    });
  });

  it('sends lock-outs and list changes unless told otherwise', () => {
    const config = loadConfig({ RISKGATE_WEBHOOK_URLS: URL_WITH_TOKEN, RISKGATE_WEBHOOK_SECRET: SECRET });
    expect(config.webhooks?.events).toEqual([
      'lockout.created',
      'lockout.ended',
      'list.entry_added',
      'list.entry_removed',
    ]);
    expect(config.webhooks?.timeoutMs).toBe(5000);
    // One refused event holds its stream an hour at most, not the outbox's day.
    expect(config.webhooks?.retryHorizonMs).toBe(3_600_000);
  });

  it('reads the secret and the URLs from files (_FILE)', () => {
    const files: Record<string, string> = { '/s': `${SECRET}\n`, '/u': `${URL_WITH_TOKEN}\n` };
    const config = loadConfig(
      { RISKGATE_WEBHOOK_URLS_FILE: '/u', RISKGATE_WEBHOOK_SECRET_FILE: '/s' },
      (path) => files[path]!,
    );
    expect(config.webhooks).toMatchObject({ urls: [URL_WITH_TOKEN], secrets: [SECRET] });
  });

  it.each([
    [{ RISKGATE_WEBHOOK_URLS: URL_WITH_TOKEN }, 'RISKGATE_WEBHOOK_SECRET is required'],
    [{ RISKGATE_WEBHOOK_SECRET: SECRET }, 'RISKGATE_WEBHOOK_URLS is required'],
    [{ RISKGATE_WEBHOOK_URLS: 'ftp://hooks.example.com', RISKGATE_WEBHOOK_SECRET: SECRET }, 'http(s) URLs'],
    [
      { RISKGATE_WEBHOOK_URLS: URL_WITH_TOKEN, RISKGATE_WEBHOOK_SECRET: 'short-secret-receiver-token-123' },
      'at least 32 characters',
    ],
    [
      {
        RISKGATE_WEBHOOK_URLS: URL_WITH_TOKEN,
        RISKGATE_WEBHOOK_SECRET: 'whsec_b25seS1uaW5ldGVlbi1ieXRlcw==',
      },
      'at least 24 bytes',
    ],
    [
      {
        RISKGATE_WEBHOOK_URLS: URL_WITH_TOKEN,
        RISKGATE_WEBHOOK_SECRET: SECRET,
        RISKGATE_WEBHOOK_EVENTS: 'lockout.made',
      },
      'must list event types of',
    ],
    [
      {
        RISKGATE_WEBHOOK_URLS: URL_WITH_TOKEN,
        RISKGATE_WEBHOOK_SECRET: SECRET,
        RISKGATE_WEBHOOK_TIMEOUT_MS: '60000',
      },
      'from 100 to 30000',
    ],
  ])('refuses %j, naming the variable and never a secret', (env, expected) => {
    const message = messageOf(env);
    expect(message).toContain(expected);
    expect(message).toMatch(/RISKGATE_WEBHOOK_/);
    for (const secret of ['receiver-token-123', SECRET.slice(6), 'b25seS'])
      expect(message).not.toContain(secret);
  });
});
