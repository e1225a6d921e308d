import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { type Harness, startHarness } from './decide-harness.ts';
import { eventually } from './support/eventually.ts';
import { PATIENT_DEADLINE_MS, patientShippedPolicy } from './support/patient-policy.ts';

/**
 * The decision log (issue 15, item 7): IP, user agent, context, username and display name were
 * written in clear, and an unwritable log left the service ready while the audit trail stopped.
 */

let h: Harness | undefined;
afterEach(async () => {
  await h?.stop();
  h = undefined;
});

const HASH_KEY = 'decision-log-hash-key-0123';

async function aliceRequest(harness: Harness) {
  const { alice } = await lookUpUserIds(harness.sandbox, ['alice']);
  return {
    ...demoRequest('alice', alice),
    ip: '198.51.100.77',
    userAgent: 'Mozilla/5.0 (Secret Browser 99)',
    context: { email: 'alice@example.com' },
  };
}

describe('decision log redaction', () => {
  it('writes the configured fields dropped, hashed or truncated, with the schema version', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'riskgate-log-')), 'decisions.jsonl');
    h = await startHarness({
      // Patient timeouts: the user and devices read must be in the line, however busy the machine.
      policy: { yaml: patientShippedPolicy() },
      deadlineMs: PATIENT_DEADLINE_MS,
      env: {
        RISKGATE_DECISION_LOG: path,
        RISKGATE_DECISION_LOG_REDACT:
          'request.ip:truncate,request.userAgent:hash,request.context:drop,inputs.user.username:hash,inputs.user.display_name:drop,inputs.devices.display_name:drop',
        RISKGATE_DECISION_LOG_HASH_KEY: HASH_KEY,
      },
      riskgate: { decisionLog: undefined },
    });
    const body = await aliceRequest(h);
    const res = await h.decide(body);
    expect(res.status).toBe(200);
    await h.riskgate.decisionLog.flush();
    const text = readFileSync(path, 'utf8');
    const line = JSON.parse(text.trim().split('\n')[0]!) as {
      request: Record<string, unknown>;
      inputs: { user: Record<string, unknown>; devices: Record<string, unknown>[] };
    };
    expect(line).toMatchObject({ kind: 'decision', schemaVersion: 1, decisionId: res.body.decisionId });
    expect(line.request.ip).toBe('198.51.100.0/24');
    expect(line.request.userAgent).toMatch(/^hmac:[0-9a-f]{16}$/);
    expect(line.request).not.toHaveProperty('context');
    expect(line.inputs.user.username).toMatch(/^hmac:[0-9a-f]{16}$/);
    expect(line.inputs.user).not.toHaveProperty('display_name');
    expect(line.inputs.devices.length).toBeGreaterThan(0);
    for (const d of line.inputs.devices) expect(d).not.toHaveProperty('display_name');
    // What was redacted is nowhere in the file.
    for (const secret of ['198.51.100.77', 'Secret Browser', 'alice@example.com', '"username":"alice"']) {
      expect(text).not.toContain(secret);
    }
    // The answer itself is untouched (redaction is of what riskgate keeps only).
    expect(res.body.verdict).toBe('allow');
    // The decision store keeps the log's own line (serialised once), and its filters the raw values.
    const stored = await eventually(
      async () => {
        const found = await h!.ops('/decisions?ip=198.51.100.77');
        const page = (await found.json()) as { decisions: { decisionId: string }[] };
        if (page.decisions.length === 0) return undefined;
        return (await (await h!.ops(`/decisions/${page.decisions[0]!.decisionId}`)).json()) as {
          decisionId: string;
          line: unknown;
        };
      },
      { timeoutMs: 15_000, what: 'the decision in the store, found by its raw IP' },
    );
    expect(stored.decisionId).toBe(res.body.decisionId);
    expect(stored.line).toEqual(line);
  });

  it('keeps the same redaction in the decision store when the decision log is off', async () => {
    h = await startHarness({
      env: {
        RISKGATE_DECISION_LOG: 'off',
        RISKGATE_DECISION_LOG_REDACT: 'request.userAgent:hash,inputs.user.display_name:drop',
        RISKGATE_DECISION_LOG_HASH_KEY: HASH_KEY,
      },
      riskgate: { decisionLog: undefined },
    });
    const res = await h.decide(await aliceRequest(h));
    expect(res.status).toBe(200);
    const stored = await eventually(
      async () => {
        const found = await h!.ops(`/decisions/${res.body.decisionId}`);
        return found.status === 200
          ? ((await found.json()) as { line: { request: Record<string, unknown>; inputs: { user: object } } })
          : undefined;
      },
      { timeoutMs: 15_000, what: 'the decision in the store' },
    );
    expect(stored.line.request.userAgent).toMatch(/^hmac:[0-9a-f]{16}$/);
    expect(stored.line.inputs.user).not.toHaveProperty('display_name');
    expect(JSON.stringify(stored.line)).not.toContain('Secret Browser');
  });

  it('refuses to start with a hash rule and no hash key, naming the variable', async () => {
    await expect(startHarness({ env: { RISKGATE_DECISION_LOG_REDACT: 'request.ip:hash' } })).rejects.toThrow(
      /RISKGATE_DECISION_LOG_HASH_KEY is required/,
    );
  });
});

describe('a failing decision log destination', () => {
  const health = async (harness: Harness) =>
    (await (await fetch(`${harness.url}/healthz`)).json()) as {
      decisionLog?: { ok: boolean; lastError?: string };
    };

  it('by default keeps answering and alarms: /healthz, the metric and the service log', async () => {
    h = await startHarness({
      env: { RISKGATE_DECISION_LOG: '/dev/full' },
      riskgate: { decisionLog: undefined },
    });
    const harness = h;
    const body = await aliceRequest(harness);
    expect((await harness.decide(body)).status).toBe(200);
    await eventually(async () => (await health(harness)).decisionLog?.ok === false);
    expect((await health(harness)).decisionLog).toMatchObject({
      ok: false,
      lastError: expect.stringMatching(/^ENOSPC/),
    });
    expect(await (await harness.ops('/metrics')).text()).toMatch(/^riskgate_decision_log_healthy 0$/m);
    expect(harness.serviceLog).toContainEqual(
      expect.objectContaining({
        level: 'error',
        msg: 'decision log failing: decisions are not being recorded',
      }),
    );
    // Still deciding, still ready.
    expect((await harness.decide(body)).status).toBe(200);
    expect((await fetch(`${harness.url}/readyz`)).status).toBe(200);
  });

  it('with RISKGATE_DECISION_LOG_ON_FAILURE=refuse answers 503 and is not ready while it fails', async () => {
    h = await startHarness({
      env: { RISKGATE_DECISION_LOG: '/dev/full', RISKGATE_DECISION_LOG_ON_FAILURE: 'refuse' },
      riskgate: { decisionLog: undefined },
    });
    const harness = h;
    const body = await aliceRequest(harness);
    expect((await harness.decide(body)).status).toBe(200);
    await eventually(async () => (await health(harness)).decisionLog?.ok === false);
    const refused = await harness.decide(body);
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('5');
    expect(refused.body).toMatchObject({ code: 'RG_ERR_DECISION_LOG_UNAVAILABLE' });
    const ready = await fetch(`${harness.url}/readyz`);
    expect(ready.status).toBe(503);
    expect(await ready.json()).toMatchObject({
      ready: false,
      checks: { policy: true, token: true, history: true, decisionLog: false },
    });
  });
});
