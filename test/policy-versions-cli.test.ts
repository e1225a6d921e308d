import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../src/cli/main.ts';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { browserPolicy } from './support/browser-policy.ts';
import { eventually } from './support/eventually.ts';
import { LAUNCHER_TEST_MS, runLauncher } from './support/launcher.ts';
import {
  OPERATOR_KEYS,
  OPERATORS,
  type OperatorsHarness,
  startOperatorsHarness,
} from './support/operators-harness.ts';

/**
 * Issue 33: `riskgate policy push|propose|approve|activate|versions|revert` against a real
 * riskgate on port 0 (embedded database), through its operator API: a draft pushed from a file, a
 * second admin's approval (the author's refused, exit 1 with the problem printed), activation
 * served to logins, the list, a revert; a policy that does not compile exits 3 and keeps nothing;
 * the key is never printed. An approved version staged (a share of accounts, shadow), scheduled,
 * and each undone, audited once a step.
 */

let h: OperatorsHarness;
let dir: string;
beforeAll(async () => {
  h = await startOperatorsHarness({ policy: { yaml: browserPolicy('challenge') } });
  dir = mkdtempSync(join(tmpdir(), 'riskgate-versions-cli-'));
  for (const who of ['alice', 'bob'] as const) writeFileSync(join(dir, who), `${OPERATOR_KEYS[who]}\n`);
}, 60_000);
afterAll(() => h?.stop());

/** The CLI in process, as `who` (their key in a file), against the harness. */
async function cli(who: 'alice' | 'bob', ...args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli([...args, '--url', h.url, '--key-file', join(dir, who)], {
    out: (l) => out.push(l),
    err: (l) => err.push(l),
  });
  for (const key of Object.values(OPERATOR_KEYS)) expect([...out, ...err].join('\n')).not.toContain(key);
  return { code, out, err };
}

const verdict = async () => (await h.decide(demoRequest('alice', undefined))).body.verdict;

/** Waits until the replica serves `versionId`. */
const served = (versionId: string) =>
  eventually(
    async () => {
      const { body } = await h.as('bob', 'GET', '/policies');
      return (
        (body as { version?: { active?: { versionId: string } } }).version?.active?.versionId === versionId
      );
    },
    { what: `version ${versionId} served` },
  );

/** The version id at the start of a line the CLI printed (`draft <id> ...` or `<id>  <state> ...`). */
const idIn = (line: string | undefined) => /\b([0-9a-f]{24})\b/.exec(line ?? '')?.[1];

describe('riskgate policy push, propose, approve, activate, versions, revert', () => {
  it('takes a pushed file through a second admin to every login, lists it and reverts', async () => {
    const file = join(dir, 'login.yaml');
    writeFileSync(file, browserPolicy('deny'));
    const pushed = await cli('alice', 'policy', 'push', file, '-m', 'deny browsers');
    expect(pushed.code).toBe(0);
    expect(pushed.out[0]).toMatch(/^draft [0-9a-f]{24} \(login @ [0-9a-f]{16}\): deny browsers$/);
    const id = idIn(pushed.out[0])!;

    expect((await cli('alice', 'policy', 'propose', id)).out[0]).toMatch(new RegExp(`^${id}  proposed `));
    const self = await cli('alice', 'policy', 'approve', id);
    expect(self.code).toBe(1);
    expect(self.err.join('\n')).toMatch(
      /403 RG_ERR_POLICY_SELF_APPROVAL: .*an admin other than its author must approve it/,
    );
    expect((await cli('bob', 'policy', 'approve', id)).code).toBe(0);
    const again = await cli('bob', 'policy', 'approve', id);
    expect(again.code).toBe(1);
    expect(again.err[0]).toMatch(/^riskgate: 409 RG_ERR_POLICY_VERSION_CONFLICT: /);
    const activated = await cli('bob', 'policy', 'activate', id);
    expect(activated.code).toBe(0);
    expect(activated.out[0]).toMatch(new RegExp(`^${id}  active `));
    await served(id);
    expect(await verdict()).toBe('deny');

    // A second version, active; then back to the first by a revert.
    writeFileSync(file, browserPolicy('allow'));
    const second = idIn((await cli('alice', 'policy', 'push', file, '-m', 'allow browsers')).out[0])!;
    for (const [who, step] of [
      ['alice', 'propose'],
      ['bob', 'approve'],
      ['alice', 'activate'],
    ] as const)
      expect((await cli(who, 'policy', step, second)).code).toBe(0);
    await served(second);
    expect(await verdict()).toBe('allow');

    const listed = await cli('bob', 'policy', 'versions');
    expect(listed.code).toBe(0);
    expect(listed.out.map((l) => [idIn(l), l.split(/\s+/)[1]])).toEqual([
      [second, 'active'],
      [id, 'retired'],
    ]);
    expect(listed.out[1]).toContain('alice');
    expect(listed.out[1]).toContain('deny browsers');

    const reverted = await cli('bob', 'policy', 'revert', id, '-m', 'deny again');
    expect(reverted.code).toBe(0);
    expect(reverted.out[0]).toMatch(new RegExp(` active .* deny again \\(restores ${id}\\)$`));
    await served(idIn(reverted.out[0])!);
    expect(await verdict()).toBe('deny');
    const json = await cli('bob', 'policy', 'versions', '--json', '--limit', '1');
    expect(JSON.parse(json.out[0]!)).toMatchObject({
      versions: [{ state: 'active', restoresId: id, author: 'bob' }],
    });
  });

  it('stages an approved version to a share of accounts, schedules it, and undoes both, audited', async () => {
    const file = join(dir, 'staged.yaml');
    writeFileSync(file, browserPolicy('deny'));
    const id = idIn((await cli('alice', 'policy', 'push', file, '-m', 'deny browsers, staged')).out[0])!;
    expect((await cli('alice', 'policy', 'propose', id)).code).toBe(0);
    // Only an approved version is staged: riskgate's 409, printed.
    const early = await cli('bob', 'policy', 'stage', id, '--percent', '10');
    expect(early.code).toBe(1);
    expect(early.err[0]).toMatch(/^riskgate: 409 RG_ERR_POLICY_VERSION_CONFLICT: /);
    expect((await cli('bob', 'policy', 'approve', id)).code).toBe(0);

    const staged = await cli('bob', 'policy', 'stage', id, '--percent', '10');
    expect(staged).toMatchObject({ code: 0, out: [`staged ${id}: 10 % of accounts`] });
    await eventually(
      async () => {
        const { body } = await h.as('bob', 'GET', '/policies');
        const { version } = body as { version?: { staged?: { versionId: string; percent: number } } };
        return version?.staged?.versionId === id && version.staged.percent === 10;
      },
      { what: `version ${id} staged to 10 %` },
    );
    expect((await cli('bob', 'policy', 'stage', id, '--shadow')).out).toEqual([`staged ${id}: in shadow`]);
    expect(await cli('alice', 'policy', 'unstage')).toMatchObject({ code: 0, out: ['rollout ended'] });
    const nothing = await cli('alice', 'policy', 'unstage');
    expect(nothing.code).toBe(1);
    expect(nothing.err[0]).toMatch(/409 RG_ERR_POLICY_VERSION_CONFLICT: no policy version is staged/);

    const at = new Date(Date.now() + 3_600_000).toISOString();
    const scheduled = await cli('bob', 'policy', 'schedule', id, '--at', at, '--json');
    expect(scheduled.code).toBe(0);
    expect(JSON.parse(scheduled.out[0]!)).toEqual({ versionId: id, at, by: 'bob' });
    const past = await cli('bob', 'policy', 'schedule', id, '--at', '2020-01-01T00:00:00Z');
    expect(past.code).toBe(1);
    expect(past.err[0]).toMatch(/^riskgate: 400 RG_ERR_INVALID_INPUT: .*\(at\)$/);
    expect(await cli('bob', 'policy', 'unschedule')).toMatchObject({
      code: 0,
      out: ['scheduled activation cancelled'],
    });
    expect((await cli('bob', 'policy', 'unschedule')).code).toBe(1);
    const outOfRange = await cli('bob', 'policy', 'stage', id, '--percent', '100');
    expect(outOfRange.code).toBe(1);
    expect(outOfRange.err[0]).toMatch(/^riskgate: 400 RG_ERR_INVALID_INPUT: .*\(percent\)$/);

    // Each step once in the audit trail, with its operator and what became of it (a body the
    // route refuses, as percent 100, is refused before anything is recorded).
    const entries = (await h.auditSteps('bob', id))
      .filter(([action]) => /stage|schedule/.test(action))
      .reverse();
    expect(entries).toEqual([
      ['policy.stage', 'bob', 'refused'],
      ['policy.stage', 'bob', 'done'],
      ['policy.stage', 'bob', 'done'],
      ['policy.unstage', 'alice', 'done'],
      ['policy.schedule', 'bob', 'done'],
      ['policy.schedule', 'bob', 'refused'],
      ['policy.unschedule', 'bob', 'done'],
    ]);
  });

  it('refuses a rollout command without its option, or with another command’s, with exit 2', async () => {
    for (const args of [
      ['stage', 'x'],
      ['stage', 'x', '--percent', '10', '--shadow'],
      ['stage', 'x', '--percent', 'ten'],
      ['stage', '--percent', '10'],
      ['schedule', 'x'],
      ['unstage', 'x'],
      ['unschedule', '--at', '2030-01-01T00:00:00Z'],
      ['approve', 'x', '--percent', '10'],
    ])
      expect((await cli('bob', 'policy', ...args)).code, args.join(' ')).toBe(2);
  });

  it('exits 3 on a policy that does not compile, printing why, and keeps nothing', async () => {
    const before = (await cli('bob', 'policy', 'versions')).out.length;
    const file = join(dir, 'broken.yaml');
    writeFileSync(file, browserPolicy('deny').replace('request.platform', 'request.noSuchField'));
    const pushed = await cli('alice', 'policy', 'push', file, '-m', 'broken');
    expect(pushed.code).toBe(3);
    expect(pushed.err[0]).toMatch(
      /^riskgate: 400 RG_ERR_INVALID_INPUT: The policy does not compile: .*noSuchField/,
    );
    expect((await cli('bob', 'policy', 'versions')).out).toHaveLength(before);
  });

  it('refuses a usage error with exit 2 and a riskgate that does not answer with exit 1', async () => {
    expect((await cli('alice', 'policy', 'push', join(dir, 'login.yaml'))).code).toBe(2);
    expect((await cli('alice', 'policy', 'approve')).code).toBe(2);
    expect((await cli('alice', 'policy', 'versions', 'extra')).code).toBe(2);
    expect((await cli('alice', 'policy', 'versions', '--limit', '0')).code).toBe(2);
    expect((await cli('alice', 'policy', 'push', join(dir, 'missing.yaml'), '-m', 'x')).code).toBe(1);
    const out: string[] = [];
    const code = await runCli(
      ['policy', 'versions', '--url', 'http://127.0.0.1:9', '--key-file', join(dir, 'alice')],
      { out: (l) => out.push(l), err: (l) => out.push(l) },
    );
    expect(code).toBe(1);
    expect(out.join('\n')).toMatch(/did not answer/);
  });

  it(
    'acts as the first RISKGATE_OPS_KEYS entry from the real launcher, never printing the key',
    async () => {
      const { code, stdout, stderr } = await runLauncher(['policy', 'versions', '--url', h.url], {
        ...process.env,
        RISKGATE_OPS_KEYS: OPERATORS,
      });
      expect(stderr).toBe('');
      expect(code).toBe(0);
      expect(stdout).toMatch(/ active /);
      for (const key of Object.values(OPERATOR_KEYS)) expect(stdout + stderr).not.toContain(key);
    },
    LAUNCHER_TEST_MS,
  );
});
