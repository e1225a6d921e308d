import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_ACCOUNTS, demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { loadPolicy } from '../src/policy/policy-loader.ts';
import { replayDecisions } from '../src/replay/replay-run.ts';
import { type Harness, startHarness, writePolicy } from './decide-harness.ts';
import { adminUserStatus } from './support/admin-user-status.ts';
import { eventually } from './support/eventually.ts';
import { PATIENT_DEADLINE_MS, patientShippedPolicy, patientTimeouts } from './support/patient-policy.ts';

/**
 * Issue 16: a shadow policy on live traffic (RISKGATE_SHADOW_POLICY_PATH). The candidate denies
 * (with a lock-out) whenever the login's context asks, and reads a signal the shipped policy does
 * not (geolocation). The active policies run with patient timeouts: the verdicts are tested, and a
 * busy machine must not make them degraded.
 */

const CANDIDATE = `apiVersion: riskgate/v1
kind: Policy
name: candidate
thresholds: { challenge: 40, deny: 80 }
rules:
  - id: geo-known
    description: Reads a signal the active policy does not.
    when: signals.geolocation.success && signals.geolocation.country != "ZZ"
    score: 0
  - id: shadow-deny
    description: Deny when the login context says so.
    when: "'shadowDeny' in request.context && request.context.shadowDeny == true"
    verdict: deny
actions:
  lockOut: { type: lock_out_user }
verdictActions:
  deny: [lockOut]
`;

interface LoggedLine {
  kind: string;
  decisionId: string;
  outcome: { verdict: string };
  inputs: { signals: Record<string, unknown> };
  shadow: { verdict: string };
}

function candidateDir(yaml: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'riskgate-shadow-'));
  writeFileSync(join(dir, 'candidate.yaml'), yaml);
  return dir;
}

async function counts(h: Harness, route: string): Promise<number> {
  const stats = (await h.control('GET', '/sandbox/stats')) as {
    routes: Record<string, Record<string, number>>;
  };
  return Object.values(stats.routes[route] ?? {}).reduce((a, b) => a + b, 0);
}

describe('a shadow policy on live traffic', () => {
  let h: Harness;
  let ids: Record<string, string | undefined>;
  const log = join(mkdtempSync(join(tmpdir(), 'riskgate-shadow-log-')), 'decisions.jsonl');
  const candidate = candidateDir(patientTimeouts(CANDIDATE));
  // The active policy, as the harness runs it and as the log is replayed.
  const active = patientShippedPolicy();
  beforeAll(async () => {
    h = await startHarness({
      policy: { yaml: active },
      deadlineMs: PATIENT_DEADLINE_MS,
      env: { RISKGATE_SHADOW_POLICY_PATH: candidate, RISKGATE_DECISION_LOG: log },
      riskgate: { decisionLog: undefined },
    });
    ids = await lookUpUserIds(
      h.sandbox,
      DEMO_ACCOUNTS.map((a) => a.username),
    );
  });
  afterAll(() => h?.stop());

  it('logs the shadow verdict beside the answer, never changes the answer and never acts', async () => {
    await h.control('POST', '/sandbox/stats/reset');
    const alice = await h.decide({ ...demoRequest('alice', ids.alice), context: { shadowDeny: true } });
    expect(alice.status).toBe(200);
    expect(alice.body.verdict).toBe('allow');
    expect(alice.body.actions).toEqual([]);
    for (const a of DEMO_ACCOUNTS)
      expect((await h.decide(demoRequest(a.username, ids[a.username]))).status).toBe(200);
    await h.riskgate.decisionLog.flush();

    // The shadow's deny took no action: alice is still enabled, no Admin PUT was made for her.
    expect(await adminUserStatus(h.sandbox, ids.alice!)).toBe('enabled');
    expect(await counts(h, 'GET /api/v1/signals/geolocation')).toBeGreaterThan(0);

    const { readFileSync } = await import('node:fs');
    const lines = readFileSync(log, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as LoggedLine)
      .filter((l) => l.kind === 'decision');
    const first = lines.find((l) => l.decisionId === alice.body.decisionId)!;
    expect(first.outcome.verdict).toBe('allow');
    expect(first.shadow).toMatchObject({
      policy: { name: 'candidate' },
      verdict: 'deny',
      rules: expect.arrayContaining(['shadow-deny']),
      shadowOnlyInputs: ['signals.geolocation'],
    });
    // The signal only the shadow reads is recorded (for a replay of the candidate), and the answer
    // does not show it.
    expect(first.inputs.signals.geolocation).toBeDefined();
    expect(Object.keys(alice.body.signals as object)).not.toContain('geolocation');
    expect(lines.every((l) => l.shadow !== undefined)).toBe(true);

    // The answers are the active policy's: replaying the log with it changes nothing.
    const replay = await replayDecisions(await loadPolicy(writePolicy(active)), [log]);
    expect(replay.changed).toBe(0);
    // And replaying with the candidate finds exactly the disagreements the shadow recorded live.
    const offline = await replayDecisions(await loadPolicy(candidate), [log], {
      changedLimit: Number.POSITIVE_INFINITY,
    });
    const disagreed = lines.filter((l) => l.shadow.verdict !== l.outcome.verdict).map((l) => l.decisionId);
    expect(offline.changes.map((c) => c.decisionId).sort()).toEqual(disagreed.sort());
    expect(offline.missingInputs).toEqual({});

    const metrics = await (await h.ops('/metrics')).text();
    expect(metrics).toMatch(/^riskgate_shadow_decisions_total\{active="allow",shadow="deny"\} 1$/m);
    expect(metrics).toMatch(
      /^riskgate_rule_hits_total\{policy="shadow",revision="[0-9a-f]+",rule="shadow-deny"\} 1$/m,
    );
  });

  it('shows both revisions in GET /policies and rule statistics in GET /policies/stats', async () => {
    const policies = (await (await h.ops('/policies')).json()) as {
      revision: string;
      shadow: { name: string };
    };
    expect(policies.shadow).toMatchObject({
      name: 'candidate',
      revision: expect.stringMatching(/^[0-9a-f]+$/),
    });
    const stats = (await (await h.ops('/policies/stats')).json()) as {
      revisions: {
        policy: string;
        decisions: number;
        rules: Record<string, { hits: number; rate: number }>;
      }[];
    };
    const active = stats.revisions.find((r) => r.policy === 'active')!;
    const shadow = stats.revisions.find((r) => r.policy === 'shadow')!;
    expect(active.decisions).toBeGreaterThan(0);
    expect(shadow.decisions).toBe(active.decisions);
    expect(shadow.rules['shadow-deny']).toEqual({
      hits: 1,
      rate: Math.round((1 / shadow.decisions) * 10_000) / 10_000,
    });
  });
});

describe('a shadow policy that does not load', () => {
  it('never affects the active policy, is reported, and is picked up once fixed', async () => {
    const dir = candidateDir('apiVersion: riskgate/v1\nkind: Policy\nname: broken\nrules: [');
    const h = await startHarness({
      policy: { yaml: patientShippedPolicy() },
      deadlineMs: PATIENT_DEADLINE_MS,
      env: { RISKGATE_SHADOW_POLICY_PATH: dir },
    });
    try {
      const ids = await lookUpUserIds(h.sandbox, ['alice']);
      const res = await h.decide(demoRequest('alice', ids.alice));
      expect(res.status).toBe(200);
      expect(res.body.verdict).toBe('allow');
      const policies = (await (await h.ops('/policies')).json()) as {
        name: string;
        shadow: Record<string, unknown>;
      };
      expect(policies.name).toBe('login');
      expect(policies.shadow).toMatchObject({
        loaded: false,
        lastError: expect.stringContaining('candidate.yaml'),
      });
      expect(h.serviceLog).toContainEqual(
        expect.objectContaining({ level: 'error', msg: 'shadow policy not loaded' }),
      );
      writeFileSync(join(dir, 'candidate.yaml'), CANDIDATE);
      await eventually(
        async () =>
          ((await (await h.ops('/policies')).json()) as { shadow: { name?: string } }).shadow.name ===
          'candidate'
            ? true
            : undefined,
        8000,
      );
    } finally {
      await h.stop();
    }
  }, 20_000);
});

describe('an input only the shadow policy reads', () => {
  // The active policy reads one signal; the candidate also reads the Admin user's devices.
  const ACTIVE = `apiVersion: riskgate/v1
kind: Policy
name: active
thresholds: { challenge: 40, deny: 80 }
rules:
  - { id: rat, description: remote control, when: 'signals.remoteAccessTool.success && signals.remoteAccessTool.anomaly', verdict: deny }
`;
  const READS_DEVICES = `apiVersion: riskgate/v1
kind: Policy
name: reads-devices
thresholds: { challenge: 40, deny: 80 }
rules:
  - { id: tampered, description: a tampered device, when: 'devices.exists(d, d.device_integrity == "failed")', score: 40 }
`;
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({
      policy: { yaml: patientTimeouts(ACTIVE) },
      deadlineMs: PATIENT_DEADLINE_MS,
      env: {
        RISKGATE_SHADOW_POLICY_PATH: candidateDir(patientTimeouts(READS_DEVICES)),
        RISKGATE_SUBJECT_BINDING: 'off',
      },
    });
  });
  afterAll(() => h?.stop());

  it('does not make the active answer degraded when its read fails', async () => {
    const { alice } = await lookUpUserIds(h.sandbox, ['alice']);
    await h.control('PUT', '/sandbox/faults', {
      rules: [{ route: 'GET /srv/admin/v1/users/*', errorRate: 1, errorStatus: 503 }],
    });
    try {
      const res = await h.decide(demoRequest('alice', alice));
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ verdict: 'allow', degraded: false });
    } finally {
      await h.control('DELETE', '/sandbox/faults');
    }
  });
});
