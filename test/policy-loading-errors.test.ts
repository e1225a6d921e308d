import { describe, expect, it } from 'vitest';
import { compilePolicy } from '../src/policy/policy-compiler.ts';
import type { PolicyIssue } from '../src/policy/policy-types.ts';

/** A valid minimal policy; tests splice one bad thing into it. */
function policy(rules: string, extra = ''): string {
  return `apiVersion: riskgate/v1
kind: Policy
name: t
thresholds: { challenge: 40, deny: 80 }
rules:
${rules}
${extra}`;
}

function errorsOf(text: string): PolicyIssue[] {
  const r = compilePolicy('p.yaml', text, { now: new Date('2026-01-01T00:00:00Z') });
  const errors = r.issues.filter((i) => i.severity === 'error');
  expect(r.policy).toBeUndefined();
  expect(errors.length).toBeGreaterThan(0);
  return errors;
}

describe('policy loading errors carry file, line, column and a readable message', () => {
  it('accepts the minimal policy the other cases break', () => {
    const r = compilePolicy('p.yaml', policy('  - { id: a, description: d, when: "true", score: 1 }'));
    expect(r.issues).toEqual([]);
    expect(r.policy?.name).toBe('t');
  });

  it('reports YAML syntax errors at their position', () => {
    const [e] = errorsOf('apiVersion: riskgate/v1\nkind: Policy\nrules:\n  - id: a\n   when: [unclosed\n');
    expect(e!.file).toBe('p.yaml');
    expect(e!.line).toBeGreaterThanOrEqual(4);
  });

  it('reports a value of the wrong type at the value', () => {
    const [e] = errorsOf(policy('  - id: a\n    description: d\n    when: "true"\n    score: "ten"'));
    expect(e).toMatchObject({ line: 9, col: 12 });
    expect(e!.message).toMatch(/^rules\[0\]\.score: .*number/);
  });

  it('reports an unknown key at the key itself', () => {
    const [e] = errorsOf(policy('  - id: a\n    description: d\n    when: "true"\n    scoer: 10'));
    expect(e).toMatchObject({ line: 9, col: 5 });
    expect(e!.message).toBe('rules[0]: unknown key "scoer"');
  });

  it('reports a rule with both a score and a verdict', () => {
    const [e] = errorsOf(policy('  - { id: a, description: d, when: "true", score: 1, verdict: deny }'));
    expect(e).toMatchObject({ line: 6, col: 5 });
    expect(e!.message).toMatch(/exactly one of `score` or `verdict`/);
  });

  it('reports an unknown action name where it is used', () => {
    const [e] = errorsOf(
      policy('  - id: a\n    description: d\n    when: "true"\n    verdict: deny\n    actions: [lockout]'),
    );
    expect(e).toMatchObject({ line: 10, col: 15 });
    expect(e!.message).toBe('rules[0].actions[0]: unknown action "lockout"');
  });

  it('takes only lock-outs as what a "was this you?" no does, and compiles the asking rules', () => {
    const rule = '  - { id: a, description: d, when: "true", verdict: challenge, askUser: true }';
    const [e] = errorsOf(
      policy(rule, 'actions:\n  archive: { type: archive_device }\naskUser:\n  onNo: [archive, nothing]'),
    );
    expect(e!.message).toBe(
      'askUser.onNo[0]: action "archive" is not a lock_out_user: a "no" only locks the user out',
    );
    expect(errorsOf(policy(rule, 'askUser:\n  onNo: [nothing]'))[0]!.message).toBe(
      'askUser.onNo[0]: unknown action "nothing"',
    );
    const ok = compilePolicy(
      'p.yaml',
      policy(rule, 'actions:\n  lockOut: { type: lock_out_user, duration: 1h }\naskUser:\n  onNo: [lockOut]'),
    );
    expect(ok.issues).toEqual([]);
    expect([...(ok.policy?.askUser?.ruleIds ?? [])]).toEqual(['a']);
    expect(ok.policy?.askUser?.onNo).toMatchObject([
      { type: 'lock_out_user', name: 'lockOut', source: 'askUser.onNo', durationMs: 3_600_000 },
    ]);
  });

  it('explains the accepted forms of a bad onUnavailable', () => {
    const text = policy(
      '  - { id: a, description: d, when: signals.newBrowser.known, score: 1 }',
      'signals:\n  newBrowser:\n    onUnavailable: fail-closed',
    );
    const [e] = errorsOf(text);
    expect(e).toMatchObject({ line: 9, col: 20 });
    expect(e!.message).toMatch(
      /must be `ignore`, `\{score: <number>\}` or `\{verdict: allow\|challenge\|deny\}`/,
    );
  });

  it('points a misspelled field inside a folded multi-line expression at the word, with a hint', () => {
    const text = policy(`  - id: rat
    description: d
    when: >-
      signals.remoteAccessTool.success
      && signals.remoteAccessTool.anomalyConfidance >= 0.9
    verdict: deny`);
    const [e] = errorsOf(text);
    expect(e).toMatchObject({ file: 'p.yaml', line: 10, col: 35 });
    expect(e!.message).toBe(
      'rules[0].when: unknown field "anomalyConfidance" (did you mean "anomalyConfidence"?)',
    );
  });

  it('points a misspelled signal name at the name in a single-line expression', () => {
    const [e] = errorsOf(policy('  - { id: a, description: d, when: "signals.newBrowsr.known", score: 1 }'));
    // `when: "` starts at col 35; the field begins 8 characters into the expression.
    expect(e).toMatchObject({ line: 6, col: 45 });
    expect(e!.message).toMatch(/unknown field "newBrowsr" \(did you mean "newBrowser"\?\)/);
  });

  it('refuses a type mismatch such as "3" > 2', () => {
    const [e] = errorsOf(policy('  - id: a\n    description: d\n    when: \'"3" > 2\'\n    score: 1'));
    expect(e).toMatchObject({ line: 8, col: 12 });
    expect(e!.message).toMatch(/no such overload: string > int/);
  });

  it('refuses comparing a string field with a number', () => {
    const [e] = errorsOf(policy('  - { id: a, description: d, when: "user.status > 2", score: 1 }'));
    expect(e!.message).toMatch(/string > int/);
  });

  it('refuses a `when` that is not bool', () => {
    const [e] = errorsOf(
      policy('  - { id: a, description: d, when: "signals.remoteAccessTool.anomalyConfidence", score: 1 }'),
    );
    expect(e!.message).toBe('rules[0].when: must be of type bool, but is double');
  });

  it('refuses a `when` of dynamic type (a context attribute) until compared', () => {
    const [e] = errorsOf(policy('  - { id: a, description: d, when: "request.context.vip", score: 1 }'));
    expect(e!.message).toMatch(/must be of type bool, but is dyn/);
  });

  it('reports CEL syntax errors at the offending token', () => {
    const [e] = errorsOf(
      policy('  - id: a\n    description: d\n    when: "user.status == \\"x\\" &&"\n    score: 1'),
    );
    expect(e!.line).toBe(8);
    expect(e!.message).toMatch(/Unexpected token: EOF/);
  });

  it('enforces the expression depth limit', () => {
    const deep = `${'('.repeat(40)}true${')'.repeat(40)}`;
    const [e] = errorsOf(policy(`  - { id: a, description: d, when: "${deep}", score: 1 }`));
    expect(e!.message).toMatch(/depth|nesting/i);
  });

  it('enforces the expression size limit', () => {
    const long = Array.from({ length: 300 }, () => '1<2').join('||');
    const [e] = errorsOf(policy(`  - { id: a, description: d, when: "${long}", score: 1 }`));
    expect(e!.message).toMatch(/AST|nodes|too (many|large)|exceed/i);
  });

  it('refuses an archive_device selector that is not a list of strings', () => {
    const text = policy(
      '  - { id: a, description: d, when: "true", verdict: deny, actions: [arch] }',
      'actions:\n  arch: { type: archive_device, select: "devices.map(d, d.enrolled_at)" }',
    );
    const [e] = errorsOf(text);
    expect(e).toMatchObject({ line: 8 });
    expect(e!.message).toBe('actions.arch.select: must be of type list<string>, but is list<double>');
  });

  it('collects every error of a file, in file order', () => {
    const text = policy(`  - { id: a, description: d, when: "signals.nope", score: 1 }
  - { id: a, description: d, when: "1 + ", score: 1 }
  - { id: c, description: d, when: "user.status == 1.5", score: 1 }`);
    const errors = errorsOf(text);
    expect(errors.map((e) => e.line)).toEqual([6, 7, 7, 8]);
    expect(errors.some((e) => e.message.includes('duplicate rule id "a"'))).toBe(true);
  });

  it('refuses a challenge threshold above the deny threshold', () => {
    const text = policy('  - { id: a, description: d, when: "true", score: 1 }').replace(
      '{ challenge: 40, deny: 80 }',
      '{ challenge: 90, deny: 80 }',
    );
    const [e] = errorsOf(text);
    expect(e!.message).toBe('thresholds.challenge: challenge threshold must not exceed deny threshold');
  });

  it('refuses a malformed CIDR and a malformed expiry in overrides', () => {
    const text = policy(
      '  - { id: a, description: d, when: "true", score: 1 }',
      'overrides:\n  deny:\n    - { id: x, cidrs: [10.0.0.0/33], expiresAt: tomorrow, reason: r }',
    );
    const errors = errorsOf(text);
    expect(errors.map((e) => e.message)).toEqual([
      expect.stringMatching(/^overrides\.deny\[0\]\.cidrs\[0\]: must be an IPv4 or IPv6 CIDR/),
      expect.stringMatching(/^overrides\.deny\[0\]\.expiresAt: /),
    ]);
  });

  it('refuses a literal CIDR, regular expression or time zone that would fail every evaluation', () => {
    const text = policy(`  - id: office
    description: d
    score: 1
    when: >-
      request.ip.inCidr("10.0.0.0/8") || request.ip.inCidr("10.0.0.0/33")
  - { id: bot, description: d, when: 'request.userAgent.matches("(bot")', score: 1 }
  - { id: night, description: d, when: 'now.getHours("Europe/Zurch") < 6', score: 1 }
  - { id: offset, description: d, when: 'now.getDayOfWeek("+1") == 0', score: 1 }
  - { id: ci, description: d, when: 'request.userAgent.matches("[z-a]bot")', score: 1 }`);
    const errors = errorsOf(text);
    expect(errors.map((e) => [e.line, e.col, e.message])).toEqual([
      [
        10,
        60,
        'rules[0].when: inCidr: "10.0.0.0/33" is not a CIDR (address/prefix: IPv4 /0-32, IPv6 /0-128, e.g. "10.0.0.0/8")',
      ],
      [11, 65, 'rules[1].when: matches: invalid regular expression "(bot": missing closing ): `(bot`'],
      [12, 54, 'rules[2].when: getHours: unknown time zone "Europe/Zurch" (did you mean "Europe/Zurich"?)'],
      [
        13,
        59,
        'rules[3].when: getDayOfWeek: unknown time zone "+1"; a fixed offset is written "+01:00", or as an IANA name such as "Etc/GMT-1" for UTC+1',
      ],
      [
        14,
        64,
        'rules[4].when: matches: invalid regular expression "[z-a]bot": invalid character class range: `z-a`',
      ],
    ]);
  });

  it('refuses a literal timestamp or duration that cannot parse, and accepts valid literals', () => {
    const errors = errorsOf(
      policy(`  - { id: t, description: d, when: 'now > timestamp("2026-13-01T00:00:00Z")', score: 1 }
  - { id: u, description: d, when: 'duration("5x") > duration("1s")', score: 1 }`),
    );
    expect(errors.map((e) => [e.line, e.col, e.message])).toEqual([
      [
        6,
        43,
        'rules[0].when: timestamp(…) fails on every evaluation: timestamp() requires a string in ISO 8601 format',
      ],
      [7, 37, 'rules[1].when: duration(…) fails on every evaluation: Invalid duration string: 5x'],
    ]);
    const ok = compilePolicy(
      'p.yaml',
      policy(`  - id: ok
    description: d
    score: 1
    when: >-
      request.ip.inCidr("2001:db8::/32") && request.userAgent.matches("^curl/[0-9.]+$")
      && now.getHours("Europe/Zurich") < 6 && now > timestamp("2026-01-01T00:00:00Z")
      && request.userAgent.matches(request.context.pattern)`),
    );
    expect(ok.issues).toEqual([]);
  });

  it('warns about every hard allow: a rule verdict or an onUnavailable that allows whatever the score', () => {
    const text = policy(
      `  - { id: a, description: d, when: 'signals.latestProximity.success && user.status == "x"', score: 1 }
  - { id: vip, description: d, when: 'request.accountId == "ceo"', verdict: allow }`,
      `signals:
  latestProximity: { onUnavailable: { verdict: allow } }
admin:
  user: { onUnavailable: { verdict: challenge } }`,
    );
    const r = compilePolicy('p.yaml', text, { now: new Date('2026-01-01T00:00:00Z') });
    expect(r.policy).toBeDefined();
    expect(r.issues.map((i) => [i.severity, i.line, i.col, i.message])).toEqual([
      [
        'warning',
        7,
        77,
        'rules[1].verdict: a hard allow overrides any score, including a total at or above the deny threshold (only a hard deny beats it); to exempt accounts or networks, use overrides.allow, which expires',
      ],
      [
        'warning',
        9,
        37,
        'signals.latestProximity.onUnavailable: signals.latestProximity unavailable allows the login whatever the score (a hard allow; only a hard deny beats it)',
      ],
    ]);
  });

  it('warns, without refusing, about expired overrides and unused settings', () => {
    const text = policy(
      '  - { id: a, description: d, when: "true", score: 1 }',
      `signals:
  geovelocity: { timeoutMs: 100 }
overrides:
  allow:
    - { id: old, accounts: [x], expiresAt: "2025-01-01T00:00:00Z", reason: r }`,
    );
    const r = compilePolicy('p.yaml', text, { now: new Date('2026-01-01T00:00:00Z') });
    expect(r.policy).toBeDefined();
    expect(r.issues.map((i) => [i.severity, i.line, i.message])).toEqual([
      [
        'warning',
        8,
        'signals.geovelocity: settings for "geovelocity", but no rule reads signals.geovelocity',
      ],
      ['warning', 11, 'overrides.allow[0].expiresAt: override "old" expired; it is ignored'],
    ]);
  });
});

describe('velocity counters and history in a policy', () => {
  const COUNTERS = `velocity:
  counters:
    accountsPerIp: { key: [ip], count: distinct, of: accountId, window: 10m }`;

  it('refuses a counter name no counter declares, suggesting the closest', () => {
    const [e] = errorsOf(
      policy('  - { id: a, description: d, when: "velocity.accountPerIp >= 20", score: 1 }', COUNTERS),
    );
    expect(e!.message).toBe(
      'rules[0].when: unknown velocity counter "accountPerIp" (did you mean "accountsPerIp"?); declared: accountsPerIp',
    );
  });

  it('refuses velocity without any counter declared', () => {
    const [e] = errorsOf(policy('  - { id: a, description: d, when: "velocity.x > 1", score: 1 }'));
    expect(e!.message).toMatch(/declares no velocity counters/);
  });

  it('refuses a distinct counter without `of`, and a window out of range', () => {
    const errors = errorsOf(
      policy(
        '  - { id: a, description: d, when: "velocity.c > 1", score: 1 }',
        'velocity:\n  counters:\n    c: { key: [ip], count: distinct, window: 2d }',
      ),
    );
    expect(errors.map((e) => e.message).join('\n')).toMatch(
      /window: must be a duration like 30s, 10m, 1h or 24h/,
    );
    const [missingOf] = errorsOf(
      policy(
        '  - { id: a, description: d, when: "velocity.c > 1", score: 1 }',
        'velocity:\n  counters:\n    c: { key: [ip], count: distinct, window: 10m }',
      ),
    );
    expect(missingOf!.message).toBe('velocity.counters.c: a `distinct` counter needs `of`');
  });

  it('refuses a misspelled history feature with a suggestion', () => {
    const [e] = errorsOf(policy('  - { id: a, description: d, when: "history.totpReuse24h > 0", score: 1 }'));
    expect(e!.message).toMatch(/unknown field "totpReuse24h" \(did you mean "totpReuses24h"\?\)/);
  });

  it('compiles counters and history into what the decision service fetches', () => {
    const r = compilePolicy(
      'p.yaml',
      policy(
        '  - { id: a, description: d, when: "velocity.accountsPerIp >= 20 && history.failedAuthentications1h > 3", score: 1 }',
        `${COUNTERS}\nhistory: { timeoutMs: 30, maxLagSeconds: 300 }`,
      ),
    );
    expect(r.issues).toEqual([]);
    expect(r.policy?.requirements).toMatchObject({ velocity: true, history: true });
    expect(r.policy?.velocityCounters?.map((c) => [c.name, c.counts, c.of, c.windowMs])).toEqual([
      ['accountsPerIp', 'distinct', 'accountId', 600_000],
    ]);
    expect(r.policy?.featureSettings).toEqual({
      velocity: { timeoutMs: 50 },
      history: { timeoutMs: 30, maxLagMs: 300_000 },
    });
  });
});
