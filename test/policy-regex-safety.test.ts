import { describe, expect, it } from 'vitest';
import { compilePolicy } from '../src/policy/policy-compiler.ts';
import type { PolicyInput } from '../src/policy/policy-types.ts';
import { compileTestPolicy } from './support/test-policy.ts';

const NOW = new Date('2026-11-20T12:00:00Z');

const compile = (body: string) => compileTestPolicy(body, { now: NOW });

function request(userAgent: string, context: Record<string, string> = {}): PolicyInput {
  return {
    signals: {},
    devices: [],
    request: { accountId: 'alice', platform: 'browser', userAgent, context },
    now: NOW,
  };
}

describe('matches runs in linear time (RE2), whatever the caller sends', () => {
  // The issue's attack: with a backtracking RegExp, 27 characters blocked the process for 550 ms,
  // doubling per character. 1,024 (the request limit) would never finish.
  const p = compile(`thresholds: { challenge: 40, deny: 80 }
rules:
  - { id: words, description: d, when: 'request.userAgent.matches("^(\\\\w+\\\\s?)*$")', score: 50 }
  - { id: ci, description: d, when: 'request.userAgent.matches("(?i)headless")', score: 10 }
`);

  it('evaluates the catastrophic pattern against a 1,024-character user agent at once, with the right answer', () => {
    const evil = `${'a'.repeat(1023)}!`;
    const started = performance.now();
    const d = p.evaluate(request(evil));
    const elapsedMs = performance.now() - started;
    expect(d.matchedRules.map((r) => r.id)).toEqual([]);
    expect(d.verdict).toBe('allow');
    // A backtracking engine needs ~2^1000 steps here; RE2 a few milliseconds. A generous bound that
    // only the attack can exceed (it would never return at all).
    expect(elapsedMs).toBeLessThan(2000);
    expect(p.evaluate(request('hello world ')).matchedRules.map((r) => r.id)).toEqual(['words']);
  });

  it('keeps RE2 syntax: inline flags work, so a case-insensitive match needs no lowerAscii()', () => {
    expect(p.evaluate(request('Mozilla/5.0 HeadlessChrome')).matchedRules.map((r) => r.id)).toEqual(['ci']);
  });

  it('runs RE2 on a pattern the caller supplies too (no literal to check at load)', () => {
    const q = compile(`thresholds: { challenge: 40, deny: 80 }
rules:
  - { id: ctx, description: d, when: 'request.userAgent.matches(request.context.pattern)', score: 50, onError: skip }
`);
    const started = performance.now();
    const d = q.evaluate(request(`${'a'.repeat(1023)}!`, { pattern: '^(a|a)*$' }));
    expect(performance.now() - started).toBeLessThan(2000);
    expect(d.matchedRules).toEqual([]);
    // An invalid caller pattern is an evaluation error, decided by onError (skip here).
    const bad = q.evaluate(request('x', { pattern: '(?=x)' }));
    expect(bad.matchedRules).toEqual([]);
    expect(bad.skippedRules?.[0]?.reason).toMatch(/invalid regular expression.*\(\?=/);
  });

  it('refuses at load a pattern RE2 cannot run, with file:line:col', () => {
    const r = compilePolicy(
      'p.yaml',
      `apiVersion: riskgate/v1
kind: Policy
name: t
thresholds: { challenge: 40, deny: 80 }
rules:
  - { id: la, description: d, when: 'request.userAgent.matches("bot(?!tle)")', score: 1 }
  - { id: br, description: d, when: 'request.userAgent.matches("(a)\\\\1")', score: 1 }
`,
    );
    expect(r.policy).toBeUndefined();
    expect(r.issues.map((i) => [i.line, i.col, i.severity, i.message])).toEqual([
      [
        6,
        64,
        'error',
        expect.stringMatching(
          /^rules\[0\]\.when: matches: invalid regular expression "bot\(\?!tle\)": invalid or unsupported Perl syntax: `\(\?!` \(lookarounds and back-references need backtracking/,
        ),
      ],
      [
        7,
        64,
        'error',
        expect.stringMatching(
          /^rules\[1\]\.when: matches: invalid regular expression "\(a\)\\1": invalid escape sequence/,
        ),
      ],
    ]);
  });

  it('leaves a string literal that contains ".matches(" alone', () => {
    const q = compile(`thresholds: { challenge: 40, deny: 80 }
rules:
  - { id: lit, description: d, when: 'request.userAgent == "x.matches(y)" || request.userAgent.matches("^bot$")', score: 50 }
`);
    expect(q.evaluate(request('x.matches(y)')).matchedRules.map((r) => r.id)).toEqual(['lit']);
    expect(q.evaluate(request('bot')).matchedRules.map((r) => r.id)).toEqual(['lit']);
    expect(q.evaluate(request('x._re2mat(y)')).matchedRules).toEqual([]);
  });
});

describe('a budget per evaluation', () => {
  // Linear is not cheap enough when a comprehension multiplies it: 256 x 256 matches of a long
  // user agent would hold the loop for seconds. The budget (CPU time, checked per element of a
  // comprehension) ends the rule; riskgate could not evaluate it, so the decision is degraded.
  const list = `[${Array.from({ length: 200 }, (_, i) => i).join(', ')}]`;
  const body = (onError: string) => `thresholds: { challenge: 40, deny: 80 }
defaults: { evaluationBudgetMs: 5 }
rules:
  - id: heavy
    description: d
    score: 10
    onError: ${onError}
    when: '${list}.exists(x, ${list}.exists(y, request.userAgent.matches("z[0-9]+q")))'
  - { id: after, description: d, when: 'request.userAgent.size() > 0', score: 45, onError: ${onError} }
`;

  it('ends the rules past the budget even with onError skip, and answers the degraded verdict', () => {
    const d = compile(body('skip')).evaluate(request('a'.repeat(1024)));
    const skipped = d.skippedRules?.map((r) => [r.id, r.reason]) ?? [];
    expect(skipped[0]).toEqual(['heavy', expect.stringMatching(/evaluation budget of 5 ms CPU exhausted/)]);
    // Every rule after the budget ran out failed too (the budget is for the whole evaluation).
    expect(skipped.map(([id]) => id)).toEqual(['heavy', 'after']);
    // A spent budget is riskgate's state, not the author's `skip`: risk-raising rules went unseen.
    expect(d).toMatchObject({ verdict: 'challenge', decidedBy: 'degraded' });
    expect(d.degraded).toEqual({
      verdict: 'challenge',
      inputs: [],
      rules: [
        { id: 'heavy', reason: 'evaluation_budget' },
        { id: 'after', reason: 'evaluation_budget' },
      ],
      floor: true,
    });
  });

  it('counts the rules per failClosed, and the verdict is the degraded one', () => {
    const d = compile(body('failClosed')).evaluate(request('a'.repeat(1024)));
    expect(d.matchedRules.map((r) => [r.id, r.error])).toEqual([
      ['heavy', expect.stringMatching(/evaluation budget/)],
      ['after', expect.stringMatching(/evaluation budget/)],
    ]);
    expect(d.verdict).toBe('challenge');
    expect(d.degraded?.floor).toBe(true);
  });

  it('does not touch a normal evaluation, and the next one gets a fresh budget', () => {
    const p = compile(body('skip'));
    p.evaluate(request('a'.repeat(1024)));
    // The same rule ends at its first element when the user agent matches.
    const d = p.evaluate(request('z1q'));
    expect(d.skippedRules ?? []).toEqual([]);
    expect(d.degraded).toBeUndefined();
    expect(d.matchedRules.map((r) => r.id)).toEqual(['heavy', 'after']);
  });
});
