import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadPolicy } from '../src/policy/policy-loader.ts';
import { runPolicyTestFile } from '../src/policy/policy-test-runner.ts';

const POLICIES = fileURLToPath(new URL('../policies/', import.meta.url));

describe('the shipped login policy', () => {
  it('loads without errors or warnings and reads all five signals plus the Admin user and devices', async () => {
    const policy = await loadPolicy(`${POLICIES}login.yaml`);
    expect(policy.warnings).toEqual([]);
    expect([...policy.requirements.signals].sort()).toEqual(
      ['activeCall', 'geovelocity', 'latestProximity', 'newBrowser', 'remoteAccessTool'].sort(),
    );
    expect(policy.requirements).toMatchObject({ adminUser: true, adminDevices: true });
    for (const s of policy.requirements.signals)
      expect(policy.signalSettings[s]?.timeoutMs).toBeGreaterThan(0);
  });

  it('passes its whole test suite', async () => {
    const suite = await runPolicyTestFile(`${POLICIES}login.test.yaml`);
    expect(suite.issues).toEqual([]);
    const failed = suite.cases.filter((c) => !c.passed).map((c) => `${c.name}: ${c.failures.join('; ')}`);
    expect(failed).toEqual([]);
    expect(suite.cases.length).toBeGreaterThanOrEqual(40);
  });

  it('covers every rule both ways and every referenced input unavailable', async () => {
    const suite = await runPolicyTestFile(`${POLICIES}login.test.yaml`);
    expect(suite.coverage.gaps).toEqual([]);
    expect(suite.coverage.rules.length).toBeGreaterThanOrEqual(25);
    expect(suite.coverage.unavailable.map((u) => u.signal).sort()).toEqual(
      [
        'activeCall',
        'adminDevices',
        'adminUser',
        'geovelocity',
        'history',
        'latestProximity',
        'lists',
        'newBrowser',
        'remoteAccessTool',
        'velocity',
      ].sort(),
    );
  });

  it('gives the sandbox demo accounts the verdicts their names promise', async () => {
    const suite = await runPolicyTestFile(`${POLICIES}login.test.yaml`);
    const verdictOf = (account: string) =>
      suite.cases.filter((c) => c.name.startsWith(`${account} `)).map((c) => c.decision?.verdict);
    expect(verdictOf('alice')).toEqual(['allow']);
    expect(verdictOf('bob')).toEqual(['challenge']);
    expect(verdictOf('mallory')).toEqual(['deny']);
    for (const v of verdictOf('trudy')) expect(['deny', 'challenge']).toContain(v);
    expect(verdictOf('trudy').length).toBe(2);
    expect(verdictOf('carol')).toEqual(['challenge']);
    expect(verdictOf('dave')).toEqual(['allow', 'allow']);
  });
});

describe('policies/README.md', () => {
  async function yamlBlocks(): Promise<string[]> {
    const { readFile } = await import('node:fs/promises');
    const text = await readFile(`${POLICIES}README.md`, 'utf8');
    return [...text.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!);
  }

  it('shows a complete policy example that compiles without errors', async () => {
    const { compilePolicy } = await import('../src/policy/policy-compiler.ts');
    const example = (await yamlBlocks()).find((b) => /^kind: Policy\s/m.test(b));
    expect(example).toBeDefined();
    const r = compilePolicy('README.md', example!, { now: new Date('2026-11-20T00:00:00Z') });
    expect(r.issues.filter((i) => i.severity === 'error')).toEqual([]);
    expect(r.policy?.ruleIds).toEqual([
      'rat-confirmed',
      'new-browser',
      'near-enrolled-phone',
      'many-failures',
    ]);
  });

  it('shows a test-suite example that the suite schema accepts', async () => {
    const { parse } = await import('yaml');
    const { policyTestFileSchema } = await import('../src/policy/policy-test-schema.ts');
    const example = (await yamlBlocks()).find((b) => b.includes('kind: PolicyTest'));
    expect(policyTestFileSchema.safeParse(parse(example!)).success).toBe(true);
  });
});
