import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../src/cli/main.ts';
import { LAUNCHER, LAUNCHER_TEST_MS, runLauncher } from './support/launcher.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Runs the real launcher (node bin/riskgate.js …), as `npx riskgate` does. */
const riskgate = (args: string[]) => runLauncher(args);

/** Runs the CLI in-process, capturing its output. */
async function cli(args: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(args, { out: (l) => out.push(l), err: (l) => err.push(l) });
  return { code, out, err };
}

const GOOD = `apiVersion: riskgate/v1
kind: Policy
name: cli
thresholds: { challenge: 40, deny: 80 }
rules:
  - { id: nb, description: new browser, when: 'signals.newBrowser.success && !signals.newBrowser.known', score: 40 }
`;

const SUITE = (verdict: string) => `apiVersion: riskgate/v1
kind: PolicyTest
policy: cli.yaml
now: 2026-11-20T12:00:00Z
cases:
  - name: a new browser challenges
    given:
      request: { accountId: bob }
      signals: { newBrowser: { success: true, result: { known: false } } }
    expect: { verdict: ${verdict}, matchedRules: [nb], score: 40 }
`;

describe('riskgate policy CLI', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'riskgate-cli-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it(
    'check: exits 0 on the shipped policies (real launcher)',
    async () => {
      const r = await riskgate(['policy', 'check']);
      expect(r.stderr).toContain('ok policies/login.yaml: login @ ');
      expect(r.code).toBe(0);
    },
    LAUNCHER_TEST_MS,
  );

  it(
    'check: exits 3 with one file:line:col line per error (real launcher)',
    async () => {
      const file = join(dir, 'bad.yaml');
      await writeFile(
        file,
        GOOD.replace("'signals.newBrowser.success && !signals.newBrowser.known'", '\'"3" > 2\'').concat(
          '  - { id: nb2, description: d, when: \'user.statsu == "x"\', score: 1 }\n',
        ),
      );
      const r = await riskgate(['policy', 'check', file]);
      expect(r.code).toBe(3);
      expect(r.stdout.trim().split('\n')).toEqual([
        `${file}:6:48 rules[0].when: no such overload: string > int`,
        `${file}:7:44 rules[1].when: unknown field "statsu" (did you mean "status"?)`,
      ]);
    },
    LAUNCHER_TEST_MS,
  );

  it(
    'test: exits 0 on the shipped suite (real launcher)',
    async () => {
      const r = await riskgate(['policy', 'test']);
      expect(r.stdout).toMatch(/\n\d+ passed, 0 failed/);
      expect(r.code).toBe(0);
    },
    LAUNCHER_TEST_MS,
  );

  it(
    'test: exits 4 on a failing case and says what differed (real launcher)',
    async () => {
      const sub = await mkdtemp(join(dir, 'fail-'));
      await writeFile(join(sub, 'cli.yaml'), GOOD);
      await writeFile(join(sub, 'cli.test.yaml'), SUITE('deny'));
      const r = await riskgate(['policy', 'test', sub]);
      expect(r.code).toBe(4);
      expect(r.stdout).toContain('✗ a new browser challenges');
      expect(r.stdout).toContain('verdict: expected deny, got challenge (score 40, decided by score)');
      expect(r.stdout).toContain('0 passed, 1 failed');
    },
    LAUNCHER_TEST_MS,
  );

  it('test: --json reports cases, coverage and the decision for machines', async () => {
    const sub = await mkdtemp(join(dir, 'json-'));
    await writeFile(join(sub, 'cli.yaml'), GOOD);
    await writeFile(join(sub, 'cli.test.yaml'), SUITE('challenge'));
    const r = await cli(['policy', 'test', sub, '--json']);
    expect(r.code).toBe(0);
    const report = JSON.parse(r.out.join('\n'));
    expect(report).toMatchObject({ ok: true, passed: 1, failed: 0 });
    expect(report.suites[0].cases[0]).toMatchObject({
      name: 'a new browser challenges',
      passed: true,
      verdict: 'challenge',
    });
    expect(report.suites[0].coverage.gaps).toEqual([
      'rule nb never evaluated to false',
      'newBrowser never unavailable',
    ]);
  });

  it('test: --require-coverage turns coverage gaps into exit 4', async () => {
    const sub = await mkdtemp(join(dir, 'cov-'));
    await writeFile(join(sub, 'cli.yaml'), GOOD);
    await writeFile(join(sub, 'cli.test.yaml'), SUITE('challenge'));
    expect((await cli(['policy', 'test', sub])).code).toBe(0);
    const r = await cli(['policy', 'test', sub, '--require-coverage']);
    expect(r.code).toBe(4);
    expect(r.out).toContain('  gap: rule nb never evaluated to false');
  });

  it('test: exits 3 when the suite file is invalid, with positions', async () => {
    const sub = await mkdtemp(join(dir, 'badsuite-'));
    await writeFile(join(sub, 'cli.yaml'), GOOD);
    await writeFile(join(sub, 'cli.test.yaml'), SUITE('maybe'));
    const r = await cli(['policy', 'test', sub]);
    expect(r.code).toBe(3);
    expect(r.out.join('\n')).toMatch(/cli\.test\.yaml:10:24 cases\[0\]\.expect\.verdict: /);
  });

  it('check --json lists what each policy reads', async () => {
    const r = await cli(['policy', 'check', 'policies', '--json']);
    expect(r.code).toBe(0);
    const report = JSON.parse(r.out.join('\n'));
    expect(report.policies[0]).toMatchObject({
      name: 'login',
      signals: ['remoteAccessTool', 'newBrowser', 'latestProximity', 'geovelocity', 'activeCall'],
      adminUser: true,
      adminDevices: true,
    });
  });

  it('exits 2 on usage errors', async () => {
    expect((await cli(['policy'])).code).toBe(2);
    expect((await cli(['policy', 'frobnicate'])).code).toBe(2);
    expect((await cli(['policy', 'check', '--bogus'])).code).toBe(2);
  });

  it('exits 3 with a clear message when the path to check or test does not exist', async () => {
    const missing = join(dir, 'nope');
    const check = await cli(['policy', 'check', missing]);
    expect(check.code).toBe(3);
    expect(check.err).toEqual([
      `riskgate policy check: ${missing}: no such file or directory (nothing checked)`,
    ]);
    const test = await cli(['policy', 'test', missing]);
    expect(test.code).toBe(3);
    expect(test.err).toEqual([
      `riskgate policy test: ${missing}: no such file or directory (nothing tested)`,
    ]);
  });

  it('test: exits 3 when the directory holds no suite', async () => {
    const sub = await mkdtemp(join(dir, 'nosuite-'));
    await writeFile(join(sub, 'cli.yaml'), GOOD);
    const r = await cli(['policy', 'test', sub]);
    expect(r.code).toBe(3);
    expect(r.err).toContain(`riskgate policy test: no *.test.yaml suites in ${sub}`);
  });

  it('check: prints a literal that would fail every evaluation at file:line:col, and warns on a hard allow', async () => {
    const file = join(dir, 'literals.yaml');
    await writeFile(
      file,
      GOOD.concat(
        `  - { id: office, description: o, when: 'request.ip.inCidr("10.0.0.0/33")', verdict: allow }\n`,
      ),
    );
    const r = await cli(['policy', 'check', file]);
    expect(r.code).toBe(3);
    expect(r.out).toHaveLength(2);
    expect(r.out[0]).toBe(
      `${file}:7:60 rules[1].when: inCidr: "10.0.0.0/33" is not a CIDR (address/prefix: IPv4 /0-32, IPv6 /0-128, e.g. "10.0.0.0/8")`,
    );
    expect(
      r.out[1]?.startsWith(`${file}:7:86 warning: rules[1].verdict: a hard allow overrides any score`),
    ).toBe(true);
  });

  it(
    'test --json into a pipe closed early (| head) ends quietly, without an EPIPE stack (real launcher)',
    async () => {
      const child = spawn(process.execPath, [LAUNCHER, 'policy', 'test', '--json'], {
        cwd: ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      // The reader goes away before the first byte, as `| head -c 0` does: every write hits EPIPE.
      child.stdout.destroy();
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => {
        stderr += d.toString();
      });
      const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
      expect(stderr).toBe('');
      expect(code).toBe(0);
    },
    LAUNCHER_TEST_MS,
  );

  it('schema: writes the JSON Schemas that the committed ones must equal', async () => {
    const sub = await mkdtemp(join(dir, 'schema-'));
    expect((await cli(['policy', 'schema', sub])).code).toBe(0);
    for (const name of ['policy.schema.json', 'policy-test.schema.json']) {
      const generated = await readFile(join(sub, name), 'utf8');
      const committed = await readFile(join(ROOT, 'policies', name), 'utf8');
      expect(committed, `policies/${name} is stale: run npx riskgate policy schema`).toBe(generated);
    }
  });
});
