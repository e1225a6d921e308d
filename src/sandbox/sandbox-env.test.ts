import { describe, expect, it } from 'vitest';
import { InputError } from '../errors/riskgate-error.ts';
import { sandboxOptionsFromEnv } from './sandbox-env.ts';

describe('sandboxOptionsFromEnv', () => {
  it('defaults to 127.0.0.1:4010 with nothing overridden', () => {
    expect(sandboxOptionsFromEnv({})).toEqual({ port: 4010, host: '127.0.0.1' });
  });

  it('reads credentials, thresholds, lifetime, scenario and faults', () => {
    const o = sandboxOptionsFromEnv({
      SANDBOX_PORT: '0',
      SANDBOX_HOST: '0.0.0.0',
      SANDBOX_ADMIN_API_KEY: 'k',
      SANDBOX_SERVICE_ID: '11111111-2222-4333-8444-555555555555',
      SANDBOX_GEOVELOCITY_THRESHOLD_KMH: '800.5',
      SANDBOX_RAT_MIN_PRIOR_SESSIONS: '5',
      SANDBOX_TOKEN_LIFETIME_SECONDS: '5',
      SANDBOX_SCENARIO: '/tmp/s.yaml',
      SANDBOX_FAULTS: '[{"route":"*","errorRate":0.1}]',
    });
    expect(o).toEqual({
      port: 0,
      host: '0.0.0.0',
      credentials: { adminApiKey: 'k', serviceId: '11111111-2222-4333-8444-555555555555' },
      thresholds: { geovelocityThresholdKmh: 800.5, ratMinPriorSessions: 5 },
      tokenLifetimeSeconds: 5,
      scenario: '/tmp/s.yaml',
      faults: [{ route: '*', errorRate: 0.1 }],
    });
    expect(sandboxOptionsFromEnv({ SANDBOX_FAULTS: '{"rules":[{"route":"*","hang":true}]}' }).faults).toEqual(
      [{ route: '*', hang: true }],
    );
  });

  it.each([
    ['SANDBOX_PORT', '70000'],
    ['SANDBOX_TOKEN_LIFETIME_SECONDS', '0'],
    ['SANDBOX_SERVICE_ID', 'not-a-uuid'],
    ['SANDBOX_RAT_MIN_MOUSE_EVENTS', 'many'],
    ['SANDBOX_FAULTS', '{'],
    ['SANDBOX_FAULTS', '[{"route":"*","errorRate":3}]'],
  ])('refuses %s=%s with an error naming the variable', (name, value) => {
    let error: unknown;
    try {
      sandboxOptionsFromEnv({ [name]: value });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(InputError);
    expect((error as InputError).message.startsWith(name)).toBe(true);
  });
});
