import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { sandboxForFile } from './support/test-sandbox.ts';

const run = promisify(execFile);

async function has(command: string): Promise<boolean> {
  try {
    await run('sh', ['-c', `command -v ${command}`]);
    return true;
  } catch {
    return false;
  }
}

/** docs/sandbox.md's "A curl session" block, pointed at `port` instead of 4010. */
async function curlSession(port: number): Promise<string> {
  const doc = await readFile(new URL('../docs/sandbox.md', import.meta.url), 'utf8');
  const section = doc.slice(doc.indexOf('\n## A curl session\n'));
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  if (!block) throw new Error('docs/sandbox.md has no curl session block');
  return block.replaceAll('4010', String(port));
}

const tools = (await has('curl')) && (await has('openssl')) && (await has('base64'));

describe.skipIf(!tools)('docs/sandbox.md curl session', () => {
  const sb = sandboxForFile();

  it('gets a token, reads mallory’s remote-access-tool signal and signs an Admin request, as written', async () => {
    const script = await curlSession(sb.port);
    const { stdout } = await run('bash', ['-euo', 'pipefail', '-c', script], { timeout: 15_000 });
    // curl prints each JSON answer without a trailing newline: split where one document ends.
    const cut = stdout.indexOf('}{"users"');
    expect(cut).toBeGreaterThan(0);
    const signal = JSON.parse(stdout.slice(0, cut + 1));
    const admin = JSON.parse(stdout.slice(cut + 1)) as { users: { username: string }[] };
    expect(signal).toMatchObject({
      signalType: 'remote_access_tool',
      success: true,
      result: { anomaly: true },
    });
    expect(admin.users.map((u) => u.username)).toEqual(['mallory']);
    const stats = (await (await fetch(`${sb.url}/sandbox/stats`)).json()) as {
      tokensIssued: number;
      routes: Record<string, Record<string, number>>;
    };
    expect(stats.tokensIssued).toBe(1);
    expect(stats.routes['GET /srv/admin/v1/users']).toEqual({ '200': 1 });
  });
});
