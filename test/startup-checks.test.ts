import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MINIMUM_NODE, unsupportedNodeReason } from '../src/build-info/node-version.ts';

/**
 * What riskgate says before it runs: on a Node.js older than 24, a plain message from every
 * documented command instead of a loader error about node:sqlite; a RISKGATE_ variable it does not
 * read, with the one probably meant; a required variable that is missing, as required.
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TSX = join(ROOT, 'node_modules/tsx/dist/cli.mjs');

interface Run {
  code: number;
  stderr: string;
}

function run(node: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      node,
      args,
      // No RISKGATE_ variables but these: the test's own environment stays out.
      { cwd: ROOT, timeout: 60_000, env: { PATH: process.env.PATH ?? '', ...env } },
      (error, _stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stderr });
      },
    );
  });
}

/** A Node.js older than riskgate's on this machine (the system's node, when npm ci brought 24). */
function olderNode(): { path: string; version: string } | undefined {
  const which = spawnSync('which', ['-a', 'node'], { encoding: 'utf8' }).stdout ?? '';
  const candidates = [...which.split('\n'), '/usr/bin/node', '/usr/local/bin/node'].filter(Boolean);
  for (const path of new Set(candidates)) {
    const version = spawnSync(path, ['-p', 'process.versions.node'], { encoding: 'utf8' }).stdout?.trim();
    if (version && unsupportedNodeReason(version) !== undefined) return { path, version };
  }
  return undefined;
}

describe('the Node.js version', () => {
  it('is refused below 24.11 with a sentence, and package.json engines says the same minimum', () => {
    expect(unsupportedNodeReason('20.20.2')).toBe(
      'riskgate needs Node.js 24 (24.11 or later; this is 20.20.2)',
    );
    expect(unsupportedNodeReason('24.10.0')).toMatch(/needs Node\.js 24/);
    expect(unsupportedNodeReason('24.11.0')).toBeUndefined();
    expect(unsupportedNodeReason(process.versions.node)).toBeUndefined();
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { engines: { node: string } };
    expect(pkg.engines.node).toMatch(new RegExp(`^>=${MINIMUM_NODE[0]}\\.${MINIMUM_NODE[1]}\\b`));
  });

  it('npm keeps to errors here: no EBADENGINE flood from npm ci on an older Node', () => {
    // npm hands its own settings to scripts as npm_config_*: without them, the project's .npmrc speaks.
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_config_/i.test(k)));
    const npm = spawnSync('npm', ['config', 'get', 'loglevel'], { cwd: ROOT, env, encoding: 'utf8' });
    expect(npm.stdout.trim()).toBe('error');
  });

  const old = olderNode();
  if (old === undefined) {
    it.skip('is checked on an older Node (none on this machine: nothing to run the commands with)', () => {});
    return;
  }

  describe(`on an older Node (${old.path}, ${old.version})`, () => {
    let dist: string;
    beforeAll(() => {
      // `npm run build`, into a directory of its own.
      dist = mkdtempSync(join(tmpdir(), 'riskgate-dist-'));
      execFileSync(
        process.execPath,
        [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json', '--outDir', dist],
        { cwd: ROOT, stdio: 'pipe' },
      );
    }, 120_000);
    afterAll(() => rmSync(dist, { recursive: true, force: true }));

    const expectPlainRefusal = (r: Run, advice: RegExp) => {
      expect(r.stderr).toContain(`riskgate needs Node.js 24 (24.11 or later; this is ${old.version})`);
      expect(r.stderr).toMatch(advice);
      expect(r.stderr).not.toMatch(/ERR_UNKNOWN_BUILTIN_MODULE|node:sqlite|at .*\(/);
      expect(r.code).toBe(1);
    };

    it("docs/operations.md's production command, node dist/main.js", async () => {
      expectPlainRefusal(await run(old.path, [join(dist, 'main.js')]), /npx node .*main\.js/);
    });

    it("riskgate.env.example's command, node --env-file=riskgate.env dist/main.js", async () => {
      const r = await run(old.path, [
        `--env-file=${join(ROOT, 'riskgate.env.example')}`,
        join(dist, 'main.js'),
      ]);
      expectPlainRefusal(r, /npx node /);
    });

    it('./bin/riskgate.js, the CLI', async () => {
      const r = await run(old.path, [join(ROOT, 'bin/riskgate.js'), 'policy', 'check', 'policies']);
      expectPlainRefusal(r, /npx riskgate policy check policies/);
    });

    it('src/main.ts under tsx', async () => {
      expectPlainRefusal(await run(old.path, [TSX, 'src/main.ts']), /npx tsx src\/main\.ts/);
    });
  });
});

describe('the environment at start', () => {
  const VENDOR = {
    RISKGATE_API_KEYS: 'startup-check-caller-key',
    RISKGATE_SERVICE_ID: '7ef5fbc3-8a0d-4a44-8a5c-3b1f2a1e9c10',
    RISKGATE_SIGNALS_URL: 'http://127.0.0.1:9/api/v1',
    RISKGATE_CLIENT_ID: 'client',
    RISKGATE_CLIENT_SECRET: 'secret',
    RISKGATE_SIGNALS_AUDIENCE: 'urn:idp:iam:org:project:id:aud:aud',
    RISKGATE_ADMIN_URL: 'http://127.0.0.1:9',
    RISKGATE_ADMIN_API_KEY: 'admin-key',
  };

  it('warns of a RISKGATE_ variable riskgate does not read, with the one probably meant, then names what is required', async () => {
    // The token issuer's URL misspelled: it is "required", and the typo is said first.
    const r = await run(process.execPath, [TSX, 'src/main.ts'], {
      ...VENDOR,
      RISKGATE_AUTH_ULR: 'http://127.0.0.1:9',
    });
    const lines = r.stderr.trim().split('\n');
    const warning = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(warning).toMatchObject({
      level: 'warn',
      msg: 'RISKGATE_AUTH_ULR is not a riskgate variable, ignored (did you mean RISKGATE_AUTH_URL?)',
      variable: 'RISKGATE_AUTH_ULR',
    });
    expect(lines).toContain('riskgate: RISKGATE_AUTH_URL is required');
    expect(r.code).toBe(1);
  });

  it('refuses to start with counters on a shared Redis and the embedded database, naming both variables', async () => {
    // Nothing listens on port 9: the refusal comes before any connection is tried.
    const r = await run(process.execPath, [TSX, 'src/main.ts'], {
      ...VENDOR,
      RISKGATE_AUTH_URL: 'http://127.0.0.1:9',
      RISKGATE_FEATURE_STORE: 'redis://:redis-secret@127.0.0.1:9',
      RISKGATE_STATE_DIR: mkdtempSync(join(tmpdir(), 'riskgate-mixed-state-')),
    });
    expect(r.stderr).toMatch(
      /^riskgate: RISKGATE_FEATURE_STORE keeps velocity counters and the Log API follower's lease on Redis, shared by replicas, but RISKGATE_DATABASE \(sqlite\)/m,
    );
    expect(r.stderr).not.toContain('redis-secret');
    expect(r.code).toBe(1);
  });
});
