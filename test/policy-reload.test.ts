import { mkdir, mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { PolicyLoadError } from '../src/policy/policy-loader.ts';
import { createPolicyStore, type PolicyStore } from '../src/policy/policy-store.ts';
import type { PolicyInput } from '../src/policy/policy-types.ts';
import { eventually } from './support/eventually.ts';

function policyText(score: number, when = 'request.context.flag == true'): string {
  return `apiVersion: riskgate/v1
kind: Policy
name: reload
thresholds: { challenge: 40, deny: 80 }
rules:
  - id: flag
    description: the flag
    when: ${JSON.stringify(when)}
    score: ${score}
`;
}

const INPUT: PolicyInput = {
  signals: {},
  devices: [],
  request: { accountId: 'a', context: { flag: true } },
  now: new Date('2026-11-20T12:00:00Z'),
};

describe('policy store: hot reload keeps the last good policy', () => {
  let dir: string;
  let file: string;
  let store: PolicyStore | undefined;
  const logs: Record<string, unknown>[] = [];

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'riskgate-policy-'));
    file = join(dir, 'login.yaml');
    await writeFile(file, policyText(50));
    logs.length = 0;
  });

  afterEach(async () => {
    store?.close();
    store = undefined;
    await rm(dir, { recursive: true, force: true });
  });

  it('refuses a bad edit, keeps serving the last good policy and reports the error with positions', async () => {
    const errors: PolicyLoadError[] = [];
    store = await createPolicyStore({
      path: dir,
      watch: false,
      log: (l) => logs.push(l),
      onError: (e) => errors.push(e),
    });
    const good = store.current();
    expect(good.evaluate(INPUT)).toMatchObject({ verdict: 'challenge', score: 50 });

    await writeFile(file, policyText(50, 'request.context.flag == tru'));
    const outcome = await store.reload();

    expect(outcome.ok).toBe(false);
    expect(store.current()).toBe(good);
    expect(store.current().evaluate(INPUT).score).toBe(50);
    const status = store.status();
    expect(status.revision).toBe(good.revision);
    expect(status.failedReloads).toBe(1);
    expect(status.lastError?.errors).toEqual([
      { file, line: 8, col: 36, message: 'rules[0].when: unknown name "tru" (did you mean "true"?)' },
    ]);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(PolicyLoadError);
    expect(errors[0]!.code).toBe('RG_ERR_INVALID_POLICY');
    expect(logs.at(-1)).toMatchObject({
      level: 'error',
      code: 'RG_ERR_INVALID_POLICY',
      revision: good.revision,
    });
  });

  it('swaps in a valid edit atomically, clears the last error and calls onReload', async () => {
    const reloaded: string[] = [];
    store = await createPolicyStore({
      path: file,
      watch: false,
      log: (l) => logs.push(l),
      onReload: (p, info) => reloaded.push(`${info.previousRevision}->${p.revision}`),
    });
    const first = store.current();
    await writeFile(file, 'not: [valid');
    await store.reload();
    expect(store.status().lastError).toBeDefined();

    await writeFile(file, policyText(90));
    const outcome = await store.reload();

    expect(outcome).toMatchObject({ ok: true, changed: true });
    const next = store.current();
    expect(next).not.toBe(first);
    expect(next.evaluate(INPUT)).toMatchObject({
      verdict: 'deny',
      score: 90,
      policy: { revision: next.revision },
    });
    expect(first.evaluate(INPUT).score).toBe(50);
    expect(store.status()).toMatchObject({ revision: next.revision, reloads: 1, failedReloads: 1 });
    expect(store.status().lastError).toBeUndefined();
    expect(reloaded).toEqual([`${first.revision}->${next.revision}`]);
  });

  it('does not swap when the content is unchanged', async () => {
    store = await createPolicyStore({ path: file, watch: false, log: () => {} });
    const first = store.current();
    await writeFile(file, policyText(50));
    expect(await store.reload()).toEqual({ ok: true, changed: false, revision: first.revision });
    expect(store.current()).toBe(first);
  });

  it('picks up an editor-style save (write then rename) through the watcher', async () => {
    store = await createPolicyStore({ path: dir, debounceMs: 20, log: (l) => logs.push(l) });
    const first = store.current();
    const tmp = join(dir, '.login.yaml.swp');
    await writeFile(tmp, policyText(10));
    await rename(tmp, file);
    await eventually(() => store!.current() !== first);
    expect(store.current().evaluate(INPUT).score).toBe(10);
    expect(logs.some((l) => l.msg === 'policy reloaded')).toBe(true);
  });

  it('reports a bad edit seen by the watcher in status()', async () => {
    store = await createPolicyStore({ path: dir, debounceMs: 20, log: () => {} });
    const first = store.current();
    await writeFile(file, policyText(50).replace('score: 50', 'score: lots'));
    await eventually(() => store!.status().lastError !== undefined);
    expect(store.current()).toBe(first);
    expect(store.status().lastError?.errors[0]).toMatchObject({ file, line: 9, col: 12 });
  });

  it('picks up a Kubernetes ConfigMap update (an atomic `..data` symlink swap) through the watcher', async () => {
    // The kubelet's layout: login.yaml -> ..data/login.yaml, ..data -> ..<timestamp>/; an update
    // writes a new timestamped directory and renames a new `..data` link over the old one.
    const mount = join(dir, 'mount');
    await mkdir(join(mount, '..2026_11_20_v1'), { recursive: true });
    await writeFile(join(mount, '..2026_11_20_v1', 'login.yaml'), policyText(50));
    await symlink('..2026_11_20_v1', join(mount, '..data'));
    await symlink('..data/login.yaml', join(mount, 'login.yaml'));
    store = await createPolicyStore({
      path: mount,
      debounceMs: 20,
      pollIntervalMs: 0,
      log: (l) => logs.push(l),
    });
    const first = store.current();
    expect(first.evaluate(INPUT).score).toBe(50);

    await mkdir(join(mount, '..2026_11_20_v2'));
    await writeFile(join(mount, '..2026_11_20_v2', 'login.yaml'), policyText(20));
    await symlink('..2026_11_20_v2', join(mount, '..data_tmp'));
    await rename(join(mount, '..data_tmp'), join(mount, '..data'));

    await eventually(() => store!.current() !== first);
    expect(store.current().evaluate(INPUT).score).toBe(20);
    expect(store.status().reloads).toBe(1);
  });

  it('polls the content every pollIntervalMs, for mounts where file events never arrive', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      let checks = 0;
      store = await createPolicyStore({
        path: dir,
        watch: false,
        pollIntervalMs: 5000,
        log: () => {},
        onChecked: () => checks++,
      });
      const first = store.current();
      await writeFile(file, policyText(30));
      await vi.advanceTimersByTimeAsync(4999);
      // No check before the interval: a check that had run would have reloaded.
      expect(checks).toBe(0);
      expect(store.current()).toBe(first);

      await vi.advanceTimersByTimeAsync(1);
      await eventually(() => store!.current() !== first);
      expect(store.current().evaluate(INPUT).score).toBe(30);
    } finally {
      vi.useRealTimers();
    }
  });

  it('reports a broken file found by the poll once, not on every tick', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      let checks = 0;
      store = await createPolicyStore({
        path: dir,
        watch: false,
        pollIntervalMs: 1000,
        log: () => {},
        onChecked: () => checks++,
      });
      await writeFile(file, policyText(50, 'request.context.flag ==='));
      await vi.advanceTimersByTimeAsync(1000);
      await eventually(() => store!.status().failedReloads === 1 && checks === 1);
      // Three more polls, each settled before the next, and none reported it again.
      for (let i = 2; i <= 4; i++) {
        await vi.advanceTimersByTimeAsync(1000);
        await eventually(() => checks === i, { what: `poll ${i} settled` });
      }
      expect(store.status().failedReloads).toBe(1);
    } finally {
      vi.useRealTimers();
    }
  });

  it('does not reload on an event in the directory that leaves the policy unchanged', async () => {
    const reloaded: string[] = [];
    const checks: boolean[] = [];
    store = await createPolicyStore({
      path: dir,
      debounceMs: 20,
      pollIntervalMs: 0,
      log: () => {},
      onReload: (p) => reloaded.push(p.revision),
      onChecked: (changed) => checks.push(changed),
    });
    const first = store.current();
    await writeFile(join(dir, 'notes.txt'), 'unrelated');
    await writeFile(file, policyText(60));
    await eventually(() => store!.current() !== first && checks.includes(true));
    const before = checks.length;
    await writeFile(join(dir, 'notes.txt'), 'unrelated again');
    // The event's check has settled and found the policy unchanged.
    await eventually(() => checks.length > before, { what: "the unrelated event's check" });
    expect(checks.slice(before)).not.toContain(true);
    expect(reloaded).toHaveLength(1);
    expect(store.status()).toMatchObject({ reloads: 1, failedReloads: 0 });
  });

  it('fails to start when there is no good policy at all', async () => {
    await writeFile(file, policyText(50, '1 +'));
    await expect(createPolicyStore({ path: dir, watch: false, log: () => {} })).rejects.toBeInstanceOf(
      PolicyLoadError,
    );
  });

  it('refuses a directory with more than one policy file', async () => {
    await writeFile(join(dir, 'other.yaml'), policyText(1));
    await expect(createPolicyStore({ path: dir, watch: false, log: () => {} })).rejects.toThrow(
      /several policy files \(login\.yaml, other\.yaml\)/,
    );
  });
});
