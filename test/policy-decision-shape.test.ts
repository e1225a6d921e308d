import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * A policy's decisions have one shape, whatever members they carry (issue 32: each reader of a
 * decision on the hot path, the answer, its explanation, the log line, the actions, sees one map
 * instead of a megamorphic few; bench/RESULTS.md, "megamorphic property access on the hot path"),
 * and their JSON is what it was: an absent member is left out, the others in the one order. V8 is
 * asked in a child `node --allow-natives-syntax` (`%HaveSameMap`).
 */

const testPolicy = fileURLToPath(new URL('./support/test-policy.ts', import.meta.url));

const probe = `
  import { compileTestPolicy, down, newBrowser, rat } from ${JSON.stringify(testPolicy)};
  const p = compileTestPolicy(\`thresholds: { challenge: 40, deny: 80 }
signals:
  remoteAccessTool: { onUnavailable: { score: 10 } }
  newBrowser: { onUnavailable: { score: 20 } }
rules:
  - { id: rat, description: r, when: 'signals.remoteAccessTool.success && signals.remoteAccessTool.anomaly', verdict: deny }
  - { id: new-browser, description: n, when: 'signals.newBrowser.success && !signals.newBrowser.known', score: 50 }
\`, { now: new Date('2026-11-20T12:00:00Z') });
  const input = (signals, request = { accountId: 'alice', platform: 'browser', context: {} }) =>
    ({ signals, devices: [], request, now: new Date('2026-11-20T12:00:00Z') });
  const decisions = {
    // Nothing optional: a plain allow.
    plain: p.evaluate(input({ remoteAccessTool: rat(false, 0.1), newBrowser: newBrowser(true) })),
    // An input down: skipped rules, degraded.
    degraded: p.evaluate(input({ remoteAccessTool: down('timeout'), newBrowser: newBrowser(false) })),
    // The engine failing (no request): its own degraded answer.
    failed: p.evaluate(input({ remoteAccessTool: rat(false, 0.1), newBrowser: newBrowser(true) }, null)),
  };
  console.log(JSON.stringify({
    sameMap: [%HaveSameMap(decisions.plain, decisions.degraded), %HaveSameMap(decisions.plain, decisions.failed)],
    json: Object.fromEntries(Object.entries(decisions).map(([k, d]) => [k, Object.keys(JSON.parse(JSON.stringify(d)))])),
    decidedBy: Object.fromEntries(Object.entries(decisions).map(([k, d]) => [k, d.decidedBy])),
  }));`;

describe('a decision', () => {
  it('has one shape whatever members it carries, and its JSON only the present ones, in the one order', () => {
    const out = JSON.parse(
      execFileSync(
        process.execPath,
        ['--allow-natives-syntax', '--import', 'tsx', '--input-type=module', '--eval', probe],
        { encoding: 'utf8' },
      ),
    );
    expect(out.decidedBy).toEqual({ plain: 'score', degraded: 'score', failed: 'degraded' });
    const always = [
      'verdict',
      'score',
      'matchedRules',
      'thresholds',
      'unavailable',
      'actions',
      'policy',
      'decidedBy',
    ];
    expect(out.json).toEqual({
      plain: always,
      degraded: [...always, 'skippedRules', 'degraded'],
      failed: [...always, 'degraded'],
    });
    expect(out.sameMap).toEqual([true, true]);
  });
});
