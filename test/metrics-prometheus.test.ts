import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { BACKLOG_GAUGES, backlogOf } from '../bench/riskgate-backlog.ts';
import { ADMIN_OPERATIONS } from '../src/admin/admin-client.ts';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds, sandboxUpstream } from '../src/dev/embedded-sandbox.ts';
import type { RunningSandbox } from '../src/sandbox/server.ts';
import { SIGNALS_OPERATIONS } from '../src/signals/signals-client.ts';
import { patientPolicyEnv } from './support/patient-policy.ts';
import { promtool, promtoolAvailable } from './support/promtool.ts';
import {
  buildDist,
  PROCESS_KEY,
  PROCESS_OPS_KEY,
  processEnv,
  type RiskgateProcess,
  ROOT,
  startProcess,
} from './support/riskgate-process.ts';
import { sandboxControl } from './support/sandbox-control.ts';
import { startTestSandbox } from './support/test-sandbox.ts';

/**
 * `/metrics` as Prometheus reads it, from riskgate run as the container runs it (`node
 * dist/main.js`), alone and with two workers: the exposition passes `promtool check metrics`, the
 * standard process metrics are there, every circuit breaker route is listed before any call, and a
 * gauge of the store the workers share is not multiplied by the workers. The alert rules and the
 * Grafana dashboard in deploy/ read only metrics such a scrape holds. promtool comes from Debian's
 * `prometheus` package (.ci/run installs it; a local run without it skips those checks).
 */

const HAS_PROMTOOL = promtoolAvailable();
const ROUTES = [
  ...SIGNALS_OPERATIONS.map((op) => `signals ${op}`),
  ...ADMIN_OPERATIONS.map((op) => `admin ${op}`),
];

let dist: { main: string; remove: () => void };
let sandbox: RunningSandbox;
let work: string;
const running: RiskgateProcess[] = [];
/** Every scrape the tests took, for the names the rules and dashboard may use. */
const scrapes: string[] = [];

beforeAll(async () => {
  dist = buildDist('metrics');
  sandbox = await startTestSandbox();
  work = mkdtempSync(join(tmpdir(), 'riskgate-metrics-'));
}, 120_000);

afterAll(async () => {
  for (const p of running) p.kill();
  await Promise.all(running.map((p) => p.exited));
  await sandbox?.stop();
  dist?.remove();
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

function start(extra: Record<string, string> = {}): RiskgateProcess {
  const upstream = sandboxUpstream(sandbox);
  const p = startProcess(
    dist.main,
    processEnv(sandbox, {
      // The Log API follower too, as production runs it: its lag gauge is among the alerts.
      RISKGATE_LOGS_URL: upstream.logsUrl!,
      RISKGATE_LOG_API_KEY: upstream.logApiKey!,
      // The shipped policy with patient timeouts: alice's allow and mallory's deny, however busy the machine.
      ...patientPolicyEnv(work),
      RISKGATE_STATE_DIR: mkdtempSync(join(work, 'state-')),
      RISKGATE_DECISION_LOG: 'off',
      ...extra,
    }),
  );
  running.push(p);
  return p;
}

async function scrape(port: number): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`, {
    headers: { authorization: `Bearer ${PROCESS_OPS_KEY}` },
  });
  expect(res.status).toBe(200);
  const text = await res.text();
  scrapes.push(text);
  return text;
}

async function decide(port: number, body: unknown): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${port}/decide`, {
    method: 'POST',
    headers: { authorization: `Bearer ${PROCESS_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { verdict: string }).verdict;
}

function expectPromtoolAccepts(text: string): void {
  if (!HAS_PROMTOOL) return;
  const r = promtool(['check', 'metrics'], text);
  expect(r.output).toBe('');
  expect(r.status).toBe(0);
}

/** The values of every sample of `name` (any labels). */
function samples(text: string, name: string): number[] {
  return [...text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))].map((m) => Number(m[1]));
}

describe('/metrics of a running riskgate', () => {
  it('alone: promtool accepts it, it has the process metrics, and every breaker route is closed before any call', async () => {
    const p = start();
    const port = await p.port();
    const before = await scrape(port);
    for (const route of ROUTES)
      expect(before, route).toContain(`riskgate_circuit_state{route="${route}",state="closed"} 1`);
    expect(before).not.toMatch(/^riskgate_upstream_call_duration_seconds_count\{upstream="(signals|admin)"/m);

    const nowS = Date.now() / 1000;
    const one = (name: string) => {
      const values = samples(before, name);
      expect(values, name).toHaveLength(1);
      return values[0]!;
    };
    expect(one('process_cpu_seconds_total')).toBeGreaterThan(0);
    expect(one('process_start_time_seconds')).toBeGreaterThan(nowS - 300);
    expect(one('process_start_time_seconds')).toBeLessThanOrEqual(nowS + 1);
    expect(one('process_resident_memory_bytes')).toBeGreaterThan(1e6);
    expect(one('nodejs_heap_size_used_bytes')).toBeGreaterThan(1e5);
    expect(one('nodejs_heap_size_total_bytes')).toBeGreaterThanOrEqual(one('nodejs_heap_size_used_bytes'));
    if (process.platform === 'linux') {
      expect(one('process_open_fds')).toBeGreaterThan(3);
      expect(one('process_max_fds')).toBeGreaterThan(one('process_open_fds'));
    }
    expectPromtoolAccepts(before);
    // The bench's overload probe waits on these (bench/riskgate-backlog.ts): one renamed would read
    // as nothing queued, and the probe would not wait.
    for (const name of BACKLOG_GAUGES) expect(samples(before, name), name).toEqual([0]);
    expect(backlogOf(before)).toBe(0);

    // After decisions and a lock-out: histograms, actions, upstream calls.
    const { mallory } = await lookUpUserIds(sandbox, ['mallory']);
    expect(await decide(port, demoRequest('alice', undefined))).toBe('allow');
    expect(await decide(port, demoRequest('mallory', mallory))).toBe('deny');
    await expect
      .poll(async () => samples(await scrape(port), 'riskgate_action_outcomes_total').length, {
        timeout: 10_000,
      })
      .toBeGreaterThan(0);
    const after = await scrape(port);
    expect(after).toMatch(/^riskgate_decision_duration_seconds_bucket\{verdict="deny",le="\+Inf"\} 1$/m);
    expectPromtoolAccepts(after);
  }, 60_000);

  it('with two workers: promtool accepts the merged text, and the shared outbox’s pending count is reported once', async () => {
    // Lock-outs cannot be delivered: the one the decision below promises stays pending.
    await sandboxControl(sandbox.url, 'PUT', '/sandbox/faults', {
      rules: [{ route: 'PUT /srv/admin/v1/users/:id', errorRate: 1, errorStatus: 503 }],
    });
    try {
      const p = start({ RISKGATE_WORKERS: '2' });
      const port = await p.port();
      const { mallory } = await lookUpUserIds(sandbox, ['mallory']);
      expect(await decide(port, demoRequest('mallory', mallory))).toBe('deny');
      // Until every worker has read the store: each sample the store's count, 1.
      let text = '';
      // Each worker reads the store's count once a poll interval (1 s); on a starved machine a
      // worker's poll can lag far behind, hence the wide bound. On failure: what was last seen.
      await expect
        .poll(
          async () => {
            text = await scrape(port);
            return text.split('\n').filter((line) => line.startsWith('riskgate_outbox_'));
          },
          { timeout: 40_000, interval: 250 },
        )
        .toSatisfy((lines: string[]) => {
          const pending = samples(lines.join('\n'), 'riskgate_outbox_pending');
          return pending.length > 0 && pending.every((v) => v === 1);
        });
      expect(samples(text, 'riskgate_outbox_pending').reduce((a, b) => a + b, 0)).toBe(1);
      expect(text).toMatch(/^riskgate_outbox_pending 1$/m);
      // Per-process figures keep their worker label.
      expect(text).toMatch(/^riskgate_decisions_in_flight\{worker="1"\} \d+$/m);
      expect(text).toMatch(/^riskgate_decisions_in_flight\{worker="2"\} \d+$/m);
      expect(text).toMatch(/^process_cpu_seconds_total\{worker="2"\} [\d.e+-]+$/m);
      for (const route of ROUTES)
        expect(text, route).toContain(`riskgate_circuit_state{worker="2",route="${route}",state="closed"} 1`);
      expectPromtoolAccepts(text);
    } finally {
      await sandboxControl(sandbox.url, 'DELETE', '/sandbox/faults');
    }
  }, 90_000);
});

/** The metric names a PromQL expression reads (riskgate's, the process's and Node's). */
function metricNames(expr: string): string[] {
  return [...expr.matchAll(/\b((?:riskgate|process|nodejs)_[a-z0-9_]+)\b/g)].map((m) => m[1]!);
}

/** Every series name the scrapes hold (histograms by their `_bucket`, `_count` and `_sum`). */
function exportedNames(texts: readonly string[]): Set<string> {
  const names = new Set<string>();
  for (const text of texts)
    for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
      names.add(name!);
      if (type === 'histogram') for (const s of ['_bucket', '_count', '_sum']) names.add(`${name}${s}`);
    }
  return names;
}

describe('deploy/: alert rules and dashboard', () => {
  const rulesFile = join(ROOT, 'deploy/prometheus-rules.yaml');

  it.skipIf(!HAS_PROMTOOL)('promtool accepts the rule file and its unit tests pass', () => {
    const checked = promtool(['check', 'rules', rulesFile]);
    expect(checked.output).toMatch(/SUCCESS: \d+ rules found/);
    expect(checked.status).toBe(0);
    const tested = promtool(['test', 'rules', join(ROOT, 'deploy/prometheus-rules.test.yaml')]);
    expect(tested.output).toContain('SUCCESS');
    expect(tested.status).toBe(0);
  });

  it('the rules and every dashboard query read only metrics a running riskgate exports', () => {
    // The scrapes of the tests above: alone, with a lock-out done, and with two workers.
    expect(scrapes.length).toBeGreaterThan(2);
    const exported = exportedNames(scrapes);
    const rules = parseYaml(readFileSync(rulesFile, 'utf8')) as {
      groups: { rules: { alert?: string; record?: string; expr: string }[] }[];
    };
    const recorded = new Set(rules.groups.flatMap((g) => g.rules.flatMap((r) => r.record ?? [])));
    const ruleExprs = rules.groups.flatMap((g) => g.rules.map((r) => r.expr));
    const dashboard = JSON.parse(readFileSync(join(ROOT, 'deploy/grafana-dashboard.json'), 'utf8')) as {
      panels: { title: string; targets?: { expr: string }[] }[];
      templating: { list: { type: string; query: string }[] };
    };
    const panelExprs = [
      ...dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr)),
      ...dashboard.templating.list.filter((v) => v.type === 'query').map((v) => v.query),
    ];
    expect(ruleExprs.length).toBeGreaterThan(5);
    expect(panelExprs.length).toBeGreaterThan(5);
    for (const expr of [...ruleExprs, ...panelExprs]) {
      const names = metricNames(expr);
      expect(names.length, expr).toBeGreaterThan(0);
      for (const name of names)
        if (!recorded.has(name)) expect(exported.has(name), `${name} in ${expr}`).toBe(true);
    }
  });
});
