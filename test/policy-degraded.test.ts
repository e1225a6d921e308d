import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  CHECKS_PER_CLOCK_READ,
  endEvaluationBudget,
  evaluationBudgetSpent,
  startEvaluationBudget,
} from '../src/policy/evaluation-budget.ts';
import { type CompileOptions, compilePolicy } from '../src/policy/policy-compiler.ts';
import type { PolicyInput, SignalOutcome } from '../src/policy/policy-types.ts';
import { compileTestPolicy, down, newBrowser, rat } from './support/test-policy.ts';

/**
 * The degraded rule (policies/README.md, "Degraded decisions"): riskgate's own stress (an input it
 * could not gather, a rule it could not evaluate) can only make a verdict more careful, never more
 * permissive, and never harsher than the evidence.
 */

const NOW = new Date('2026-11-20T12:00:00Z');

const compile = (body: string, options: CompileOptions = {}) =>
  compileTestPolicy(body, { now: NOW, ...options });

const near = (proximityConfidence: number): SignalOutcome<'latestProximity'> => ({
  status: 'ok',
  response: {
    signalType: 'latest_proximity',
    success: true,
    result: { proximityConfidence, supportingSignals: [] },
  },
});

function input(signals: PolicyInput['signals'], over: Partial<PolicyInput> = {}): PolicyInput {
  return {
    signals,
    devices: [],
    request: { accountId: 'alice', platform: 'browser', context: {} },
    now: NOW,
    ...over,
  };
}

/** A small login policy: remote control denies, a new browser adds 50, the phone nearby takes 30. */
const POLICY = `thresholds: { challenge: 40, deny: 80 }
signals:
  remoteAccessTool: { onUnavailable: { score: 10 } }
  newBrowser: { onUnavailable: { score: 20 } }
  latestProximity: { onUnavailable: ignore }
rules:
  - { id: rat, description: r, when: 'signals.remoteAccessTool.success && signals.remoteAccessTool.anomaly', verdict: deny }
  - { id: rat-suspected, description: r, when: 'signals.remoteAccessTool.success && signals.remoteAccessTool.anomalyConfidence >= 0.5', score: 45 }
  - { id: new-browser, description: n, when: 'signals.newBrowser.success && !signals.newBrowser.known', score: 50 }
  - { id: near-phone, description: p, when: 'signals.latestProximity.success && signals.latestProximity.proximityConfidence >= 0.8', score: -30 }
`;
const QUIET = { remoteAccessTool: rat(false, 0.1), newBrowser: newBrowser(true), latestProximity: near(0.2) };

describe('the floor: an input a risk-raising rule reads, degraded, holds the verdict at the degraded verdict', () => {
  const p = compile(POLICY);

  it('challenges a login whose remote-access detector timed out, where the score alone (10) allows', () => {
    const d = p.evaluate(input({ ...QUIET, remoteAccessTool: down('circuit_open') }));
    expect(d).toMatchObject({ verdict: 'challenge', score: 10, decidedBy: 'degraded' });
    expect(d.degraded).toEqual({
      verdict: 'challenge',
      inputs: [{ input: 'remoteAccessTool', reason: 'circuit_open' }],
      rules: [],
      floor: true,
    });
  });

  it('raises no floor for an input only a risk-lowering rule reads, but reports it degraded', () => {
    const d = p.evaluate(input({ ...QUIET, latestProximity: down('timeout') }));
    expect(d).toMatchObject({ verdict: 'allow', decidedBy: 'score' });
    expect(d.degraded).toEqual({
      verdict: 'challenge',
      inputs: [{ input: 'latestProximity', reason: 'timeout' }],
      rules: [],
      floor: false,
    });
  });

  it('leaves a clean decision alone: no degraded field, same verdict', () => {
    const d = p.evaluate(input(QUIET));
    expect(d).toMatchObject({ verdict: 'allow', decidedBy: 'score', score: 0 });
    expect(d.degraded).toBeUndefined();
  });

  it('does not count not_applicable, missing_identifiers or not_configured as degraded, nor as an outage (their onUnavailable applies)', () => {
    const q = compile(`${POLICY}outage:
  rules:
    - { id: any-down, when: { unavailableAtLeast: 1 }, verdict: challenge }
`);
    for (const reason of ['not_applicable', 'missing_identifiers', 'not_configured']) {
      const d = q.evaluate(input({ ...QUIET, remoteAccessTool: down(reason) }));
      expect(d.outage, reason).toBeUndefined();
      expect(d.degraded, reason).toBeUndefined();
      expect(d.verdict, reason).toBe('allow');
      expect(d.score, reason).toBe(reason === 'not_applicable' ? 0 : 10);
    }
  });

  it('keeps the evidence: a deny from a rule evaluated on available inputs stands', () => {
    const d = p.evaluate(input({ ...QUIET, remoteAccessTool: rat(true, 0.95), newBrowser: down('timeout') }));
    expect(d).toMatchObject({ verdict: 'deny', decidedBy: 'verdict' });
    expect(d.degraded?.floor).toBe(true);
  });

  it('treats history without a Log API (not_configured) as no degradation, and a lagging follower as one', () => {
    const q = compile(`thresholds: { challenge: 40, deny: 80 }
rules:
  - { id: failures, description: f, when: 'history.failedAuthentications1h >= 5', score: 30 }
`);
    const without = q.evaluate(input({}, { featuresUnavailable: { history: 'not_configured' } }));
    expect(without).toMatchObject({ verdict: 'allow', decidedBy: 'score' });
    expect(without.degraded).toBeUndefined();
    const behind = q.evaluate(input({}, { featuresUnavailable: { history: 'RG_ERR_HISTORY_BEHIND' } }));
    expect(behind).toMatchObject({ verdict: 'challenge', decidedBy: 'degraded' });
  });
});

describe('the cap: deny only on evidence', () => {
  it('caps onUnavailable {verdict: deny} at the degraded verdict, and warns at load', () => {
    const r = compilePolicy(
      't.yaml',
      `apiVersion: riskgate/v1
kind: Policy
name: t
thresholds: { challenge: 40, deny: 80 }
signals:
  newBrowser: { onUnavailable: { verdict: deny } }
rules:
  - { id: nb, description: n, when: '!signals.newBrowser.known', score: 40 }
`,
      { now: NOW },
    );
    expect(r.issues.map((i) => [i.severity, i.message])).toEqual([
      [
        'warning',
        expect.stringMatching(
          /^signals\.newBrowser\.onUnavailable: .*capped at the degraded verdict \(challenge\)/,
        ),
      ],
    ]);
    const d = r.policy!.evaluate(input({ newBrowser: down('timeout') }));
    expect(d).toMatchObject({ verdict: 'challenge', decidedBy: 'degraded' });
    expect(d.degraded?.cappedFrom).toBe('deny');
  });

  it('caps what onUnavailable scores push over the deny threshold', () => {
    const p = compile(POLICY.replace('score: 20 }', 'score: 40 }'));
    // 45 (evidence) + 40 (newBrowser unavailable) = 85: a deny, but only 45 of it is evidence.
    const d = p.evaluate(input({ ...QUIET, remoteAccessTool: rat(false, 0.6), newBrowser: down('timeout') }));
    expect(d).toMatchObject({ verdict: 'challenge', score: 85, decidedBy: 'degraded' });
    expect(d.degraded).toMatchObject({ floor: true, cappedFrom: 'deny' });
  });

  it('counts a failing verdict: deny rule (failClosed) at most as the degraded verdict, and takes none of its actions', () => {
    const p = compile(`thresholds: { challenge: 40, deny: 80 }
rules:
  - { id: big, description: b, when: 'request.context.amount > 1000', verdict: deny, actions: [lockOut] }
actions:
  lockOut: { type: lock_out_user }
`);
    const d = p.evaluate(input({}));
    expect(d).toMatchObject({ verdict: 'challenge', decidedBy: 'degraded', actions: [] });
    expect(d.degraded).toEqual({
      verdict: 'challenge',
      inputs: [],
      rules: [{ id: 'big', reason: 'evaluation_error' }],
      floor: true,
      cappedFrom: 'deny',
    });
    expect(d.suppressedActions?.map((a) => a.reason)).toEqual(['rule_error']);
  });

  it('keeps a score deny only if it survives the risk-lowering rules riskgate could not evaluate', () => {
    const p = compile(POLICY);
    // 45 + 50 = 95; near-phone (-30) unseen: 65 is under 80, so the deny is not evidence.
    const unsure = p.evaluate(
      input({
        remoteAccessTool: rat(false, 0.6),
        newBrowser: newBrowser(false),
        latestProximity: down('timeout'),
      }),
    );
    expect(unsure).toMatchObject({ verdict: 'challenge', score: 95, decidedBy: 'degraded' });
    expect(unsure.degraded).toMatchObject({ floor: false, cappedFrom: 'deny' });
    // With 45 + 50 + 45 (a second suspicion rule) the deny survives the unseen -30.
    const q = compile(
      `${POLICY}  - { id: rat-again, description: r, when: 'signals.remoteAccessTool.anomalyConfidence >= 0.5', score: 45 }\n`,
    );
    const sure = q.evaluate(
      input({
        remoteAccessTool: rat(false, 0.6),
        newBrowser: newBrowser(false),
        latestProximity: down('timeout'),
      }),
    );
    expect(sure).toMatchObject({ verdict: 'deny', score: 140, decidedBy: 'score' });
    // The same login with proximity answered (and far away) is a deny on evidence either way.
    expect(
      p.evaluate(
        input({
          remoteAccessTool: rat(false, 0.6),
          newBrowser: newBrowser(false),
          latestProximity: near(0.1),
        }),
      ).verdict,
    ).toBe('deny');
  });

  it('caps an outage rule that denies, unless the policy makes deny its degraded verdict', () => {
    const body = (degraded: string) => `thresholds: { challenge: 40, deny: 80 }
${degraded}
outage:
  rules:
    - { id: all-down, when: { unavailableAtLeast: 2 }, verdict: deny }
rules:
  - { id: rat, description: r, when: 'signals.remoteAccessTool.anomaly', verdict: deny }
  - { id: nb, description: n, when: '!signals.newBrowser.known', score: 40 }
`;
    const both = input({ remoteAccessTool: down('timeout'), newBrowser: down('timeout') });
    expect(compile(body('')).evaluate(both)).toMatchObject({ verdict: 'challenge', decidedBy: 'degraded' });
    expect(compile(body('degraded: { verdict: deny }')).evaluate(both)).toMatchObject({
      verdict: 'deny',
      decidedBy: 'outage',
    });
  });
});

describe('the degraded verdict setting', () => {
  it('respects an explicit degraded: {verdict: deny}: the floor is deny and nothing is capped', () => {
    const p = compile(`${POLICY}degraded: { verdict: deny }\n`);
    const d = p.evaluate(input({ ...QUIET, remoteAccessTool: down('circuit_open') }));
    expect(d).toMatchObject({ verdict: 'deny', decidedBy: 'degraded' });
    expect(d.degraded).toMatchObject({ verdict: 'deny', floor: true });
    expect(
      compilePolicy(
        't.yaml',
        `apiVersion: riskgate/v1\nkind: Policy\nname: t\n${POLICY}degraded: { verdict: deny }\n`,
      ).issues,
    ).toEqual([]);
  });

  it('refuses degraded: {verdict: allow} at load, saying why', () => {
    const r = compilePolicy(
      't.yaml',
      `apiVersion: riskgate/v1\nkind: Policy\nname: t\n${POLICY}degraded: { verdict: allow }\n`,
    );
    expect(r.policy).toBeUndefined();
    expect(r.issues.map((i) => [i.line, i.severity, i.message])).toEqual([
      [
        14,
        'error',
        expect.stringMatching(
          /^degraded\.verdict: must be challenge or deny: an allow would let whoever can stress riskgate/,
        ),
      ],
    ]);
  });

  it('refuses overload: {verdict: allow} at load too: whoever can flood riskgate would open the gate', () => {
    const r = compilePolicy(
      't.yaml',
      `apiVersion: riskgate/v1\nkind: Policy\nname: t\n${POLICY}overload: { verdict: allow }\n`,
    );
    expect(r.policy).toBeUndefined();
    expect(r.issues.map((i) => i.message)).toEqual([
      expect.stringMatching(
        /^overload\.verdict: must be challenge or deny: an allow would let whoever can flood/,
      ),
    ]);
    const challenged = compilePolicy(
      't.yaml',
      `apiVersion: riskgate/v1\nkind: Policy\nname: t\n${POLICY}overload: { verdict: challenge }\n`,
    );
    expect(challenged.policy?.overloadVerdict).toBe('challenge');
  });

  it('defaults to challenge', () => {
    const d = compile(POLICY).evaluate(input({ ...QUIET, newBrowser: down('deadline') }));
    expect(d).toMatchObject({ verdict: 'challenge' });
    expect(d.degraded?.verdict).toBe('challenge');
  });
});

describe('the evaluation budget', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  // 200 x 200 x 200 comprehension steps: seconds of CPU on any machine, so the budget runs out
  // inside it however coarse the kernel's CPU accounting (a tick, a few milliseconds).
  const list = `[${Array.from({ length: 200 }, (_, i) => `${i}.0`).join(', ')}]`;
  const HEAVY_RULE = `  - { id: heavy, description: h, when: '${list}.exists(x, ${list}.exists(y, ${list}.exists(z, x + y + z < 0.0)))', score: 60 }\n`;
  const HEAVY = `${POLICY}${HEAVY_RULE}`;

  it('ends a comprehension that runs past it and answers the degraded verdict, never a deny', () => {
    const p = compile(HEAVY, { evaluationBudgetMs: 0.001 });
    const d = p.evaluate(input(QUIET));
    expect(d.verdict).toBe('challenge');
    expect(d.degraded?.rules).toContainEqual({ id: 'heavy', reason: 'evaluation_budget' });
    expect(d.degraded?.floor).toBe(true);
  });

  it('gives clean users allow or challenge, never deny, when the budget runs out before the deny rules', () => {
    // The heavy rule first: every rule after it, the hard deny included, finds the budget spent.
    const p = compile(
      `defaults: { evaluationBudgetMs: 1 }\n${POLICY.replace('rules:\n', `rules:\n${HEAVY_RULE}`)}`,
    );
    expect(p.ruleIds?.[0]).toBe('heavy');
    const logins: PolicyInput[] = [
      input(QUIET),
      input({ ...QUIET, newBrowser: newBrowser(false), latestProximity: near(0.9) }),
      input({ ...QUIET, newBrowser: newBrowser(false) }),
      input({ ...QUIET, remoteAccessTool: down('timeout') }),
    ];
    for (const login of logins) {
      const d = p.evaluate(login);
      expect(d.verdict).toBe('challenge');
      // Rules whose leading signal flag is false are known false without CEL: not degraded.
      expect(d.degraded?.rules[0]).toEqual({ id: 'heavy', reason: 'evaluation_budget' });
    }
  });

  it('gives clean users allow or challenge, never deny, with a budget of a microsecond (a cold start, a throttled CPU)', () => {
    const p = compile(HEAVY, { evaluationBudgetMs: 0.001 });
    const logins: PolicyInput[] = [
      input(QUIET),
      input({ ...QUIET, newBrowser: newBrowser(false), latestProximity: near(0.9) }),
      input({ ...QUIET, newBrowser: newBrowser(false) }),
      input({ ...QUIET, remoteAccessTool: down('timeout') }),
    ];
    for (const login of logins) {
      for (let i = 0; i < 3; i++) expect(['allow', 'challenge']).toContain(p.evaluate(login).verdict);
    }
  });

  it('still denies on evidence evaluated within it', () => {
    const p = compile(`thresholds: { challenge: 40, deny: 80 }
rules:
  - { id: rat, description: r, when: 'signals.remoteAccessTool.success && signals.remoteAccessTool.anomaly', verdict: deny }
`);
    expect(p.evaluate(input({ remoteAccessTool: rat(true, 0.95) })).verdict).toBe('deny');
  });

  it('counts CPU time, not wall time: a thread that is descheduled keeps its budget', () => {
    const sleeper = new Int32Array(new SharedArrayBuffer(4));
    // From before the budget starts: the CPU the waits and checks take counts toward it too.
    const cpuFrom = process.threadCpuUsage();
    startEvaluationBudget(10);
    try {
      // 25 ms twice without the CPU (as when the scheduler or a CPU quota takes it): wall time is
      // past the budget, riskgate's own work is not. (The kernel accounts CPU time per tick, up to
      // 4 ms here: the budget is larger than that, as any real one is.)
      Atomics.wait(sleeper, 0, 0, 25);
      expect(evaluationBudgetSpent()).toBe(false);
      Atomics.wait(sleeper, 0, 0, 25);
      expect(evaluationBudgetSpent()).toBe(false);
      // Work: the budget ends after about its length of CPU (at most twice: it is counted from the
      // first check past it in wall time). Bounded by wall time so a broken clock fails, not hangs.
      const until = performance.now() + 5_000;
      let x = 0;
      while (!evaluationBudgetSpent() && performance.now() < until) for (let i = 0; i < 1_000; i++) x += i;
      const cpu = process.threadCpuUsage(cpuFrom);
      expect(x).toBeGreaterThan(0);
      expect(evaluationBudgetSpent()).toBe(true);
      expect((cpu.user + cpu.system) / 1000).toBeGreaterThanOrEqual(10);
    } finally {
      endEvaluationBudget();
    }
  });

  it('reads the wall clock once per few checks while within it', () => {
    const wall = vi.spyOn(performance, 'now');
    startEvaluationBudget(20);
    try {
      for (let i = 0; i < 10 * CHECKS_PER_CLOCK_READ; i++) expect(evaluationBudgetSpent()).toBe(false);
    } finally {
      endEvaluationBudget();
    }
    // The start's read and one per CHECKS_PER_CLOCK_READ checks, not one per check.
    expect(CHECKS_PER_CLOCK_READ).toBeGreaterThan(1);
    expect(wall).toHaveBeenCalledTimes(1 + 10);
  });

  it('finds it spent within a few checks of wall and CPU time passing it', () => {
    // Driven clocks: 5 ms at the start; from the 2nd check on, wall time is past the 20 ms budget
    // with no CPU used; from the check after the 9th, 25 ms of CPU have been used too.
    let checks = 0;
    let wallMs = 5;
    let cpuUs = 0;
    vi.spyOn(performance, 'now').mockImplementation(() => wallMs);
    vi.spyOn(process, 'threadCpuUsage').mockImplementation(() => ({ user: cpuUs, system: 0 }));
    startEvaluationBudget(20);
    try {
      for (;;) {
        checks++;
        if (checks === 2) wallMs = 30;
        if (checks === CHECKS_PER_CLOCK_READ + 2) {
          wallMs = 55;
          cpuUs = 25_000;
        }
        if (evaluationBudgetSpent() || checks === 100) break;
      }
      // The first check reads the clock (within); the next CHECKS_PER_CLOCK_READ - 1 pass
      // unread; the one after reads wall time past the budget and starts counting CPU; the next
      // reads 25 ms of CPU: spent, and it stays spent.
      expect(checks).toBe(CHECKS_PER_CLOCK_READ + 2);
      expect(evaluationBudgetSpent()).toBe(true);
    } finally {
      endEvaluationBudget();
    }
  });
});
