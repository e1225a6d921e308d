import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { DEV_API_KEY_FILE, DEV_OPS_KEY_FILE } from '../src/dev/dev-api-key.ts';
import { type ConsoleBrowser, openConsoleBrowser } from './support/console-browser.ts';
import { eventually } from './support/eventually.ts';
import { freePort } from './support/free-port.ts';
import { buildDist, type RiskgateProcess, ROOT, startProcess } from './support/riskgate-process.ts';

/**
 * Issue 33: blocking a network from the console works as shipped. riskgate starts as `npm start`
 * starts it (the compiled entry point, no vendor configured: the embedded sandbox, the shipped
 * policies/, its default workers, the development keys in the state dir); an admin signs in to the
 * console in Debian's chromium, adds 198.51.100.0/24 to the shipped policy's blockedNetworks list,
 * and a login from 198.51.100.7, allowed before, is denied by the `blocked-network` rule.
 */

const work = mkdtempSync(join(tmpdir(), 'riskgate-shipped-lists-'));
let build: ReturnType<typeof buildDist>;
let p: RiskgateProcess;
let url: string;
let stateDir: string;
let browser: ConsoleBrowser | undefined;

beforeAll(async () => {
  build = buildDist('shipped-lists');
  // Sandbox mode reads its scenario beside the compiled sandbox (tsc copies no YAML).
  cpSync(join(ROOT, 'src/sandbox/scenario'), join(build.dir, 'sandbox/scenario'), { recursive: true });
  stateDir = mkdtempSync(join(work, 'state-'));
  // Sandbox mode says where it listens in its banner (stdout), not in the service log: a port chosen here.
  const port = await freePort();
  p = startProcess(build.main, {
    PATH: process.env.PATH ?? '',
    RISKGATE_STATE_DIR: stateDir,
    RISKGATE_PORT: String(port),
    SANDBOX_PORT: '0',
    RISKGATE_DECISION_LOG: 'off',
  });
  url = `http://127.0.0.1:${port}`;
  await eventually(
    async () => {
      if (p.child.exitCode !== null) throw new Error(`riskgate exited: ${p.stderr().slice(-2000)}`);
      return (await fetch(`${url}/readyz`).catch(() => undefined))?.status === 200 ? true : undefined;
    },
    { timeoutMs: 60_000, what: 'riskgate ready' },
  );
}, 180_000);

afterAll(async () => {
  await browser?.close();
  if (p !== undefined) {
    p.kill('SIGTERM');
    await p.exited;
  }
  build?.remove();
  rmSync(work, { recursive: true, force: true });
});

const key = (file: string) => readFileSync(join(stateDir, file), 'utf8').trim();

/** alice's login (a known browser, no remote control) from `ip`: the verdict and its rules. */
async function aliceFrom(ip: string): Promise<{ verdict: string; rules: string[] }> {
  const res = await fetch(`${url}/decide`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key(DEV_API_KEY_FILE)}`, 'content-type': 'application/json' },
    body: JSON.stringify({ ...demoRequest('alice', undefined), ip }),
  });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { verdict: string; reasons: { id: string }[] };
  return { verdict: body.verdict, rules: body.reasons.map((r) => r.id) };
}

describe('the shipped policy, as npm start runs it', () => {
  it('denies a login from a network an admin blocked on the console’s Lists page', async () => {
    const before = await aliceFrom('198.51.100.7');
    expect(before.verdict).not.toBe('deny');
    expect(before.rules).not.toContain('blocked-network');

    browser = await openConsoleBrowser();
    const { page, problems } = browser;
    await browser.signIn(url, key(DEV_OPS_KEY_FILE));
    await page.getByRole('link', { name: 'Lists', exact: true }).click();
    // The shipped policy declares its lists: no "declares no list" page.
    const lists = await page.locator('main').textContent();
    expect(lists).not.toContain('declares no list');
    expect(lists).toContain('vouchedAccounts');
    await page.getByRole('link', { name: 'blockedNetworks', exact: true }).click();
    await page.getByLabel('Value (address or CIDR)').fill('198.51.100.0/24');
    await page.getByLabel('Reason', { exact: true }).fill('credential stuffing from this range');
    await page.getByRole('button', { name: 'Add entry' }).click();
    await page.waitForURL(/added=/);
    expect(await page.locator('main').textContent()).toContain('Added 198.51.100.0/24.');
    expect(problems).toEqual([]);

    // Every worker's snapshot polls the change in within about a second.
    const after = await eventually(
      async () => {
        const d = await aliceFrom('198.51.100.7');
        return d.verdict === 'deny' ? d : undefined;
      },
      { what: 'the login from 198.51.100.7 denied' },
    );
    expect(after.rules).toContain('blocked-network');
    // Next door is not blocked.
    expect((await aliceFrom('198.51.101.7')).rules).not.toContain('blocked-network');
  }, 120_000);
});
