import { describe, expect, it } from 'vitest';
import type { PolicyFile } from '../policy/policy-schema.ts';
import { diffPolicies, isEmptyDiff, parsePolicyDocument } from './policy-version-diff.ts';

const BASE = `apiVersion: riskgate/v1
kind: Policy
name: login
thresholds: { challenge: 50, deny: 100 }
actions:
  lock: { type: lock_out_user }
rules:
  - id: browser
    description: every browser login
    when: request.platform == "browser"
    score: 10
  - id: tor
    description: a Tor exit
    when: request.ip == "192.0.2.1"
    verdict: deny
    actions: [lock]
  - id: kept
    description: stays as it is
    when: request.accountId == "a"
    score: 5
`;

const doc = (yaml: string): PolicyFile => {
  const parsed = parsePolicyDocument(yaml);
  if (parsed === undefined) throw new Error('test policy does not parse');
  return parsed;
};

describe('the diff of two policy versions by rule', () => {
  it('finds nothing in a reformatted copy (comments, flow style, key order)', () => {
    const reformatted = `# the same policy, written differently
kind: Policy
apiVersion: riskgate/v1
name: login
thresholds:
  deny: 100
  challenge: 50
actions: { lock: { type: lock_out_user } }
rules:
  - { id: browser, score: 10, description: every browser login, when: 'request.platform == "browser"' }
  - id: tor
    verdict: deny
    description: a Tor exit
    when: request.ip == "192.0.2.1"
    actions: [lock]
  - id: kept
    description: stays as it is
    when: request.accountId == "a"
    score: 5
`;
    const diff = diffPolicies(doc(BASE), doc(reformatted));
    expect(isEmptyDiff(diff)).toBe(true);
    expect(diff.unchanged).toBe(3);
  });

  it('names each changed field of a rule by kind, with old and new values', () => {
    const edited = BASE.replace('request.platform == "browser"', 'request.platform == "ios"')
      .replace('score: 10', 'score: 25')
      .replace('verdict: deny\n    actions: [lock]', 'verdict: challenge\n    shadow: true');
    const diff = diffPolicies(doc(BASE), doc(edited));
    expect(diff.added).toEqual([]);
    expect(diff.removed).toEqual([]);
    expect(diff.unchanged).toBe(1);
    expect(diff.changed).toEqual([
      {
        id: 'browser',
        changes: [
          {
            field: 'when',
            kind: 'condition',
            before: 'request.platform == "browser"',
            after: 'request.platform == "ios"',
          },
          { field: 'score', kind: 'score', before: 10, after: 25 },
        ],
      },
      {
        id: 'tor',
        changes: [
          { field: 'verdict', kind: 'verdict', before: 'deny', after: 'challenge' },
          { field: 'actions', kind: 'actions', before: ['lock'] },
          { field: 'shadow', kind: 'other', after: true },
        ],
      },
    ]);
    expect(diff.reordered).toBe(false);
  });

  it('lists added and removed rules whole, and a changed threshold or action as a section', () => {
    const edited =
      `${BASE.replace('challenge: 50', 'challenge: 40').replace('lock: { type: lock_out_user }', 'lock: { type: lock_out_user, duration: 1h }')}  - id: fresh
    description: a new rule
    when: request.accountId == "b"
    verdict: challenge
`.replace(/ {2}- id: browser[\s\S]*?score: 10\n/, '');
    const diff = diffPolicies(doc(BASE), doc(edited));
    expect(diff.added.map((r) => r.id)).toEqual(['fresh']);
    expect(diff.added[0]).toMatchObject({ verdict: 'challenge', when: 'request.accountId == "b"' });
    expect(diff.removed.map((r) => r.id)).toEqual(['browser']);
    expect(diff.sections).toEqual([
      {
        field: 'thresholds',
        kind: 'score',
        before: { challenge: 50, deny: 100 },
        after: { challenge: 40, deny: 100 },
      },
      {
        field: 'actions',
        kind: 'actions',
        before: { lock: { type: 'lock_out_user' } },
        after: { lock: { type: 'lock_out_user', duration: '1h' } },
      },
    ]);
  });

  it('says when the rules both keep come in another order', () => {
    const swapped = BASE.replace(
      /( {2}- id: browser[\s\S]*?score: 10\n)( {2}- id: tor[\s\S]*?actions: \[lock\]\n)/,
      '$2$1',
    );
    const diff = diffPolicies(doc(BASE), doc(swapped));
    expect(diff.reordered).toBe(true);
    expect(diff.changed).toEqual([]);
    expect(isEmptyDiff(diff)).toBe(false);
  });

  it('counts every rule as added when no version was active', () => {
    const diff = diffPolicies(undefined, doc(BASE));
    expect(diff.added.map((r) => r.id)).toEqual(['browser', 'tor', 'kept']);
    expect(diff.sections).toEqual([]);
  });

  it('gives undefined for YAML that is not a policy', () => {
    expect(parsePolicyDocument('rules: [')).toBeUndefined();
    expect(parsePolicyDocument('name: only')).toBeUndefined();
  });
});
