import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeBenchScenario } from '../bench/bench-scenario.ts';
import {
  buildDecideBodies,
  DEMO_ACCOUNTS,
  loginInteractionId,
  seededInteractionId,
} from '../bench/decide-bodies.ts';
import type { RunningSandbox } from '../src/sandbox/server.ts';
import { getSignal, getToken } from './sandbox-helpers.ts';
import { startTestSandbox } from './support/test-sandbox.ts';

const BROWSER_USERS = DEMO_ACCOUNTS.filter((a) => a.platform === 'browser').map((a) => a.name);
const LOGINS = 5;

let dir: string;
let sb: RunningSandbox;
let token: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'bench-scenario-'));
  sb = await startTestSandbox({ scenario: await writeBenchScenario(dir, LOGINS) });
  token = await getToken(sb);
});
afterAll(async () => {
  await sb.stop();
  await rm(dir, { recursive: true, force: true });
});

/** The three browser signals of one login, as the sandbox answers them (times left out). */
async function browserSignals(name: string, interactionId: string): Promise<unknown[]> {
  const subject = {
    subjectAccountId: name,
    subjectUnitId: `${name}-web`,
    subjectVerificationStatus: 'unverified',
    subjectInteractionId: interactionId,
  };
  const calls: [string, Record<string, string>][] = [
    [
      'remote-access-tool',
      { accountId: name, unitId: `${name}-web`, verificationStatus: 'unverified', interactionId },
    ],
    ['new-browser', { ...subject, baselineAccountId: name }],
    [
      'latest-proximity',
      { ...subject, baselineUnitId: `${name}-app`, baselineVerificationStatus: 'verified' },
    ],
  ];
  const out: unknown[] = [];
  for (const [signal, params] of calls) {
    const res = await getSignal(sb, signal, params, token);
    expect(res.status, `${signal} ${interactionId}`).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    out.push({
      signalType: body.signalType,
      success: body.success,
      reason: body.reason,
      result: body.result,
    });
  }
  return out;
}

describe('bench scenario: every bench login is scored as the seeded one', () => {
  it('gives each browser account’s distinct bench interactions the seeded login’s signals', async () => {
    for (const name of BROWSER_USERS) {
      const seeded = await browserSignals(name, seededInteractionId(name));
      // Computed answers, so equal copies mean equal scoring (two failures would compare equal too).
      expect(seeded.every((s) => (s as { success: boolean }).success)).toBe(true);
      for (const k of [0, LOGINS - 1]) {
        expect(
          await browserSignals(name, loginInteractionId(name, 'browser', k)),
          `${name} login ${k}`,
        ).toEqual(seeded);
      }
    }
  });

  it('has no copy beyond the logins the bodies use: an unknown bench interaction has no observations', async () => {
    const res = await getSignal(
      sb,
      'remote-access-tool',
      {
        accountId: 'mallory',
        unitId: 'mallory-web',
        verificationStatus: 'unverified',
        interactionId: loginInteractionId('mallory', 'browser', LOGINS),
      },
      token,
    );
    expect(await res.json()).toMatchObject({ success: false, reason: 'insufficient_observations' });
  });

  it('sends each browser login with its own interaction, none a prefix of another', () => {
    const ids = buildDecideBodies(6 * LOGINS).map(
      (b) => (JSON.parse(b) as { interactionId: string }).interactionId,
    );
    const browser = ids.filter((id) => id.includes('-bench-'));
    expect(browser).toHaveLength(4 * LOGINS);
    expect(new Set(browser).size).toBe(browser.length);
    for (const a of browser) for (const b of browser) if (a !== b) expect(b.startsWith(a)).toBe(false);
  });
});
