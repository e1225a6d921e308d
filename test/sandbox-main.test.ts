import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { signalTree, spawnTree } from './support/process-tree.ts';

describe('npm run sandbox (src/dev/sandbox-main.ts)', () => {
  it('prints its URL and credentials, serves, and exits 0 on SIGTERM', async () => {
    // The development keys and sandbox.env it writes go to a temp dir, not the working tree.
    const state = mkdtempSync(join(tmpdir(), 'riskgate-sandbox-main-'));
    const child = spawnTree(process.execPath, ['--import', 'tsx', 'src/dev/sandbox-main.ts'], {
      env: {
        ...process.env,
        SANDBOX_PORT: '0',
        SANDBOX_ADMIN_API_KEY: 'a-real-secret',
        RISKGATE_STATE_DIR: state,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      let out = '';
      child.stdout!.setEncoding('utf8');
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no banner: ${out}`)), 15_000);
        child.stdout!.on('data', (chunk: string) => {
          out += chunk;
          const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
          if (m && out.includes('demo accounts')) {
            clearTimeout(timer);
            resolve(m[1]!);
          }
        });
        child.once('exit', (code) => reject(new Error(`exited ${code}: ${out}`)));
      });
      expect(out).toContain('sandbox-retrieval-secret');
      expect(out).toContain('urn:sandbox:iam:org:project:id:riskgate-signals:aud');
      // A value set in the environment is named, never echoed.
      expect(out).toContain('(from SANDBOX_ADMIN_API_KEY)');
      expect(out).not.toContain('a-real-secret');
      const info = (await (await fetch(`${url}/sandbox/info`)).json()) as {
        scenario: string;
        observations: number;
      };
      expect(info.scenario).toBe('default');
      expect(info.observations).toBeGreaterThan(0);

      child.kill('SIGTERM');
      const [code] = await once(child, 'exit');
      expect(code).toBe(0);
    } finally {
      signalTree(child, 'SIGKILL');
      rmSync(state, { recursive: true, force: true });
    }
  });
});
