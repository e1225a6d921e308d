import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../src/cli/main.ts';
import { ListSnapshot } from '../src/lists/list-snapshot.ts';
import { compilePolicy } from '../src/policy/policy-compiler.ts';
import type { PolicyInput } from '../src/policy/policy-types.ts';
import { writePolicy } from './decide-harness.ts';
import { LIST_POLICY } from './support/list-policy.ts';

/**
 * Runtime lists in the policy language: declared under `lists`, read as
 * `lists.<name>.contains(value)`; a rule reading a list the policy does not declare is refused at
 * load; an unavailable snapshot skips the rules reading it and holds a risk-raising one's verdict
 * at the degraded floor.
 */

const withRule = (when: string) =>
  LIST_POLICY.replace('lists.blockedNetworks.contains(request.ip)', when.replaceAll('"', '\\"'));

function input(ip: string, lists: Partial<PolicyInput> = {}): PolicyInput {
  return {
    signals: {},
    devices: [],
    request: { accountId: 'a', ip, context: {} },
    now: new Date(0),
    ...lists,
  };
}

describe('a policy reading runtime lists', () => {
  it('refuses at load a rule reading a list it does not declare, with a suggestion', () => {
    const r = compilePolicy('p.yaml', withRule('lists.blockedNetwork.contains(request.ip)'));
    expect(r.policy).toBeUndefined();
    expect(r.issues).toContainEqual(
      expect.objectContaining({
        severity: 'error',
        line: 12,
        message: expect.stringContaining('unknown list "blockedNetwork" (did you mean "blockedNetworks"?)'),
      }),
    );
  });

  it('refuses a list read by a policy that declares none, and `policy check` exits 3 for it', async () => {
    const text = LIST_POLICY.replace(/lists:\n( {2}.*\n)+/, '').replace(
      / {2}- id: trusted-account[\s\S]*$/,
      '',
    );
    expect(compilePolicy('p.yaml', text).issues.map((i) => i.message)).toContainEqual(
      expect.stringContaining('lists.blockedNetworks: the policy declares no lists'),
    );
    const err: string[] = [];
    const code = await runCli(['policy', 'check', writePolicy(text)], {
      out: () => {},
      err: (l) => err.push(l),
    });
    expect(code).toBe(3);
  });

  it('refuses a list key kind it does not know, naming the field', () => {
    const r = compilePolicy('p.yaml', LIST_POLICY.replace('key: accountId', 'key: email'));
    expect(r.issues[0]?.message).toMatch(/^lists\.trustedAccounts\.key: /);
  });

  it('matches by CIDR and exactly, from the snapshot it is given', () => {
    const policy = compilePolicy('p.yaml', LIST_POLICY).policy!;
    expect(policy.requirements.lists).toBe(true);
    expect(policy.lists).toEqual([
      { name: 'blockedNetworks', key: 'ip', ttlMs: 86_400_000, description: 'Networks attacking us' },
      { name: 'trustedAccounts', key: 'accountId', ttlMs: undefined, description: undefined },
    ]);
    const lists = new ListSnapshot([
      { list: 'blockedNetworks', value: '192.0.2.0/24', kind: 'ip', expiresMs: null },
      { list: 'trustedAccounts', value: 'a', kind: 'accountId', expiresMs: null },
    ]);
    const denied = policy.evaluate(input('192.0.2.7', { lists }));
    expect(denied.verdict).toBe('deny');
    expect(denied.matchedRules.map((r) => r.id)).toEqual(['blocked-network', 'trusted-account']);
    expect(policy.evaluate(input('192.0.3.7', { lists })).verdict).toBe('allow');
  });

  it('skips the rules reading unavailable lists and holds the verdict at challenge, never allow', () => {
    const policy = compilePolicy('p.yaml', LIST_POLICY).policy!;
    const d = policy.evaluate(input('192.0.2.7', { listsUnavailable: 'RG_ERR_LISTS_UNAVAILABLE' }));
    expect(d.verdict).toBe('challenge');
    expect(d.decidedBy).toBe('degraded');
    expect(d.degraded?.inputs).toEqual([{ input: 'lists', reason: 'RG_ERR_LISTS_UNAVAILABLE' }]);
    expect(d.unavailable).toEqual([
      { signal: 'lists', reason: 'RG_ERR_LISTS_UNAVAILABLE', treatment: 'ignore' },
    ]);
    expect(d.skippedRules?.map((r) => r.id)).toEqual(['blocked-network', 'trusted-account']);
  });

  it('is tested with the lists a case gives (`policy test`), or with them unavailable', async () => {
    const policyPath = writePolicy(LIST_POLICY);
    const suite = `apiVersion: riskgate/v1
kind: PolicyTest
policy: policy.yaml
now: 2026-11-20T12:00:00Z
defaults:
  request: { accountId: alice, ip: 192.0.2.7 }
cases:
  - name: a login from a blocked network is denied
    given: { lists: { blockedNetworks: [192.0.2.0/24] } }
    expect: { verdict: deny, matchedRules: [blocked-network] }
  - name: a login from elsewhere is allowed
    given: { lists: { blockedNetworks: [198.51.100.0/24, 2001:db8::/32] } }
    expect: { verdict: allow }
  - name: unreadable lists hold it at challenge
    given: { lists: { unavailable: RG_ERR_LISTS_UNAVAILABLE } }
    expect: { verdict: challenge }
`;
    writeFileSync(join(dirname(policyPath), 'policy.test.yaml'), suite);
    const out: string[] = [];
    const err: string[] = [];
    const code = await runCli(['policy', 'test', dirname(policyPath)], {
      out: (l) => out.push(l),
      err: (l) => err.push(l),
    });
    expect({ code, err }).toEqual({ code: 0, err: [] });
  });
});
