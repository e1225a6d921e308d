import { describe, expect, it } from 'vitest';
import type { AdminDevice, AdminUser } from '../src/admin/admin-schemas.ts';
import { compilePolicy } from '../src/policy/policy-compiler.ts';
import type { PolicyInput, SignalOutcome } from '../src/policy/policy-types.ts';
import { compileTestPolicy, down, newBrowser, rat } from './support/test-policy.ts';

const NOW = new Date('2026-11-20T12:00:00Z');

const compile = (body: string) => compileTestPolicy(body, { now: NOW });

const USER: AdminUser = {
  user_id: 'u1',
  username: 'alice',
  allowed_factors: ['approve', 'passcode'],
  failed_attempts: 0,
  max_attempts: 15,
  service_defined_username: true,
  status: 'enabled',
  created_at: 1,
  updated_at: 1,
};

function device(over: Partial<AdminDevice> = {}): AdminDevice {
  return {
    device_id: 'd1',
    user_id: 'u1',
    capabilities: ['approve'],
    display_name: 'Phone',
    enrolled: true,
    enrolled_at: 1,
    created_at: 1,
    updated_at: 1,
    type: 'ios',
    ...over,
  };
}

/**
 * A login whose password the backend checked (`firstFactor: passed`, so a lock-out is taken)
 * unless `over.request` says otherwise (`firstFactor: undefined`: not said).
 */
function input(over: Partial<PolicyInput> = {}): PolicyInput {
  const request = over.request ?? { accountId: 'alice', ip: '203.0.113.7', platform: 'browser', context: {} };
  return {
    signals: {},
    user: USER,
    devices: [device()],
    now: NOW,
    ...over,
    request: { firstFactor: 'passed', ...request },
  };
}

const THRESHOLDS = 'thresholds: { challenge: 40, deny: 80 }\n';

describe('scoring and verdicts', () => {
  const p = compile(`${THRESHOLDS}rules:
  - { id: a, description: a, when: 'request.context.a == true', score: 30 }
  - { id: b, description: b, when: 'request.context.b == true', score: 10 }
  - { id: c, description: c, when: 'request.context.c == true', score: 45 }
  - { id: minus, description: m, when: 'request.context.minus == true', score: -15 }
`);
  const ctx = (c: Record<string, boolean>) =>
    input({ request: { accountId: 'alice', context: { a: false, b: false, c: false, minus: false, ...c } } });

  it('sums the scores of matched rules and reports each', () => {
    const d = p.evaluate(ctx({ a: true, b: true }));
    expect(d).toMatchObject({ verdict: 'challenge', score: 40, decidedBy: 'score' });
    expect(d.matchedRules.map((r) => [r.id, r.score])).toEqual([
      ['a', 30],
      ['b', 10],
    ]);
  });

  it('allows just under the challenge threshold and denies at the deny threshold', () => {
    expect(p.evaluate(ctx({ a: true })).verdict).toBe('allow');
    expect(p.evaluate(ctx({ a: true, c: true }))).toMatchObject({ score: 75, verdict: 'challenge' });
    expect(p.evaluate(ctx({ a: true, c: true, b: true }))).toMatchObject({ score: 85, verdict: 'deny' });
  });

  it('lets a negative score lower the total', () => {
    const d = p.evaluate(ctx({ a: true, b: true, minus: true }));
    expect(d).toMatchObject({ score: 25, verdict: 'allow' });
  });

  it('reports thresholds and the policy name and revision in every decision', () => {
    const d = p.evaluate(ctx({}));
    expect(d.thresholds).toEqual({ challenge: 40, deny: 80 });
    expect(d.policy).toEqual({ name: 't', revision: p.revision });
    expect(p.revision).toMatch(/^[0-9a-f]{16}$/);
  });
});

describe('the verdict exactly at each threshold', () => {
  const p = compile(`${THRESHOLDS}rules:
  - { id: s, description: s, when: 'true', score: 0 }
  - { id: x, description: x, when: 'request.context.n > 0', score: 40 }
  - { id: y, description: y, when: 'request.context.n > 1', score: 40 }
  - { id: z, description: z, when: 'request.context.n > 2', score: -1 }
`);
  const n = (k: number) => p.evaluate(input({ request: { accountId: 'a', context: { n: k } } }));
  it('challenges at exactly 40 and denies at exactly 80, and not at 79', () => {
    expect([n(1).score, n(1).verdict]).toEqual([40, 'challenge']);
    expect([n(2).score, n(2).verdict]).toEqual([80, 'deny']);
    expect([n(3).score, n(3).verdict]).toEqual([79, 'challenge']);
    expect([n(0).score, n(0).verdict]).toEqual([0, 'allow']);
  });
});

describe('hard verdicts', () => {
  const p = compile(`${THRESHOLDS}rules:
  - { id: high, description: h, when: 'request.context.high == true', score: 100 }
  - { id: hard-allow, description: h, when: 'request.context.allow == true', verdict: allow }
  - { id: hard-challenge, description: h, when: 'request.context.challenge == true', verdict: challenge }
  - { id: hard-deny, description: h, when: 'request.context.deny == true', verdict: deny }
`);
  const ctx = (c: Record<string, boolean>) =>
    input({
      request: {
        accountId: 'alice',
        context: { high: false, allow: false, challenge: false, deny: false, ...c },
      },
    });

  it('a hard verdict overrides the score, in either direction', () => {
    expect(p.evaluate(ctx({ high: true, challenge: true }))).toMatchObject({
      verdict: 'challenge',
      score: 100,
      decidedBy: 'verdict',
    });
    expect(p.evaluate(ctx({ high: true, allow: true })).verdict).toBe('allow');
  });

  it('deny beats challenge beats allow among hard verdicts', () => {
    expect(p.evaluate(ctx({ allow: true, challenge: true, deny: true })).verdict).toBe('deny');
    expect(p.evaluate(ctx({ allow: true, challenge: true })).verdict).toBe('challenge');
    expect(p.evaluate(ctx({ allow: true })).verdict).toBe('allow');
  });

  it('reports the verdict of hard rules in the explanation', () => {
    const d = p.evaluate(ctx({ deny: true }));
    expect(d.matchedRules).toEqual([{ id: 'hard-deny', description: 'h', verdict: 'deny' }]);
  });
});

describe('unavailable signals', () => {
  const p = compile(`${THRESHOLDS}signals:
  remoteAccessTool: { onUnavailable: { score: 40 } }
  newBrowser: { onUnavailable: { verdict: deny } }
  geovelocity: { onUnavailable: ignore }
rules:
  - { id: rat, description: r, when: signals.remoteAccessTool.anomaly, verdict: deny }
  - { id: nb, description: n, when: '!signals.newBrowser.known', score: 40 }
  - { id: geo, description: g, when: signals.geovelocity.anomaly, score: 60 }
  - id: rat-aware
    description: tests availability itself
    when: '!signals.remoteAccessTool.available && "highValue" in request.context && request.context.highValue == true'
    score: 50
`);
  const ok = { remoteAccessTool: rat(false, 0.1), newBrowser: newBrowser(true) };

  it('applies onUnavailable score, verdict and ignore, and explains each', () => {
    const d = p.evaluate(
      input({
        signals: { remoteAccessTool: down('timeout'), newBrowser: newBrowser(true), geovelocity: down('x') },
      }),
    );
    expect(d.score).toBe(40);
    expect(d.verdict).toBe('challenge');
    expect(d.unavailable).toEqual([
      { signal: 'remoteAccessTool', reason: 'timeout', treatment: 'score:40' },
      { signal: 'geovelocity', reason: 'x', treatment: 'ignore' },
    ]);
    const d2 = p.evaluate(input({ signals: { ...ok, newBrowser: down('RG_ERR_UPSTREAM_SERVER_ERROR') } }));
    // A deny on missing evidence is capped at the degraded verdict (challenge by default).
    expect(d2).toMatchObject({
      verdict: 'challenge',
      decidedBy: 'degraded',
      degraded: { cappedFrom: 'deny' },
    });
    expect(d2.unavailable[0]).toEqual({
      signal: 'newBrowser',
      reason: 'RG_ERR_UPSTREAM_SERVER_ERROR',
      treatment: 'verdict:deny',
    });
  });

  it('never fails closed for a signal that does not apply to the platform', () => {
    const d = p.evaluate(
      input({
        signals: {
          remoteAccessTool: down('not_applicable'),
          newBrowser: down('not_applicable'),
          geovelocity: down('not_applicable'),
        },
      }),
    );
    expect(d).toMatchObject({ verdict: 'allow', score: 0 });
    expect(d.degraded).toBeUndefined();
    expect(d.unavailable.map((u) => u.treatment)).toEqual(['ignore', 'ignore', 'ignore']);
  });

  it('treats a referenced signal the decision service did not pass as unavailable (missing)', () => {
    const d = p.evaluate(input({ signals: { newBrowser: newBrowser(true) } }));
    expect(d.unavailable[0]).toEqual({
      signal: 'remoteAccessTool',
      reason: 'missing',
      treatment: 'score:40',
    });
  });

  it('skips rules that read an unavailable signal instead of evaluating them on zero values', () => {
    // On zero values `!signals.newBrowser.known` would be true and add 40.
    const d = p.evaluate(
      input({ signals: { ...ok, newBrowser: down('timeout'), geovelocity: down('timeout') } }),
    );
    expect(d.matchedRules).toEqual([]);
    expect(d.skippedRules).toEqual([
      { id: 'nb', reason: 'newBrowser unavailable (timeout)' },
      { id: 'geo', reason: 'geovelocity unavailable (timeout)' },
    ]);
  });

  it('names every unavailable input a skipped rule reads, with the reason of each decision', () => {
    const both = compile(`${THRESHOLDS}signals:
  newBrowser: { onUnavailable: { score: 1 } }
  geovelocity: { onUnavailable: { score: 1 } }
rules:
  - { id: both, description: b, when: '!signals.newBrowser.known && signals.geovelocity.anomaly', score: 40 }
  - { id: nb, description: n, when: '!signals.newBrowser.known', score: 40 }
`);
    const skipped = (signals: PolicyInput['signals']) => both.evaluate(input({ signals })).skippedRules;
    expect(skipped({ newBrowser: down('timeout'), geovelocity: down('deadline') })).toEqual([
      { id: 'both', reason: 'newBrowser unavailable (timeout), geovelocity unavailable (deadline)' },
      { id: 'nb', reason: 'newBrowser unavailable (timeout)' },
    ]);
    // The next decision's reasons are its own, not the texts of the one before.
    expect(skipped({ newBrowser: down('circuit_open'), geovelocity: down('timeout') })).toEqual([
      { id: 'both', reason: 'newBrowser unavailable (circuit_open), geovelocity unavailable (timeout)' },
      { id: 'nb', reason: 'newBrowser unavailable (circuit_open)' },
    ]);
    expect(skipped({ newBrowser: down('timeout'), geovelocity: down('timeout') })?.[0]).toEqual({
      id: 'both',
      reason: 'newBrowser unavailable (timeout), geovelocity unavailable (timeout)',
    });
  });

  it('evaluates a rule that reads `.available` of the signal even when it is unavailable', () => {
    const d = p.evaluate(
      input({
        signals: { remoteAccessTool: down('timeout'), newBrowser: newBrowser(true), geovelocity: down('x') },
        request: { accountId: 'a', context: { highValue: true } },
      }),
    );
    expect(d.matchedRules.map((r) => r.id)).toEqual(['rat-aware']);
    expect(d.score).toBe(90);
    expect(d.skippedRules?.map((r) => r.id)).toEqual(['rat', 'geo']);
  });

  it('distinguishes a vendor success:false (with its reason) from an unavailable signal', () => {
    const q = compile(`${THRESHOLDS}signals:
  newBrowser: { onUnavailable: { score: 5 } }
rules:
  - { id: nobase, description: n, when: '!signals.newBrowser.success && signals.newBrowser.reason == "no_user_baseline"', score: 7 }
  - { id: newb, description: n, when: 'signals.newBrowser.success && !signals.newBrowser.known', score: 40 }
`);
    const failed: SignalOutcome<'newBrowser'> = {
      status: 'ok',
      response: { signalType: 'new_browser', success: false, reason: 'no_user_baseline' },
    };
    const d = q.evaluate(input({ signals: { newBrowser: failed } }));
    expect(d).toMatchObject({ score: 7, unavailable: [] });
    expect(d.matchedRules.map((r) => r.id)).toEqual(['nobase']);
    const d2 = q.evaluate(input({ signals: { newBrowser: down('timeout') } }));
    expect(d2).toMatchObject({ score: 5, matchedRules: [] });
  });

  it('applies the Admin user and devices settings, and skips rules reading them', () => {
    const q = compile(`${THRESHOLDS}admin:
  user: { onUnavailable: { score: 20 } }
  devices: { onUnavailable: { verdict: challenge } }
rules:
  - { id: locked, description: l, when: 'user.status == "locked_out"', verdict: deny }
  - { id: user-missing, description: u, when: '!user.available && user.reason == "RG_ERR_UPSTREAM_NOT_FOUND"', score: 50 }
  - { id: nodev, description: n, when: 'size(devices) == 0', score: 30 }
`);
    const d = q.evaluate(
      input({
        user: undefined,
        devices: [],
        adminUnavailable: { user: 'RG_ERR_UPSTREAM_NOT_FOUND', devices: 'timeout' },
      }),
    );
    expect(d.unavailable).toEqual([
      { signal: 'adminUser', reason: 'RG_ERR_UPSTREAM_NOT_FOUND', treatment: 'score:20' },
      { signal: 'adminDevices', reason: 'timeout', treatment: 'verdict:challenge' },
    ]);
    expect(d.matchedRules.map((r) => r.id)).toEqual(['user-missing']);
    expect(d).toMatchObject({ score: 70, verdict: 'challenge', decidedBy: 'verdict' });
    expect(d.skippedRules?.map((r) => r.id)).toEqual(['locked', 'nodev']);
  });
});

describe('evaluation errors', () => {
  const p = compile(`${THRESHOLDS}rules:
  - { id: up, description: u, when: 'request.context.missing == "x"', score: 50 }
  - { id: down, description: d, when: 'request.context.missing == "y"', score: -30 }
  - { id: allow, description: a, when: 'request.context.missing == "z"', verdict: allow }
  - { id: always, description: a, when: 'request.context.missing == "w"', score: -5, onError: match }
  - { id: never, description: n, when: 'request.context.missing == "v"', score: 90, onError: skip }
`);

  it('fails closed by default: a risk-raising rule counts, a risk-lowering one does not', () => {
    const d = p.evaluate(input());
    expect(d.matchedRules).toEqual([
      { id: 'up', description: 'u', score: 50, error: 'No such key: missing' },
      { id: 'always', description: 'a', score: -5, error: 'No such key: missing' },
    ]);
    expect(d.score).toBe(45);
    expect(d.verdict).toBe('challenge');
    expect(d.skippedRules).toEqual([
      { id: 'down', reason: 'evaluation error: No such key: missing (onError: failClosed)' },
      { id: 'allow', reason: 'evaluation error: No such key: missing (onError: failClosed)' },
      { id: 'never', reason: 'evaluation error: No such key: missing (onError: skip)' },
    ]);
  });

  it('honours a policy-wide default onError', () => {
    const q = compile(`${THRESHOLDS}defaults: { onError: skip }
rules:
  - { id: up, description: u, when: 'request.context.missing == "x"', score: 50 }
`);
    expect(q.evaluate(input())).toMatchObject({ score: 0, matchedRules: [], verdict: 'allow' });
  });

  it('never throws, even on malformed input, and answers the degraded verdict', () => {
    const d = p.evaluate({ signals: {}, devices: [], now: NOW } as unknown as PolicyInput);
    expect(d).toMatchObject({ verdict: 'challenge', decidedBy: 'degraded' });
    expect(d.degraded).toEqual({
      verdict: 'challenge',
      inputs: [],
      rules: [{ id: '$internal-error', reason: 'evaluation_error' }],
      floor: true,
    });
    expect(d.matchedRules[0]?.id).toBe('$internal-error');
    expect(d.matchedRules[0]?.error).toBeTypeOf('string');
  });

  it('short-circuits like CEL: a false leading signal flag hides an error on the right', () => {
    const q = compile(`${THRESHOLDS}rules:
  - { id: g, description: g, when: 'signals.newBrowser.success && !signals.newBrowser.known && request.context.x == 1', score: 50 }
`);
    const failed: SignalOutcome<'newBrowser'> = {
      status: 'ok',
      response: { signalType: 'new_browser', success: false, reason: 'insufficient_observations' },
    };
    expect(q.evaluate(input({ signals: { newBrowser: failed } }))).toMatchObject({
      score: 0,
      matchedRules: [],
    });
    expect(q.evaluate(input({ signals: { newBrowser: newBrowser(true) } }))).toMatchObject({ score: 0 });
    const d = q.evaluate(input({ signals: { newBrowser: newBrowser(false) } }));
    expect(d.matchedRules).toEqual([{ id: 'g', description: 'g', score: 50, error: 'No such key: x' }]);
    const ok = q.evaluate(
      input({ signals: { newBrowser: newBrowser(false) }, request: { accountId: 'a', context: { x: 1 } } }),
    );
    expect(ok.matchedRules.map((r) => r.error)).toEqual([undefined]);
  });

  it('counts a failing deny rule at most as the degraded verdict, without its actions; verdict-bound actions apply', () => {
    const q = compile(`${THRESHOLDS}rules:
  - { id: big-amount, description: b, when: 'request.context.amount > 1000', verdict: deny, actions: [lockOut] }
actions:
  lockOut: { type: lock_out_user }
  restrict: { type: restrict_factors, allowedFactors: [approve] }
verdictActions: { challenge: [restrict], deny: [restrict] }
`);
    const d = q.evaluate(input());
    // An error is no evidence: the deny the rule would give is capped at the degraded verdict.
    expect(d).toMatchObject({ verdict: 'challenge', decidedBy: 'degraded' });
    expect(d.degraded).toEqual({
      verdict: 'challenge',
      inputs: [],
      rules: [{ id: 'big-amount', reason: 'evaluation_error' }],
      floor: true,
      cappedFrom: 'deny',
    });
    expect(d.matchedRules).toEqual([
      { id: 'big-amount', description: 'b', verdict: 'deny', error: 'No such key: amount' },
    ]);
    expect(d.actions).toEqual([
      {
        type: 'restrict_factors',
        name: 'restrict',
        source: 'verdict:challenge',
        allowedFactors: ['approve'],
      },
    ]);
    expect(d.suppressedActions).toEqual([
      { name: 'lockOut', type: 'lock_out_user', source: 'big-amount', reason: 'rule_error' },
    ]);

    const real = q.evaluate(input({ request: { accountId: 'alice', context: { amount: 5000 } } }));
    expect(real).toMatchObject({ verdict: 'deny', decidedBy: 'verdict' });
    expect(real.actions.map((a) => a.name)).toEqual(['lockOut', 'restrict']);
    expect(real.suppressedActions).toBeUndefined();
    expect(real.degraded).toBeUndefined();
  });

  it('withholds the actions of a failing rule under onError: match too', () => {
    const q = compile(`${THRESHOLDS}rules:
  - { id: m, description: m, when: 'request.context.x == 1', score: 90, onError: match, actions: [lockOut] }
actions:
  lockOut: { type: lock_out_user }
`);
    const d = q.evaluate(input());
    expect(d).toMatchObject({
      verdict: 'challenge',
      score: 90,
      actions: [],
      degraded: { cappedFrom: 'deny' },
    });
    expect(d.suppressedActions?.map((a) => [a.name, a.reason])).toEqual([['lockOut', 'rule_error']]);
  });

  it('takes an action a failing rule and a matching rule both ask for, once, and reports nothing withheld', () => {
    const q = compile(`${THRESHOLDS}rules:
  - { id: broken, description: b, when: 'request.context.x == 1', score: 50, actions: [lockOut] }
  - { id: sure, description: s, when: 'request.accountId == "alice"', score: 50, actions: [lockOut] }
actions:
  lockOut: { type: lock_out_user }
`);
    const d = q.evaluate(input());
    expect(d.actions).toEqual([{ type: 'lock_out_user', name: 'lockOut', source: 'sure' }]);
    expect(d.suppressedActions).toBeUndefined();
  });

  it('guards context access with `in` so that no error happens', () => {
    const q = compile(`${THRESHOLDS}rules:
  - { id: vip, description: v, when: '"tier" in request.context && request.context.tier == "vip"', score: -10 }
`);
    expect(q.evaluate(input()).skippedRules).toBeUndefined();
    const d = q.evaluate(input({ request: { accountId: 'a', context: { tier: 'vip' } } }));
    expect(d.score).toBe(-10);
  });
});

describe('actions', () => {
  const p = compile(`${THRESHOLDS}rules:
  - { id: rat, description: r, when: 'signals.remoteAccessTool.anomaly', verdict: deny, actions: [lock, archiveThis] }
  - { id: rat2, description: r, when: 'signals.remoteAccessTool.anomalyConfidence > 0.5', score: 10, actions: [lock] }
  - { id: bad-device, description: b, when: 'devices.exists(d, d.device_integrity == "failed")', score: 10, actions: [archiveBad] }
actions:
  lock: { type: lock_out_user }
  archiveThis: { type: archive_device }
  archiveBad: { type: archive_device, select: 'devices.filter(d, d.device_integrity == "failed").map(d, d.device_id)' }
  otp: { type: one_time_code, length: 8, validSecs: 300 }
  restrict: { type: restrict_factors, allowedFactors: [approve] }
verdictActions:
  challenge: [otp]
  deny: [restrict]
`);

  it('takes the actions of matched rules once each, then those bound to the verdict', () => {
    const d = p.evaluate(
      input({
        signals: { remoteAccessTool: rat(true, 0.95) },
        request: { accountId: 'alice', deviceId: 'dev-7', context: {} },
      }),
    );
    expect(d.actions).toEqual([
      { type: 'lock_out_user', name: 'lock', source: 'rat' },
      { type: 'archive_device', name: 'archiveThis', source: 'rat', deviceIds: ['dev-7'] },
      { type: 'restrict_factors', name: 'restrict', source: 'verdict:deny', allowedFactors: ['approve'] },
    ]);
  });

  it('archives the devices a selector picks, and binds a one-time code to challenge', () => {
    const d = p.evaluate(
      input({
        signals: { remoteAccessTool: rat(false, 0.1) },
        devices: [device({ device_id: 'ok' }), device({ device_id: 'bad', device_integrity: 'failed' })],
      }),
    );
    expect(d.actions).toEqual([
      { type: 'archive_device', name: 'archiveBad', source: 'bad-device', deviceIds: ['bad'] },
    ]);
    const c = compile(`${THRESHOLDS}rules:
  - { id: c, description: c, when: 'true', verdict: challenge }
actions:
  otp: { type: one_time_code, length: 8, validSecs: 300 }
verdictActions: { challenge: [otp] }
`).evaluate(input());
    expect(c.actions).toEqual([
      { type: 'one_time_code', name: 'otp', source: 'verdict:challenge', length: 8, validSecs: 300 },
    ]);
  });

  it('drops archive_device when there is no device to archive', () => {
    const d = p.evaluate(input({ signals: { remoteAccessTool: rat(true, 0.95) } }));
    expect(d.actions.map((a) => a.name)).toEqual(['lock', 'restrict']);
  });
});

describe('suppressActions', () => {
  const p = compile(`${THRESHOLDS}rules:
  - { id: new-browser, description: n, when: 'request.context.newBrowser == true', score: 40, actions: [notify] }
  - { id: on-call, description: c, when: 'request.context.onCall == true', score: 45, actions: [pushOnly], suppressActions: [stepUp, notify] }
actions:
  stepUp: { type: one_time_code, length: 8, validSecs: 300 }
  pushOnly: { type: restrict_factors, allowedFactors: [approve, mobile_auth] }
  notify: { type: lock_out_user }
verdictActions: { challenge: [stepUp] }
`);
  const ctx = (c: Record<string, boolean>) =>
    input({ request: { accountId: 'carol', context: { newBrowser: false, onCall: false, ...c } } });

  it('takes a verdict-bound action when no matched rule suppresses it', () => {
    const d = p.evaluate(ctx({ newBrowser: true }));
    expect(d.verdict).toBe('challenge');
    expect(d.actions.map((a) => a.name)).toEqual(['notify', 'stepUp']);
    expect(d.suppressedActions).toBeUndefined();
  });

  it("withholds a verdict-bound action and another rule's action while the suppressing rule matches", () => {
    const d = p.evaluate(ctx({ newBrowser: true, onCall: true }));
    expect(d).toMatchObject({ verdict: 'deny', score: 85 });
    const only = p.evaluate(ctx({ onCall: true }));
    expect(only.verdict).toBe('challenge');
    expect(only.actions.map((a) => a.name)).toEqual(['pushOnly']);
    expect(only.suppressedActions).toEqual([
      {
        name: 'stepUp',
        type: 'one_time_code',
        source: 'verdict:challenge',
        reason: 'suppressed_by_rule',
        by: 'on-call',
      },
    ]);
    expect(d.actions.map((a) => a.name)).toEqual(['pushOnly']);
    expect(d.suppressedActions).toEqual([
      {
        name: 'notify',
        type: 'lock_out_user',
        source: 'new-browser',
        reason: 'suppressed_by_rule',
        by: 'on-call',
      },
    ]);
  });

  it('applies the suppressions of a rule that counted because it failed (withholding is the safe side)', () => {
    const q = compile(`${THRESHOLDS}rules:
  - { id: on-call, description: c, when: 'request.context.onCall == true', score: 45, suppressActions: [stepUp] }
actions:
  stepUp: { type: one_time_code }
verdictActions: { challenge: [stepUp] }
`);
    const d = q.evaluate(input());
    expect(d).toMatchObject({ verdict: 'challenge', actions: [] });
    expect(d.suppressedActions?.map((a) => [a.name, a.by])).toEqual([['stepUp', 'on-call']]);
  });

  it('is refused at load for an unknown action or one the rule also takes', () => {
    const r = compilePolicy(
      't.yaml',
      `apiVersion: riskgate/v1
kind: Policy
name: t
${THRESHOLDS}rules:
  - { id: a, description: a, when: 'true', score: 1, actions: [x], suppressActions: [x, nope] }
actions:
  x: { type: lock_out_user }
`,
      { now: NOW },
    );
    expect(r.policy).toBeUndefined();
    expect(r.issues.filter((i) => i.severity === 'error').map((i) => [i.line, i.message])).toEqual([
      [6, 'rules[0].suppressActions[0]: the rule both takes and suppresses action "x"'],
      [6, 'rules[0].suppressActions[1]: unknown action "nope"'],
    ]);
  });
});

describe('overrides', () => {
  const p = compile(`${THRESHOLDS}rules:
  - { id: rat, description: r, when: 'signals.remoteAccessTool.anomaly', verdict: deny, actions: [lock] }
actions:
  lock: { type: lock_out_user }
overrides:
  allow:
    - { id: qa, accounts: [qa-bot], cidrs: ["10.1.0.0/16"], expiresAt: "2027-01-01T00:00:00Z", reason: QA }
  deny:
    - { id: v4, cidrs: ["198.51.100.0/24"], expiresAt: "2027-01-01T00:00:00Z", reason: botnet }
    - { id: v6, cidrs: ["2001:db8:1::/48"], expiresAt: "2027-01-01T00:00:00Z", reason: botnet6 }
    - { id: gone, accounts: [eve], expiresAt: "2026-01-01T00:00:00Z", reason: old }
`);
  const req = (accountId: string, ip?: string) => ({ accountId, ip, context: {} });
  const quiet = { remoteAccessTool: rat(false, 0) };

  it('denies an IPv4 or IPv6 address in a deny-listed CIDR, including IPv4-mapped IPv6', () => {
    for (const ip of ['198.51.100.9', '::ffff:198.51.100.9', '2001:db8:1:ffff::1']) {
      const d = p.evaluate(input({ signals: quiet, request: req('alice', ip) }));
      expect(d, ip).toMatchObject({ verdict: 'deny', decidedBy: 'override' });
    }
    expect(p.evaluate(input({ signals: quiet, request: req('alice', '198.51.101.9') })).verdict).toBe(
      'allow',
    );
    expect(p.evaluate(input({ signals: quiet, request: req('alice', '2001:db8:2::1') })).verdict).toBe(
      'allow',
    );
    expect(p.evaluate(input({ signals: quiet, request: req('alice', 'not-an-ip') })).verdict).toBe('allow');
  });

  it('explains which entry matched, by what, with its reason and expiry', () => {
    const d = p.evaluate(input({ signals: quiet, request: req('alice', '198.51.100.9') }));
    expect(d.override).toEqual({
      list: 'deny',
      id: 'v4',
      reason: 'botnet',
      expiresAt: '2027-01-01T00:00:00Z',
      matchedBy: 'ip',
    });
  });

  it('allows an allow-listed account without taking the actions its rules asked for', () => {
    const d = p.evaluate(input({ signals: { remoteAccessTool: rat(true, 1) }, request: req('qa-bot') }));
    expect(d).toMatchObject({ verdict: 'allow', decidedBy: 'override', actions: [] });
    expect(d.override).toMatchObject({ list: 'allow', matchedBy: 'account' });
    expect(d.matchedRules.map((r) => r.id)).toEqual(['rat']);
  });

  it('lets a deny entry win over an allow entry', () => {
    const d = p.evaluate(input({ signals: quiet, request: req('qa-bot', '198.51.100.1') }));
    expect(d.override?.id).toBe('v4');
    expect(d.verdict).toBe('deny');
  });

  it('ignores an expired entry', () => {
    expect(p.evaluate(input({ signals: quiet, request: req('eve') })).verdict).toBe('allow');
    const later = p.evaluate(
      input({ signals: quiet, request: req('qa-bot'), now: new Date('2027-02-01T00:00:00Z') }),
    );
    expect(later.override).toBeUndefined();
  });
});

describe('static analysis', () => {
  it('lists only the signals and Admin reads the expressions reference', () => {
    const p = compile(`${THRESHOLDS}rules:
  - { id: a, description: a, when: 'signals.newBrowser.known && user.failed_attempts > 3', score: 1 }
  - { id: b, description: b, when: 'signals["activeCall"].onCall', score: 1 }
actions:
  arch: { type: archive_device, select: 'devices.map(d, d.device_id)' }
verdictActions: { deny: [arch] }
`);
    expect([...p.requirements.signals]).toEqual(['newBrowser', 'activeCall']);
    expect(p.requirements).toMatchObject({ adminUser: true, adminDevices: true });
    expect(Object.keys(p.signalSettings)).toEqual(['newBrowser', 'activeCall']);
  });

  it('reports per-signal timeouts and vendor params, with defaults', () => {
    const p = compile(`${THRESHOLDS}defaults: { timeoutMs: 300 }
signals:
  newBrowser: { timeoutMs: 120, params: { matchScope: full_fingerprint, cooldownSeconds: 600 } }
rules:
  - { id: a, description: a, when: 'signals.newBrowser.known || signals.geovelocity.anomaly', score: 1 }
`);
    expect(p.signalSettings).toEqual({
      newBrowser: { timeoutMs: 120, params: { matchScope: 'full_fingerprint', cooldownSeconds: 600 } },
      geovelocity: { timeoutMs: 300, params: {} },
    });
    expect(p.requirements).toMatchObject({ adminUser: false, adminDevices: false });
  });
});

describe('CEL inputs', () => {
  it('exposes typed results of every signal with zero values when absent', () => {
    const p = compile(`${THRESHOLDS}rules:
  - id: all
    description: reads every view
    when: >-
      signals.geovelocity.maxSpeedKmh == 1234.5 && signals.geovelocity.thresholdKmh == 1000.0
      && signals.geovelocity.distanceKm == 100.0 && signals.geovelocity.evaluated
      && signals.historicalProximity.hasBestMatch && signals.historicalProximity.bestConfidence == 0.7
      && "wifiNetworkOverlap" in signals.historicalProximity.matchedSignals
      && !signals.historicalProximity.hasBestIngressMatch
      && signals.geolocation.country == "CH" && signals.geolocation.hasGps && signals.geolocation.lat == 47.4
      && signals.activeCall.observationTime == "2026-11-20T11:00:00Z"
    score: 1
`);
    const d = p.evaluate(
      input({
        signals: {
          geovelocity: {
            status: 'ok',
            response: {
              signalType: 'geovelocity',
              success: true,
              result: {
                anomaly: true,
                maxSpeedKmh: 1234.5,
                sources: [
                  {
                    locationSource: 'gps',
                    evaluated: true,
                    anomaly: true,
                    maxSpeedKmh: 1234.5,
                    thresholdKmh: 1000,
                    evaluatedPairCount: 2,
                    fastestPair: {
                      fromObservationTime: 'a',
                      toObservationTime: 'b',
                      fromUnitId: 'u',
                      fromVerificationStatus: 'verified',
                      fromInteractionId: 'i',
                      toUnitId: 'u',
                      toVerificationStatus: 'verified',
                      toInteractionId: 'j',
                      distanceKm: 100,
                      elapsedSeconds: 291,
                      speedKmh: 1234.5,
                    },
                  },
                ],
              },
            },
          },
          historicalProximity: {
            status: 'ok',
            response: {
              signalType: 'historical_proximity',
              success: true,
              result: {
                bestMatch: {
                  proximityConfidence: 0.7,
                  supportingSignals: [
                    { type: 'wifiNetworkOverlap', details: { matched: true, matchCount: 3 } },
                    { type: 'locationOverlap', details: { matched: false, matchCount: null } },
                  ],
                },
                bestIngressMatch: null,
              },
            },
          },
          geolocation: {
            status: 'ok',
            response: {
              signalType: 'geolocation',
              success: true,
              result: {
                datapoints: [
                  {
                    name: 'geo',
                    valueType: 'geo',
                    lat: 47.4,
                    lon: 8.5,
                    observationTime: 't',
                    unitId: 'u',
                    verificationStatus: 'verified',
                    interactionId: 'i',
                  },
                  {
                    name: 'ingress_ip_country',
                    valueType: 'string',
                    value: 'CH',
                    observationTime: 't',
                    unitId: 'u',
                    verificationStatus: 'verified',
                    interactionId: 'i',
                  },
                ],
              },
            },
          },
          activeCall: {
            status: 'ok',
            response: {
              signalType: 'active_call',
              success: true,
              result: { onCall: false },
              observationTime: '2026-11-20T11:00:00Z',
            },
          },
        },
      }),
    );
    expect(d.matchedRules.map((r) => r.id)).toEqual(['all']);
  });

  it('gives an unavailable signal zero values and its reason, for rules that test `.available`', () => {
    const q = compile(`${THRESHOLDS}rules:
  - id: zero
    description: z
    when: >-
      !signals.latestProximity.available && signals.latestProximity.proximityConfidence == 0.0
      && size(signals.latestProximity.matchedSignals) == 0 && signals.latestProximity.reason == "not_applicable"
    score: 1
`);
    expect(q.evaluate(input({ signals: { latestProximity: down('not_applicable') } })).score).toBe(1);
  });

  it('mixes int and double in arithmetic, reads timestamps and matches CIDRs', () => {
    const p = compile(`${THRESHOLDS}rules:
  - { id: arith, description: a, when: 'user.max_attempts - user.failed_attempts <= 5 && user.failed_attempts * 2 > 19', score: 1 }
  - { id: night, description: n, when: 'now.getHours("UTC") >= 11 && nowSeconds > 1700000000', score: 2 }
  - { id: office, description: o, when: 'request.ip.inCidr("203.0.113.0/24") && !request.ip.inCidr("2001:db8::/32")', score: 4 }
  - { id: recent, description: r, when: 'devices.exists(d, nowSeconds - d.enrolled_at < 86400)', score: 8 }
`);
    const d = p.evaluate(
      input({
        user: { ...USER, failed_attempts: 10, max_attempts: 15 },
        devices: [device({ enrolled_at: NOW.getTime() / 1000 - 3600 })],
      }),
    );
    expect(d.score).toBe(15);
  });

  it('leaks nothing from one decision into the next (views are reused)', () => {
    const p = compile(`${THRESHOLDS}rules:
  - { id: rat, description: r, when: 'signals.remoteAccessTool.anomaly', score: 50 }
  - { id: dev, description: d, when: 'devices.exists(d, d.device_integrity == "failed")', score: 20 }
`);
    const first = p.evaluate(
      input({
        signals: { remoteAccessTool: rat(true, 0.9) },
        devices: [device({ device_integrity: 'failed' }), device()],
      }),
    );
    expect(first.score).toBe(70);
    const failed: SignalOutcome<'remoteAccessTool'> = {
      status: 'ok',
      response: { signalType: 'remote_access_tool', success: false, reason: 'insufficient_observations' },
    };
    const second = p.evaluate(input({ signals: { remoteAccessTool: failed }, devices: [device()] }));
    expect(second.score).toBe(0);
    expect(first.matchedRules.map((r) => r.id)).toEqual(['rat', 'dev']);
  });
});

describe('shadow rules', () => {
  it('reports a matching shadow rule without counting its score, verdict or actions', () => {
    const p = compile(`${THRESHOLDS}rules:
  - { id: trial, description: t, when: 'true', verdict: deny, shadow: true, actions: [lock] }
actions:
  lock: { type: lock_out_user }
`);
    const d = p.evaluate(input());
    expect(d).toMatchObject({ verdict: 'allow', score: 0, matchedRules: [], actions: [] });
    expect(d.shadowMatches).toEqual([{ id: 'trial', description: 't', verdict: 'deny' }]);
  });
});

describe('outage', () => {
  const OUTAGE_POLICY = `thresholds: { challenge: 40, deny: 80 }
signals:
  remoteAccessTool: { onUnavailable: { score: 50 } }
  newBrowser: { onUnavailable: { score: 50 } }
admin:
  user: { onUnavailable: { verdict: deny } }
outage:
  maxUnavailableScore: 60
  rules:
    - id: identity-blind
      description: Neither the detector nor the account.
      when: { unavailable: [remoteAccessTool, adminUser] }
      verdict: challenge
rules:
  - { id: rat, description: r, when: 'signals.remoteAccessTool.success && signals.remoteAccessTool.anomaly', score: 100 }
  - { id: nb, description: n, when: 'signals.newBrowser.success && !signals.newBrowser.known', score: 30 }
  - { id: locked, description: l, when: 'user.status == "locked_out"', verdict: deny }`;

  it('caps what onUnavailable scores add up to, and says so', () => {
    const d = compile(OUTAGE_POLICY).evaluate(
      input({ signals: { remoteAccessTool: down('timeout'), newBrowser: down('timeout') } }),
    );
    expect(d).toMatchObject({ verdict: 'challenge', score: 60, decidedBy: 'score' });
    expect(d.outage).toEqual({ unavailableInputs: 2, cappedScore: { unavailableScore: 100, counted: 60 } });
  });

  it('an outage rule replaces what unavailability adds, its hard verdicts included, by its own verdict', () => {
    const d = compile(OUTAGE_POLICY).evaluate(
      input({
        signals: { remoteAccessTool: down('timeout'), newBrowser: newBrowser(true) },
        user: undefined,
        adminUnavailable: { user: 'timeout' },
      }),
    );
    // Without the rule, the user's onUnavailable would deny.
    expect(d).toMatchObject({ verdict: 'challenge', score: 0, decidedBy: 'outage' });
    expect(d.outage).toEqual({
      unavailableInputs: 2,
      rule: {
        id: 'identity-blind',
        description: 'Neither the detector nor the account.',
        verdict: 'challenge',
      },
    });
  });

  it('rules on the inputs that answered still count, and a harder verdict of theirs wins', () => {
    const d = compile(OUTAGE_POLICY).evaluate(
      input({
        signals: { remoteAccessTool: down('timeout'), newBrowser: newBrowser(false) },
        user: undefined,
        adminUnavailable: { user: 'timeout' },
      }),
    );
    expect(d).toMatchObject({ verdict: 'challenge', score: 30, decidedBy: 'outage' });
    const policy = compile(OUTAGE_POLICY.replace('score: 30 }', 'verdict: deny }'));
    const harder = policy.evaluate(
      input({
        signals: { remoteAccessTool: down('timeout'), newBrowser: newBrowser(false) },
        user: undefined,
        adminUnavailable: { user: 'timeout' },
      }),
    );
    expect(harder).toMatchObject({ verdict: 'deny', decidedBy: 'verdict' });
    expect(harder.outage?.rule?.id).toBe('identity-blind');
  });

  it('never counts inputs of another platform as an outage', () => {
    const d = compile(
      OUTAGE_POLICY.replace('unavailable: [remoteAccessTool, adminUser]', 'unavailableAtLeast: 1'),
    ).evaluate(
      input({ signals: { remoteAccessTool: down('not_applicable'), newBrowser: newBrowser(true) } }),
    );
    expect(d).toMatchObject({ verdict: 'allow', score: 0, decidedBy: 'score' });
    expect(d.outage).toBeUndefined();
  });

  it('refuses an outage rule with no condition, and warns of one naming an input the policy never reads', () => {
    const refused = compilePolicy(
      't.yaml',
      `apiVersion: riskgate/v1\nkind: Policy\nname: t\n${OUTAGE_POLICY.replace('when: { unavailable: [remoteAccessTool, adminUser] }', 'when: {}')}`,
      { now: NOW },
    );
    expect(refused.policy).toBeUndefined();
    expect(refused.issues.map((i) => i.message)).toContain(
      'outage.rules[0].when: an outage rule needs `unavailableAtLeast` or `unavailable`',
    );
    const warned = compilePolicy(
      't.yaml',
      `apiVersion: riskgate/v1\nkind: Policy\nname: t\n${OUTAGE_POLICY.replace('[remoteAccessTool, adminUser]', '[geovelocity]')}`,
      { now: NOW },
    );
    expect(warned.policy).toBeDefined();
    expect(warned.issues.filter((i) => i.severity === 'warning').map((i) => i.message)).toContain(
      'outage.rules[0].when.unavailable[0]: the policy never reads geovelocity, so outage rule "identity-blind" cannot match',
    );
  });
});

describe('outage and missing identifiers', () => {
  it('a request without the identifiers is no outage: onUnavailable applies as usual', () => {
    const policy = compile(`thresholds: { challenge: 40, deny: 80 }
signals:
  remoteAccessTool: { onUnavailable: { score: 40 } }
  newBrowser: { onUnavailable: { score: 20 } }
outage:
  rules:
    - { id: vendor-outage, when: { unavailableAtLeast: 1 }, verdict: deny }
rules:
  - { id: rat, description: r, when: 'signals.remoteAccessTool.success && signals.remoteAccessTool.anomaly', score: 100 }
  - { id: nb, description: n, when: 'signals.newBrowser.success && !signals.newBrowser.known', score: 30 }`);
    const d = policy.evaluate(
      input({ signals: { remoteAccessTool: down('missing_identifiers'), newBrowser: newBrowser(true) } }),
    );
    expect(d).toMatchObject({ verdict: 'challenge', score: 40, decidedBy: 'score' });
    expect(d.outage).toBeUndefined();
  });
});

describe('a lock-out waits for a passed first factor', () => {
  const RULES = `${THRESHOLDS}rules:
  - { id: rat, description: r, when: 'signals.remoteAccessTool.anomaly', verdict: deny, actions: [lock, restrict] }
`;
  const strict = compile(`${RULES}actions:
  lock: { type: lock_out_user }
  restrict: { type: restrict_factors, allowedFactors: [approve] }
`);
  const trusting = compile(`${RULES}actions:
  lock: { type: lock_out_user, requireFirstFactor: false }
  restrict: { type: restrict_factors, allowedFactors: [approve] }
`);
  const login = (firstFactor: PolicyInput['request']['firstFactor']) =>
    input({
      signals: { remoteAccessTool: rat(true, 0.95) },
      request: { accountId: 'alice', firstFactor, context: {} },
    });
  const WITHHELD = { name: 'lock', type: 'lock_out_user', source: 'rat', reason: 'first_factor_not_passed' };

  it.each([['failed'], ['not_checked'], [undefined]] as const)(
    'withholds lock_out_user by default when the first factor is %s; the verdict and other actions stand',
    (firstFactor) => {
      const d = strict.evaluate(login(firstFactor));
      expect(d.verdict).toBe('deny');
      expect(d.actions.map((a) => a.name)).toEqual(['restrict']);
      expect(d.suppressedActions).toEqual([WITHHELD]);
    },
  );

  it('takes lock_out_user when the first factor passed', () => {
    const d = strict.evaluate(login('passed'));
    expect(d.actions.map((a) => a.name)).toEqual(['lock', 'restrict']);
    expect(d.suppressedActions).toBeUndefined();
  });

  it('takes lock_out_user without a passed first factor when the action says requireFirstFactor: false', () => {
    for (const firstFactor of ['failed', undefined] as const) {
      const d = trusting.evaluate(login(firstFactor));
      expect(d.actions.map((a) => a.name)).toEqual(['lock', 'restrict']);
      expect(d.suppressedActions).toBeUndefined();
    }
  });

  it('withholds a verdict-bound lock-out the same way, once', () => {
    const p = compile(`${RULES}actions:
  lock: { type: lock_out_user }
  restrict: { type: restrict_factors, allowedFactors: [approve] }
verdictActions:
  deny: [lock]
`);
    expect(p.evaluate(login('failed')).suppressedActions).toEqual([WITHHELD]);
    expect(p.evaluate(login('passed')).actions.map((a) => a.name)).toEqual(['lock', 'restrict']);
  });

  it('reports a rule suppression over a missing first factor', () => {
    const p =
      compile(`${RULES}  - { id: quiet, description: q, when: 'true', score: 0, suppressActions: [lock] }
actions:
  lock: { type: lock_out_user }
  restrict: { type: restrict_factors, allowedFactors: [approve] }
`);
    expect(p.evaluate(login('failed')).suppressedActions).toEqual([
      { name: 'lock', type: 'lock_out_user', source: 'rat', reason: 'suppressed_by_rule', by: 'quiet' },
    ]);
  });

  it('reads request.firstFactor in CEL, "" when the request does not say', () => {
    const p = compile(`${THRESHOLDS}rules:
  - { id: wrong-password, description: w, when: 'request.firstFactor == "failed"', verdict: deny }
  - { id: unsaid, description: u, when: 'request.firstFactor == ""', score: 40 }
`);
    expect(p.evaluate(login('failed')).matchedRules.map((r) => r.id)).toEqual(['wrong-password']);
    expect(p.evaluate(login(undefined)).matchedRules.map((r) => r.id)).toEqual(['unsaid']);
    expect(p.evaluate(login('passed')).matchedRules).toEqual([]);
  });

  it('refuses requireFirstFactor on other actions and anything but a boolean', () => {
    for (const action of [
      '{ type: restrict_factors, allowedFactors: [approve], requireFirstFactor: false }',
      '{ type: lock_out_user, requireFirstFactor: "no" }',
    ]) {
      const r = compilePolicy(
        't.yaml',
        `apiVersion: riskgate/v1\nkind: Policy\nname: t\n${RULES}actions:\n  lock: ${action}\n  restrict: { type: restrict_factors, allowedFactors: [approve] }\n`,
        { now: NOW },
      );
      expect(r.policy, action).toBeUndefined();
      expect(r.issues.map((i) => i.message).join('\n'), action).toMatch(
        /actions\.lock(\.requireFirstFactor)?: (unknown key "requireFirstFactor"|Invalid input: expected boolean)/,
      );
    }
  });
});
