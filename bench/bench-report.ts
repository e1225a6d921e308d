import type { BenchResult } from './bench-run.ts';
import type { LatencySummary } from './latency-summary.ts';
import {
  type ComparisonFigures,
  comparisonWrong,
  REFERENCE_SERVERS,
  type Spread,
} from './reference-comparison.ts';
import { DEGRADED_VERDICT, verdictCheckCell } from './verdict-check.ts';

/** One of the issue's targets, as measured (recorded, never asserted). */
export interface TargetCheck {
  name: string;
  target: string;
  measured: string;
  /** null when the run did not measure it (e.g. no 1000/s step). */
  met: boolean | null;
}

const ms = (us: number, digits = 2) => (us / 1000).toFixed(digits);

/** A median with its spread over the rounds: `2.05 (1.92-2.31)`. */
function spreadText(s: Spread, digits = 2): string {
  const f = (v: number) => (Math.abs(v) >= 100 ? Math.round(v).toString() : v.toFixed(digits));
  return s.values.length > 1 ? `${f(s.median)} (${f(s.min)}-${f(s.max)})` : f(s.median);
}

function errorsText(errors: {
  timeouts: number;
  connection: number;
  dropped: number;
  status: Record<string, number>;
}) {
  const parts: string[] = [];
  if (errors.timeouts) parts.push(`${errors.timeouts} timeout`);
  if (errors.connection) parts.push(`${errors.connection} conn`);
  if (errors.dropped) parts.push(`${errors.dropped} dropped`);
  for (const [status, n] of Object.entries(errors.status)) parts.push(`${n}×${status}`);
  return parts.length > 0 ? parts.join(', ') : '0';
}

/** The step closest to `rate` (the targets are stated at 1000/s). */
function closest<T extends { rate: number }>(rows: T[], rate: number): T | undefined {
  let best: T | undefined;
  for (const row of rows) if (!best || Math.abs(row.rate - rate) < Math.abs(best.rate - rate)) best = row;
  return best;
}

/** The issue's targets against this run's figures. */
export function checkTargets(result: BenchResult): TargetCheck[] {
  const s = result.scenarios;
  const checks: TargetCheck[] = [];
  for (const profile of s.overhead.profiles) {
    const row = closest(profile.rates, 1000);
    const at = row ? `${row.rate}/s, ${profile.profile}` : profile.profile;
    const e2e: LatencySummary | undefined = row?.overheadEndToEndUs;
    checks.push({
      name: `overhead p99 (${at})`,
      target: '≤ 2 ms',
      measured: e2e ? `${ms(e2e.p99, 3)} ms (server-side ${ms(row!.overheadServerUs.p99, 3)} ms)` : 'n/a',
      met: e2e && e2e.count > 0 && row?.rate === 1000 ? e2e.p99 <= 2000 : null,
    });
    checks.push({
      name: `overhead p50 (${at})`,
      target: '≤ 0.5 ms',
      measured: e2e ? `${ms(e2e.p50, 3)} ms (server-side ${ms(row!.overheadServerUs.p50, 3)} ms)` : 'n/a',
      met: e2e && e2e.count > 0 && row?.rate === 1000 ? e2e.p50 <= 500 : null,
    });
  }
  checks.push({
    name: '/decide throughput vs hello-world (same run)',
    target: '≥ 35 %',
    measured: `${(s.throughput.ratio * 100).toFixed(1)} % (${s.throughput.decide.requestsPerSecond} vs ${s.throughput.hello.requestsPerSecond} req/s)`,
    met: s.throughput.hello.requestsPerSecond > 0 ? s.throughput.ratio >= 0.35 : null,
  });
  const refs = s.references;
  if (refs !== undefined) {
    const c = refs.closed;
    const o = refs.open;
    checks.push({
      name: 'CPU per 2xx answer vs the FLOOR, closed loop (same rounds)',
      target: '≤ 1.5x',
      measured: `${spreadText(c.cpuRatio.floor)}x (${c.cpuUsPer2xx.riskgate.median} vs ${c.cpuUsPer2xx.floor.median} µs)`,
      met: c.cpuRatio.floor.values.length > 0 ? c.cpuRatio.floor.median <= 1.5 : null,
    });
    checks.push({
      name: `CPU per 2xx answer vs the peer, open loop at ${o.rate}/s (same rounds)`,
      target: '≤ 1.3x',
      measured: `${spreadText(o.cpuRatio.peer)}x (${o.cpuUsPer2xx.riskgate.median} vs ${o.cpuUsPer2xx.peer.median} µs)`,
      met: o.cpuRatio.peer.values.length > 0 && o.rate === 200 ? o.cpuRatio.peer.median <= 1.3 : null,
    });
    checks.push({
      name: 'closed-loop decisions/s vs the FLOOR (same rounds)',
      target: '≥ 40 %',
      measured: `${(c.throughputRatio.floor.median * 100).toFixed(1)} % (${c.answersPerSecond.riskgate.median} vs ${c.answersPerSecond.floor.median} 2xx/s)`,
      met: c.throughputRatio.floor.values.length > 0 ? c.throughputRatio.floor.median >= 0.4 : null,
    });
    checks.push({
      name: "verdicts: the peer's quiet-day verdicts equal riskgate's; no wrong allow or deny in the rounds",
      target: '0 wrong',
      measured: comparisonWrong(refs).join('; ') || '0 wrong',
      met: comparisonWrong(refs).length === 0,
    });
  }
  for (const profile of s.upstream.profiles) {
    const row = closest(profile.rates, 1000);
    checks.push({
      name: `remote-access-tool POSTs per decision (${row ? `${row.rate}/s, ` : ''}${profile.profile})`,
      target: '≤ 0.1',
      measured: row ? `${row.ratPostsPerDecision} (${row.itemsPerBatch.mean} items/batch)` : 'n/a',
      met: row && row.rate === 1000 && row.decisions > 0 ? row.ratPostsPerDecision <= 0.1 : null,
    });
  }
  const t = s.upstream.tokens;
  checks.push({
    name: 'token requests',
    target: `one per token lifetime (≤ ${t.allowed} in ${t.runSeconds} s at ${t.lifetimeSeconds} s)`,
    measured: String(t.issued),
    met: t.issued >= 1 && t.issued <= t.allowed,
  });
  checks.push({
    name: 'RSS growth after warm-up',
    target: '≤ 10 %',
    measured: `${s.memory.rssGrowthPct} % (heap after GC ${s.memory.heapAfterGcGrowthPct} %)`,
    met: s.memory.samples.length >= 4 ? s.memory.rssGrowthPct <= 10 : null,
  });
  return checks;
}

/** The console / markdown report of one run (or of the median of several). */
export function renderReport(result: BenchResult, title = 'riskgate bench'): string {
  const s = result.scenarios;
  const m = result.machine;
  const out: string[] = [];
  out.push(`## ${title}: ${result.mode} run, ${result.startedAt}`);
  out.push('');
  out.push(`- Command: \`${result.command}\``);
  out.push(
    `- Machine: ${m.cores} cores (${m.cpuModel}), Node ${m.node}, ${m.platform}, ${m.totalMemoryMb} MB; load average ${m.loadAverage.start} → ${m.loadAverage.end}`,
  );
  out.push(`- Pinning: ${m.pinning.note}`);
  out.push(
    `- riskgate: ${m.riskgate?.note ?? 'decision log off, one process (before issue 32)'}; remote-access-tool batch window ${result.options.ratWindowMs} ms, answer cache ${result.options.ratCacheMs === 0 ? 'off' : `${result.options.ratCacheMs} ms`}`,
  );
  out.push('');

  out.push('### 1. Latency under open-model load (from intended send time, ms)');
  out.push('');
  for (const profile of s.latency.profiles) {
    out.push(`${profile.description}:`);
    out.push('');
    out.push(
      '| rate/s | achieved/s | p50 | p90 | p99 | p99.9 | max | errors | generator lag p99 | CPU % of a core: riskgate / sandbox / generator | riskgate CPU µs per 2xx answer | shed (503) | verdicts |',
    );
    out.push('|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---:|---:|---|');
    for (const r of profile.rates) {
      const l = r.latencyUs;
      const verdicts = Object.entries(r.verdicts)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ');
      out.push(
        `| ${r.rate} | ${r.achievedRate} | ${ms(l.p50)} | ${ms(l.p90)} | ${ms(l.p99)} | ${ms(l.p999)} | ${ms(l.max)} | ${errorsText(r.errors)} | ${ms(r.sendLagUs.p99)} | ${r.cpu.riskgateCorePct} / ${r.cpu.sandboxCorePct} / ${r.cpu.generatorCorePct} | ${r.cpu.riskgateUsPerDecision} | ${r.cpu.shed ?? '–'} | ${verdicts} |`,
      );
    }
    out.push('');
  }

  out.push('### 2. Orchestration overhead (decision latency − slowest upstream call, ms)');
  out.push('');
  const base = s.overhead.transportBaseline;
  out.push(
    `Transport baseline (GET /bench/hello at ${base.rate}/s, same generator, no decision): service time p50 ${ms(base.serviceTimeUs.p50, 3)} ms, p99 ${ms(base.serviceTimeUs.p99, 3)} ms. End-to-end overhead includes this much transport.`,
  );
  out.push('');
  out.push(
    '| profile | rate/s | end-to-end p50 | end-to-end p99 | server p50 | server p99 | floor p50 | floor p99 | no Server-Timing |',
  );
  out.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const profile of s.overhead.profiles) {
    for (const r of profile.rates) {
      out.push(
        `| ${profile.profile} | ${r.rate} | ${ms(r.overheadEndToEndUs.p50, 3)} | ${ms(r.overheadEndToEndUs.p99, 3)} | ${ms(r.overheadServerUs.p50, 3)} | ${ms(r.overheadServerUs.p99, 3)} | ${ms(r.slowestUpstreamUs.p50)} | ${ms(r.slowestUpstreamUs.p99)} | ${r.missingServerTiming} |`,
      );
    }
  }
  out.push('');

  out.push('### 3. Throughput ceiling (autocannon, closed model)');
  out.push('');
  out.push(
    '| target | connections | 2xx/s | p50 ms | p99 ms | non-2xx | errors | server CPU µs per 2xx answer | upstream calls per 2xx answer |',
  );
  out.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const [name, r] of [
    ['GET /bench/hello', s.throughput.hello],
    ['POST /decide', s.throughput.decide],
  ] as const) {
    out.push(
      `| ${name} | ${r.connections} | ${r.requestsPerSecond} | ${r.latencyMs.p50} | ${r.latencyMs.p99} | ${r.non2xx} | ${r.errors} | ${r.cpuUsPerRequest} | ${r.upstreamCallsPerAnswer ?? '–'} |`,
    );
  }
  out.push('');
  out.push(`/decide ÷ hello-world: **${(s.throughput.ratio * 100).toFixed(1)} %**`);
  out.push('');
  if (s.references !== undefined) {
    out.push(renderReferences(s.references));
    out.push('');
  }

  out.push('### 4. Upstream efficiency (from /sandbox/stats, per decision answered)');
  out.push('');
  const needs = s.upstream.policyNeeds;
  out.push(
    needs.available
      ? `Policy needs ${needs.readsPerDecision} reads per decision on these bodies (signals: ${needs.signals.join(', ') || 'none'}; admin user ${needs.adminUser}, devices ${needs.adminDevices}).`
      : `Policy needs: not computed (${needs.reason}).`,
  );
  out.push('');
  out.push(
    '| profile | rate/s | upstream calls | reads | actions | RAT POSTs | items/batch mean (max) | RAT GETs | upstream non-2xx |',
  );
  out.push('|---|---:|---:|---:|---:|---:|---:|---:|---|');
  for (const profile of s.upstream.profiles) {
    for (const r of profile.rates) {
      const errs = Object.entries(r.upstreamErrors)
        .map(([k, v]) => `${v}×${k}`)
        .join(', ');
      out.push(
        `| ${profile.profile} | ${r.rate} | ${r.upstreamCallsPerDecision} | ${r.readsPerDecision} | ${r.actionsPerDecision} | ${r.ratPostsPerDecision} | ${r.itemsPerBatch.mean} (${r.itemsPerBatch.max}) | ${r.ratGets} | ${errs || '0'} |`,
      );
    }
  }
  const t = s.upstream.tokens;
  out.push('');
  out.push(
    `Token requests: ${t.issued} in ${t.runSeconds} s with a ${t.lifetimeSeconds} s token lifetime (allowed: ${t.allowed}).`,
  );
  out.push('');

  out.push(`### 5. Memory (${s.memory.rate}/s for ${s.memory.durationS} s)`);
  out.push('');
  out.push('| moment | RSS MB | heap used MB | heap total MB |');
  out.push('|---|---:|---:|---:|');
  for (const [name, sample] of [
    ['before', s.memory.before],
    ['before, after full GC', s.memory.beforeAfterGc],
    [`peak (at ${s.memory.peak.tS} s)`, s.memory.peak],
    ['after', s.memory.after],
    ['after, after full GC', s.memory.afterAfterGc],
  ] as const) {
    out.push(`| ${name} | ${sample.rssMb} | ${sample.heapUsedMb} | ${sample.heapTotalMb} |`);
  }
  out.push('');
  out.push(
    `RSS growth after warm-up: **${s.memory.rssGrowthPct} %**; heap after full GC, after vs before: ${s.memory.heapAfterGcGrowthPct} %. Load: ${s.memory.load.achievedRate}/s, p99 ${ms(s.memory.load.latencyUs.p99)} ms, errors ${errorsText(s.memory.load.errors)}.`,
  );
  out.push('');

  out.push('### 6. Policy evaluation');
  out.push('');
  out.push(renderPolicyEval(s.policyEval));
  out.push('');

  if (s.overload !== undefined) {
    out.push(renderOverload(s.overload));
    out.push('');
  }

  out.push('### Targets (recorded, not asserted)');
  out.push('');
  out.push('| target | wanted | measured | met |');
  out.push('|---|---|---|---|');
  for (const check of checkTargets(result)) {
    out.push(
      `| ${check.name} | ${check.target} | ${check.measured} | ${check.met === null ? 'n/a' : check.met ? 'yes' : '**no**'} |`,
    );
  }
  out.push('');
  return out.join('\n');
}

function renderOverload(o: NonNullable<BenchResult['scenarios']['overload']>): string {
  const lines = [
    `### 7. Overload (${o.profile}; deadline ${o.deadlineMs} ms; ${o.stepS} s per step; ${o.cpuNote})`,
    '',
    `Capacity, sustained (bench/overload-scenario.ts): closed loops of ${o.capacity.tried.map((t) => t.connections).join(', ')} connections, then an open loop at the best one's figure, each counted with the work it left queued (outbox, decision store) and the lower of the best closed loop and the open loop taken: **${o.capacity.requestsPerSecond}/s** (the best closed loop, ${o.capacity.connections} connections, ${o.capacity.loopRequestsPerSecond}/s in the loop alone, p99 ${o.capacity.p99Ms} ms). The loops at the CPU's limit spread ${o.capacity.spreadPct} %; ${o.capacity.settleBeforeS} s waited first for what earlier scenarios left queued. Then open loop at multiples of it, one step after the other:`,
    '',
    "| probe loop | 2xx/s in the loop | refused (non-2xx) | riskgate CPU % of a core | CPU after the loop, % of the loop's | wait after (s) | queued left | sustained 2xx/s |",
    '|---|---:|---:|---:|---:|---:|---:|---:|',
    ...o.capacity.tried.map(
      (t) =>
        `| closed, ${t.connections} connections | ${t.requestsPerSecond} | ${t.non2xx} | ${t.loopCorePct} | ${t.afterCpuPct} | ${t.settleS} | ${t.backlogLeft ?? '–'} | ${t.sustainedPerSecond} |`,
    ),
    `| open, ${o.capacity.check.rate}/s | ${o.capacity.check.achievedRate} | ${o.capacity.check.shed} | ${o.capacity.check.loopCorePct} | ${o.capacity.check.afterCpuPct} | ${o.capacity.check.settleS} | ${o.capacity.check.backlogLeft ?? '–'} | ${o.capacity.check.sustainedPerSecond} |`,
    '',
    ...(o.quietVerdicts === undefined
      ? []
      : [
          `Verdicts: every 2xx answer checked against its account's quiet-day verdict (${Object.entries(
            o.quietVerdicts,
          )
            .map(([a, v]) => `${a} ${v}`)
            .join(
              ', ',
            )}; asked uncapped, undegraded, with the vendor answering at once, before the steps) or the degraded verdict (${DEGRADED_VERDICT}): wrong allows / wrong denies of the answers checked (bench/verdict-check.ts).`,
          '',
        ]),
    '| step | rate/s | answered 2xx/s | within deadline + 50 ms (share of scheduled) | goodput (share of capacity) | verdicts: wrong allows / wrong denies of checked | shed (503) | timeouts | other errors | 2xx p50 ms | 2xx p99 ms | 503 p50 / p99 ms | generator lag p99 ms | riskgate CPU % |',
    '|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const st of o.steps) {
    lines.push(
      `| ${st.multiplier}x | ${st.rate} | ${st.achievedRate} | ${(st.withinDeadlineShare * 100).toFixed(1)} % | ${(st.goodputOfCapacity * 100).toFixed(1)} % | ${verdictCheckCell(st.verdictCheck)} | ${st.shed} | ${st.timeouts} | ${st.otherErrors} | ${st.p50Ms} | ${st.p99Ms} | ${st.shedP50Ms ?? '–'} / ${st.shedP99Ms ?? '–'} | ${st.sendLagP99Ms ?? '–'} | ${st.riskgateCorePct} |`,
    );
  }
  const series = o.steps.at(-1)?.perSecondP99Ms;
  lines.push('');
  lines.push(
    `Recovery after the 5x step: **${o.recoveryS < 0 ? 'not within the step' : `${o.recoveryS} s`}** until the per-second p99 stays within 1.5x the first 0.5x step's (+5 ms)${series ? `; per-second p99 (ms): ${series.join(', ')}` : ''}.`,
  );
  return lines.join('\n');
}

function renderPolicyEval(policyEval: BenchResult['scenarios']['policyEval']): string {
  if (!policyEval.available) return `Not run: ${policyEval.reason}.`;
  const r = policyEval.result;
  const ns = (n: number) => (n >= 1000 ? `${(n / 1000).toFixed(2)} µs` : `${Math.round(n)} ns`);
  return [
    `Policy \`${r.policy.name}\` (${r.policy.rules} rules) over the ${r.inputs} inputs of its test suite, ${policyEval.iterations} evaluations × ${policyEval.runs} run(s), no I/O:`,
    '',
    '| engine | median | p99 | mean |',
    '|---|---:|---:|---:|',
    `| riskgate (CEL, compiled) | ${ns(r.riskgate.medianNs)} | ${ns(r.riskgate.p99Ns)} | ${ns(r.riskgate.meanNs)} |`,
    `| json-rules-engine, same rules | ${ns(r.jsonRulesEngine.medianNs)} | ${ns(r.jsonRulesEngine.p99Ns)} | ${ns(r.jsonRulesEngine.meanNs)} |`,
    '',
    `riskgate is ${r.speedup}× faster per evaluation (median).`,
  ].join('\n');
}

function renderReferences(c: ComparisonFigures): string {
  const names: Record<string, string> = {
    riskgate: 'riskgate',
    floor: 'FLOOR (bench/floor-server.ts)',
    peer: 'peer (bench/peer-server.ts)',
  };
  const lines = [
    `### 3b. Against the references (${c.rounds} interleaved rounds; median (min-max) over the rounds)`,
    '',
    'Each round runs every server once per loop on the same core, the order rotating; CPU is the whole process tree (/proc) over the measured run ÷ its 2xx answers; the ratios are taken within each round. The FLOOR makes the same vendor calls and action writes and nothing else; the peer is the shipped policy hand-written (same calls, same verdicts).',
    '',
  ];
  for (const loop of [c.closed, c.open]) {
    lines.push(
      loop.loop === 'closed'
        ? `Closed loop, ${loop.connections} connections, ${loop.durationS} s per run:`
        : `Open loop at ${loop.rate}/s, ${loop.durationS} s per run:`,
    );
    lines.push('');
    lines.push(
      "| server | CPU µs per 2xx answer | shed (503) per run | 2xx/s | p99 ms | upstream calls per 2xx | CPU ÷ riskgate's |",
    );
    lines.push('|---|---:|---:|---:|---:|---:|---:|');
    for (const server of REFERENCE_SERVERS) {
      const ratio = server === 'riskgate' ? '–' : `riskgate is ${spreadText(loop.cpuRatio[server])}x`;
      lines.push(
        `| ${names[server]} | ${spreadText(loop.cpuUsPer2xx[server], 0)} | ${spreadText(loop.shed[server], 0)} | ${spreadText(loop.answersPerSecond[server], 0)} | ${spreadText(loop.p99Ms[server])} | ${spreadText(loop.upstreamCallsPer2xx[server])} | ${ratio} |`,
      );
    }
    lines.push('');
  }
  const wrong = comparisonWrong(c);
  lines.push(
    `Verdicts: quiet-day riskgate ${Object.entries(c.quietVerdicts.riskgate)
      .map(([a, v]) => `${a} ${v}`)
      .join(
        ', ',
      )}; the peer ${c.peerDisagrees.length === 0 ? 'the same' : `differs (${c.peerDisagrees.join(', ')})`}. Rounds, against riskgate's quiet-day verdicts (wrong allows / wrong denies of checked): riskgate ${verdictCheckCell(c.verdictCheck.riskgate)}, peer ${verdictCheckCell(c.verdictCheck.peer)}.${wrong.length > 0 ? ` **Wrong: ${wrong.join('; ')}**` : ''}`,
  );
  return lines.join('\n');
}
