import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { AdminUser } from '../admin/admin-schemas.ts';
import { ErrorCode, UpstreamError } from '../errors/riskgate-error.ts';
import type {
  CompiledPolicy,
  PolicyAction,
  PolicyInput,
  PolicyRequirements,
  PolicySignalName,
} from '../policy/policy-types.ts';
import type { CallOptions, UpstreamResult } from '../upstream/upstream-result.ts';
import type { AdminPort, SignalFetcher } from './decide-ports.ts';
import type { DecideRequest } from './decide-request.ts';
import { runDecision } from './run-decision.ts';

/**
 * A hand-written policy fixture: it records what it was given and allows. The real policy engine
 * and clients are exercised end to end in test/decide-*.test.ts.
 */
function fixturePolicy(
  requirements: Partial<PolicyRequirements>,
  options: { timeoutMs?: number; actions?: PolicyAction[] } = {},
) {
  const seen: PolicyInput[] = [];
  const signals = requirements.signals ?? new Set<PolicySignalName>();
  const policy: CompiledPolicy = {
    name: 'fixture',
    revision: 'r1',
    thresholds: { challenge: 40, deny: 80 },
    requirements: {
      signals,
      adminUser: false,
      adminDevices: false,
      velocity: false,
      history: false,
      ...requirements,
    },
    signalSettings: Object.fromEntries(
      [...signals].map((n) => [n, { timeoutMs: options.timeoutMs ?? 100, params: {} }]),
    ),
    evaluate(input) {
      seen.push(structuredClone(input));
      return {
        verdict: 'allow',
        score: 0,
        matchedRules: [],
        thresholds: { challenge: 40, deny: 80 },
        unavailable: [],
        actions: options.actions ?? [],
        policy: { name: 'fixture', revision: 'r1' },
      };
    },
  };
  return { policy, seen };
}

type Scripted = { afterMs: number; result: UpstreamResult<unknown> } | 'hang';

function scriptedSignals(script: Partial<Record<PolicySignalName, Scripted>>) {
  const calls: { name: PolicySignalName; query: unknown; options: CallOptions; at: number }[] = [];
  const fetch: SignalFetcher = (name, query, options) => {
    calls.push({ name, query, options, at: Date.now() });
    const step = script[name] ?? { afterMs: 5, result: okEnvelope(name) };
    if (step === 'hang') return new Promise(() => {});
    return new Promise((resolve) => setTimeout(() => resolve(step.result as never), step.afterMs));
  };
  return { fetch, calls };
}

function okEnvelope(name: string): UpstreamResult<unknown> {
  return { ok: true, value: { signalType: name, success: true, result: {} }, durationMs: 5 };
}
function failure(code: (typeof ErrorCode)[keyof typeof ErrorCode]): UpstreamResult<unknown> {
  return { ok: false, error: new UpstreamError(code, code, { upstream: 'signals' }), durationMs: 7 };
}

const USER = { user_id: 'u-1', username: 'alice', status: 'enabled' } as AdminUser;

function admin(overrides: Partial<AdminPort> = {}): AdminPort & { otcCalls: unknown[] } {
  const otcCalls: unknown[] = [];
  const resolved = <T>(value: T): Promise<UpstreamResult<T>> =>
    new Promise((r) => setTimeout(() => r({ ok: true, value, durationMs: 2 }), 2));
  return {
    otcCalls,
    getUserCached: () => resolved(USER),
    getUserDevicesCached: () => resolved({ count: 0, devices: [] }),
    updateUser: () => resolved({ changed: true, alreadyArchived: false, updated: {} }),
    deleteDevice: () => resolved({ alreadyArchived: false }),
    createOneTimeCode: (userId, params) => {
      otcCalls.push({ userId, params });
      return resolved({ one_time_code: '1234 5678', expiration: 1_900_000_000 });
    },
    ...overrides,
  };
}

const LOGIN: DecideRequest = {
  accountId: 'alice',
  userId: 'u-1',
  platform: 'browser',
  unitId: 'alice-web',
  verificationStatus: 'unverified',
  interactionId: 'alice-login-1',
  baseline: { unitId: 'alice-app', verificationStatus: 'verified' },
};

/** `running` under the fake clock: still pending `ms - 1` ms from now, settled at `ms`. */
async function settlesAt<T>(running: Promise<T>, ms: number): Promise<T> {
  let done = false;
  const watched = running.then((r) => {
    done = true;
    return r;
  });
  await vi.advanceTimersByTimeAsync(ms - 1);
  expect(done).toBe(false);
  await vi.advanceTimersByTimeAsync(1);
  return watched;
}

describe('runDecision', () => {
  beforeEach(() => vi.useFakeTimers({ now: 0 }));
  afterEach(() => vi.useRealTimers());

  it('starts every required call at once, with the per-signal timeout and the shared deadline signal', async () => {
    const { policy, seen } = fixturePolicy(
      { signals: new Set(['remoteAccessTool', 'newBrowser', 'latestProximity']), adminUser: true },
      { timeoutMs: 120 },
    );
    const signals = scriptedSignals({});
    const getUserCached = vi.fn(admin().getUserCached);
    const running = runDecision(
      {
        signals: signals.fetch,
        admin: admin({ getUserCached }),
        policies: { current: () => policy },
        deadlineMs: 300,
      },
      LOGIN,
    );
    expect(signals.calls.map((c) => c.name).sort()).toEqual([
      'latestProximity',
      'newBrowser',
      'remoteAccessTool',
    ]);
    expect(getUserCached).toHaveBeenCalledTimes(1);
    const sharedSignal = signals.calls[0]!.options.signal;
    expect(signals.calls.every((c) => c.options.signal === sharedSignal && c.options.timeoutMs === 120)).toBe(
      true,
    );
    await vi.advanceTimersByTimeAsync(10);
    const run = await running;
    expect(seen[0]!.signals.newBrowser).toEqual({
      status: 'ok',
      response: expect.objectContaining({ success: true }),
    });
    expect(seen[0]!.user).toEqual(USER);
    expect(run.calls.map((c) => c.name).sort()).toEqual([
      'admin-user',
      'signals-latestProximity',
      'signals-newBrowser',
      'signals-remoteAccessTool',
    ]);
    expect(sharedSignal?.aborted).toBe(false);
  });

  it('counts the deadline from arrival: a decision that waited 250 ms of 300 gets the 50 left', async () => {
    const { policy, seen } = fixturePolicy({ signals: new Set(['newBrowser']) }, { timeoutMs: 120 });
    const signals = scriptedSignals({ newBrowser: 'hang' });
    let done = false;
    const running = runDecision(
      { signals: signals.fetch, admin: admin(), policies: { current: () => policy }, deadlineMs: 300 },
      LOGIN,
      undefined,
      undefined,
      performance.now() - 250,
    ).then((r) => {
      done = true;
      return r;
    });
    // The call is told the decision's remaining budget, not its own 120 ms timeout.
    expect(signals.calls[0]!.options.deadlineAt).toBeLessThanOrEqual(50);
    await vi.advanceTimersByTimeAsync(40);
    expect(done).toBe(false);
    await vi.advanceTimersByTimeAsync(15);
    expect(done).toBe(true);
    const run = await running;
    expect(seen[0]!.signals.newBrowser).toEqual({ status: 'unavailable', reason: 'deadline' });
    expect(run.calls).toContainEqual(
      expect.objectContaining({ name: 'signals-newBrowser', outcome: 'deadline' }),
    );
  });

  it('answers at once, every input unavailable, when the wait used the whole deadline', async () => {
    const { policy, seen } = fixturePolicy({ signals: new Set(['newBrowser']), adminUser: true });
    const running = runDecision(
      {
        signals: scriptedSignals({ newBrowser: 'hang' }).fetch,
        admin: admin({ getUserCached: () => new Promise(() => {}) }),
        policies: { current: () => policy },
        deadlineMs: 300,
      },
      LOGIN,
      undefined,
      undefined,
      performance.now() - 400,
    );
    await vi.advanceTimersByTimeAsync(1);
    await running;
    expect(seen[0]!.signals.newBrowser).toEqual({ status: 'unavailable', reason: 'deadline' });
    expect(seen[0]!.adminUnavailable).toEqual({ user: 'deadline' });
  });

  it('bounds each call, a client retry included, by its own timeout: deadlineAt is the earlier of the two', async () => {
    const { policy } = fixturePolicy(
      { signals: new Set(['newBrowser']), adminUser: true },
      { timeoutMs: 120 },
    );
    policy.adminSettings = { user: { timeoutMs: 400 } };
    const signals = scriptedSignals({});
    let adminOptions: CallOptions | undefined;
    const getUserCached: AdminPort['getUserCached'] = (id, o) => {
      adminOptions = o;
      return admin().getUserCached(id, o);
    };
    const running = runDecision(
      {
        signals: signals.fetch,
        admin: admin({ getUserCached }),
        policies: { current: () => policy },
        deadlineMs: 300,
      },
      LOGIN,
    );
    expect(signals.calls[0]!.options).toMatchObject({ timeoutMs: 120, deadlineAt: 120 });
    // Its own timeout is past the decision's deadline: the deadline bounds it.
    expect(adminOptions).toMatchObject({ timeoutMs: 400, deadlineAt: 300 });
    await vi.advanceTimersByTimeAsync(10);
    await running;
  });

  it('ends an Admin read at its own timeout (the shared cache honours only the deadline signal)', async () => {
    const { policy, seen } = fixturePolicy({ adminUser: true, adminDevices: true });
    policy.adminSettings = {
      user: { timeoutMs: 100 },
      devices: { timeoutMs: 150 },
    };
    const run = await settlesAt(
      runDecision(
        {
          signals: scriptedSignals({}).fetch,
          admin: admin({
            getUserCached: () => new Promise(() => {}),
            getUserDevicesCached: () => new Promise(() => {}),
          }),
          policies: { current: () => policy },
          deadlineMs: 300,
        },
        LOGIN,
      ),
      150,
    );
    expect(seen[0]!.adminUnavailable).toEqual({ user: 'timeout', devices: 'timeout' });
    expect(run.elapsedMs).toBe(150);
    expect(run.calls).toEqual([
      { name: 'admin-user', durationMs: 100, outcome: 'timeout' },
      { name: 'admin-devices', durationMs: 150, outcome: 'timeout' },
    ]);
  });

  it('passes the decision span’s traceparent to every upstream call, and none without tracing', async () => {
    const { policy } = fixturePolicy({
      signals: new Set(['newBrowser', 'remoteAccessTool']),
      adminUser: true,
    });
    const traced = scriptedSignals({});
    const userOptions: unknown[] = [];
    const getUserCached: AdminPort['getUserCached'] = (id, o) => {
      userOptions.push(o);
      return admin().getUserCached(id, o);
    };
    const deps = { admin: admin({ getUserCached }), policies: { current: () => policy }, deadlineMs: 300 };
    const tp = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const running = runDecision({ ...deps, signals: traced.fetch }, LOGIN, tp);
    await vi.advanceTimersByTimeAsync(10);
    await running;
    expect(traced.calls.map((c) => c.options.traceparent)).toEqual([tp, tp]);
    expect(userOptions).toEqual([expect.objectContaining({ traceparent: tp })]);

    const untraced = scriptedSignals({});
    const plain = runDecision({ ...deps, signals: untraced.fetch }, LOGIN);
    await vi.advanceTimersByTimeAsync(10);
    await plain;
    expect(untraced.calls.every((c) => !('traceparent' in c.options))).toBe(true);
  });

  it('builds each vendor query from the login and its baseline', async () => {
    const { policy } = fixturePolicy({
      signals: new Set(['remoteAccessTool', 'newBrowser', 'latestProximity']),
    });
    const signals = scriptedSignals({});
    const running = runDecision(
      { signals: signals.fetch, admin: admin(), policies: { current: () => policy }, deadlineMs: 300 },
      LOGIN,
    );
    await vi.advanceTimersByTimeAsync(10);
    await running;
    const byName = Object.fromEntries(signals.calls.map((c) => [c.name, c.query]));
    expect(byName.remoteAccessTool).toEqual({
      accountId: 'alice',
      unitId: 'alice-web',
      verificationStatus: 'unverified',
      interactionId: 'alice-login-1',
    });
    expect(byName.latestProximity).toEqual({
      subjectAccountId: 'alice',
      subjectUnitId: 'alice-web',
      subjectVerificationStatus: 'unverified',
      subjectInteractionId: 'alice-login-1',
      baselineUnitId: 'alice-app',
      baselineVerificationStatus: 'verified',
    });
    // New browser: the login against the whole account's history, not against the phone.
    expect(byName.newBrowser).toEqual({
      subjectAccountId: 'alice',
      subjectUnitId: 'alice-web',
      subjectVerificationStatus: 'unverified',
      subjectInteractionId: 'alice-login-1',
      baselineAccountId: 'alice',
    });
  });

  it('skips a signal the login’s platform does not cover as not applicable, without calling it', async () => {
    const { policy, seen } = fixturePolicy({
      signals: new Set(['remoteAccessTool', 'newBrowser', 'geovelocity']),
    });
    const signals = scriptedSignals({});
    const mobile: DecideRequest = {
      accountId: 'bob',
      platform: 'mobile',
      unitId: 'bob-app',
      verificationStatus: 'unverified',
      interactionId: 'bob-login-1',
    };
    const running = runDecision(
      { signals: signals.fetch, admin: admin(), policies: { current: () => policy }, deadlineMs: 300 },
      mobile,
    );
    await vi.advanceTimersByTimeAsync(10);
    await running;
    expect(signals.calls.map((c) => c.name)).toEqual(['geovelocity']);
    const notApplicable = { status: 'unavailable', reason: 'not_applicable' };
    expect(seen[0]!.signals.remoteAccessTool).toEqual(notApplicable);
    expect(seen[0]!.signals.newBrowser).toEqual(notApplicable);
  });

  it('marks a signal the platform allows but whose identifiers are missing `missing_identifiers`, not skipped', async () => {
    const { policy, seen } = fixturePolicy({
      signals: new Set(['remoteAccessTool', 'newBrowser', 'latestProximity']),
    });
    const missing = { status: 'unavailable', reason: 'missing_identifiers' };
    // A browser login without interactionId or baseline, then the same with no platform at all.
    for (const login of [
      { accountId: 'mallory', platform: 'browser', unitId: 'mallory-web' },
      { accountId: 'mallory', unitId: 'mallory-web' },
    ] satisfies DecideRequest[]) {
      const signals = scriptedSignals({});
      const running = runDecision(
        { signals: signals.fetch, admin: admin(), policies: { current: () => policy }, deadlineMs: 300 },
        login,
      );
      await vi.advanceTimersByTimeAsync(10);
      await running;
      expect(signals.calls.map((c) => c.name)).toEqual(['newBrowser']);
      expect(seen.at(-1)!.signals.remoteAccessTool).toEqual(missing);
      expect(seen.at(-1)!.signals.latestProximity).toEqual(missing);
    }
  });

  it('answers at the deadline with what arrived, marks the rest `deadline` and aborts them', async () => {
    const { policy, seen } = fixturePolicy(
      { signals: new Set(['newBrowser', 'remoteAccessTool']), adminUser: true },
      { timeoutMs: 500 }, // past the deadline: the deadline ends them
    );
    const signals = scriptedSignals({ remoteAccessTool: 'hang' });
    let adminSignal: AbortSignal | undefined;
    const hangingUser: AdminPort['getUserCached'] = (_id, o) => {
      adminSignal = o?.signal;
      return new Promise(() => {});
    };
    const run = await settlesAt(
      runDecision(
        {
          signals: signals.fetch,
          admin: admin({ getUserCached: hangingUser }),
          policies: { current: () => policy },
          deadlineMs: 300,
        },
        LOGIN,
      ),
      300,
    );
    expect(seen[0]!.signals.remoteAccessTool).toEqual({ status: 'unavailable', reason: 'deadline' });
    expect(seen[0]!.signals.newBrowser?.status).toBe('ok');
    expect(seen[0]!.adminUnavailable).toEqual({ user: 'deadline' });
    expect(adminSignal?.aborted).toBe(true);
    expect(run.calls).toContainEqual({
      name: 'signals-remoteAccessTool',
      durationMs: 300,
      outcome: 'deadline',
    });
  });

  it('ends a signal at its own timeout even when its client overruns it, the deadline still ahead', async () => {
    const { policy, seen } = fixturePolicy({ signals: new Set(['newBrowser']) }, { timeoutMs: 120 });
    const run = await settlesAt(
      runDecision(
        {
          signals: scriptedSignals({ newBrowser: 'hang' }).fetch,
          admin: admin(),
          policies: { current: () => policy },
          deadlineMs: 300,
          subjectBinding: 'off',
        },
        LOGIN,
      ),
      120,
    );
    expect(seen[0]!.signals.newBrowser).toEqual({ status: 'unavailable', reason: 'timeout' });
    expect(run.calls).toEqual([{ name: 'signals-newBrowser', durationMs: 120, outcome: 'timeout' }]);
  });

  it('reports a failed call as unavailable with the reason (timeout, or the error code)', async () => {
    const { policy, seen } = fixturePolicy({
      signals: new Set(['newBrowser', 'remoteAccessTool', 'latestProximity']),
    });
    const signals = scriptedSignals({
      newBrowser: { afterMs: 100, result: failure(ErrorCode.UPSTREAM_TIMEOUT) },
      remoteAccessTool: { afterMs: 3, result: failure(ErrorCode.UPSTREAM_RATE_LIMITED) },
      latestProximity: { afterMs: 3, result: failure(ErrorCode.UPSTREAM_SERVER_ERROR) },
    });
    const running = runDecision(
      { signals: signals.fetch, admin: admin(), policies: { current: () => policy }, deadlineMs: 300 },
      LOGIN,
    );
    await vi.advanceTimersByTimeAsync(100);
    const run = await running;
    expect(seen[0]!.signals).toEqual({
      newBrowser: { status: 'unavailable', reason: 'timeout' },
      remoteAccessTool: { status: 'unavailable', reason: 'RG_ERR_UPSTREAM_RATE_LIMITED' },
      latestProximity: { status: 'unavailable', reason: 'RG_ERR_UPSTREAM_SERVER_ERROR' },
    });
    expect(run.elapsedMs).toBe(100);
  });

  it('still answers when a client rejects instead of resolving (a bug), with that input unavailable', async () => {
    const { policy, seen } = fixturePolicy({ signals: new Set(['newBrowser']) });
    const running = runDecision(
      {
        signals: () => Promise.reject(new Error('boom')),
        admin: admin(),
        policies: { current: () => policy },
        deadlineMs: 300,
        subjectBinding: 'off',
      },
      LOGIN,
    );
    await vi.advanceTimersByTimeAsync(0);
    await running;
    expect(seen[0]!.signals.newBrowser).toEqual({ status: 'unavailable', reason: 'RG_ERR_INTERNAL' });
  });

  it('marks Admin reads `missing_identifiers` without a userId, and calls nothing', async () => {
    const { policy, seen } = fixturePolicy({ adminUser: true, adminDevices: true });
    const getUserCached = vi.fn(admin().getUserCached);
    const run = await runDecision(
      {
        signals: scriptedSignals({}).fetch,
        admin: admin({ getUserCached }),
        policies: { current: () => policy },
        deadlineMs: 300,
      },
      { accountId: 'alice' },
    );
    expect(getUserCached).not.toHaveBeenCalled();
    expect(seen[0]!.adminUnavailable).toEqual({
      user: 'missing_identifiers',
      devices: 'missing_identifiers',
    });
    expect(run.calls).toEqual([]);
  });

  it('fetches the one-time code the policy asks for before answering', async () => {
    const otc: PolicyAction = {
      type: 'one_time_code',
      source: 'verdict:challenge',
      length: 8,
      validSecs: 300,
    };
    const { policy } = fixturePolicy({}, { actions: [otc] });
    const a = admin();
    const running = runDecision(
      { signals: scriptedSignals({}).fetch, admin: a, policies: { current: () => policy }, deadlineMs: 300 },
      LOGIN,
    );
    await vi.advanceTimersByTimeAsync(5);
    const run = await running;
    expect(a.otcCalls).toEqual([{ userId: 'u-1', params: { length: 8, valid_secs: 300 } }]);
    expect(run.oneTimeCode).toEqual({
      status: 'done',
      code: { one_time_code: '1234 5678', expiration: 1_900_000_000 },
    });
    // The user is read even though this policy does not use it: the code goes to a verified subject.
    expect(run.calls.map((c) => c.name)).toEqual(['admin-user', 'admin-otc']);
    expect(run.subject).toEqual({ status: 'verified' });

    const anonymous = await runDecision(
      { signals: scriptedSignals({}).fetch, admin: a, policies: { current: () => policy }, deadlineMs: 300 },
      { accountId: 'alice' },
    );
    expect(anonymous.oneTimeCode).toEqual({ status: 'skipped', reason: 'no_user_id' });
  });

  it('still answers when the one-time code request rejects, reporting it failed', async () => {
    const otc: PolicyAction = { type: 'one_time_code', source: 'verdict:challenge' };
    const { policy } = fixturePolicy({}, { actions: [otc] });
    const run = await runDecision(
      {
        signals: scriptedSignals({}).fetch,
        admin: admin({ createOneTimeCode: () => Promise.reject(new Error('bad params')) }),
        policies: { current: () => policy },
        deadlineMs: 300,
        subjectBinding: 'off',
      },
      LOGIN,
    );
    expect(run.oneTimeCode).toEqual({ status: 'failed', reason: 'RG_ERR_INTERNAL' });
  });

  it('uses the policy that is current when the decision starts, even if it is swapped meanwhile', async () => {
    const first = fixturePolicy({ signals: new Set(['newBrowser']) });
    const second = fixturePolicy({ signals: new Set(['newBrowser']) });
    let current = first.policy;
    const running = runDecision(
      {
        signals: scriptedSignals({}).fetch,
        admin: admin(),
        policies: { current: () => current },
        deadlineMs: 300,
      },
      LOGIN,
    );
    current = second.policy;
    await vi.advanceTimersByTimeAsync(10);
    const run = await running;
    expect(run.policy).toBe(first.policy);
    expect(first.seen).toHaveLength(1);
    expect(second.seen).toHaveLength(0);
  });
});
