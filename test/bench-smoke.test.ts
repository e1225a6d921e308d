import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { signalTree, spawnTree } from './support/process-tree.ts';
import { tempDirForBlock } from './support/temp-dir-for-block.ts';

/**
 * CI smoke of the benchmark harness: `npm run bench -- --smoke` starts the sandbox, riskgate and
 * the load generator, runs every scenario for a moment and writes its results. Performance is never
 * asserted here (bench/README.md): only that a run completes with every scenario's figures.
 */
const resultsDir = tempDirForBlock('riskgate-bench-smoke-');

function runSmoke(): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    // Tied to this test (its own group, killed with it); the harness ties its servers to itself.
    const child = spawnTree(
      process.execPath,
      ['--import', 'tsx', 'bench/run.ts', '--smoke', '--no-pin', '--results-dir', resultsDir],
      { cwd: join(import.meta.dirname, '..'), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    // Issue 32 added the reference rounds (the FLOOR and the peer): about 80 s on a loaded 2-core box.
    const timer = setTimeout(() => signalTree(child, 'SIGKILL'), 150_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

describe('bench harness (smoke)', () => {
  it('runs every scenario against a real sandbox and riskgate and writes the results JSON', async () => {
    const { code, output } = await runSmoke();
    expect(code, output).toBe(0);
    const files = readdirSync(resultsDir).filter((f) => f.endsWith('.json'));
    expect(files).toHaveLength(1);
    const result = JSON.parse(readFileSync(join(resultsDir, files[0]!), 'utf8'));

    expect(result.machine).toMatchObject({ cores: expect.any(Number), node: process.version });
    const s = result.scenarios;
    const step = s.latency.profiles[0].rates[0];
    expect(step.ok).toBeGreaterThan(0);
    expect(step.latencyUs).toMatchObject({
      p50: expect.any(Number),
      p99: expect.any(Number),
      p999: expect.any(Number),
    });
    expect(s.overhead.profiles[0].rates[0].overheadEndToEndUs.count).toBeGreaterThan(0);
    expect(s.overhead.transportBaseline.serviceTimeUs.count).toBeGreaterThan(0);
    expect(step.cpu.riskgateUsPerDecision).toBeGreaterThan(0);
    expect(s.throughput.hello.requests).toBeGreaterThan(0);
    expect(s.throughput.decide.requests).toBeGreaterThan(0);
    expect(s.throughput.ratio).toEqual(expect.any(Number));
    expect(s.upstream.profiles[0].rates[0].upstreamCalls).toBeGreaterThan(0);
    expect(s.upstream.tokens.issued).toEqual(expect.any(Number));
    expect(s.memory).toMatchObject({
      rssGrowthPct: expect.any(Number),
      before: { rssMb: expect.any(Number) },
    });
    expect(s.policyEval).toHaveProperty('available');
    // Issue 22: the overload steps' answers are checked against the quiet-day verdicts.
    expect(Object.keys(s.overload.quietVerdicts).sort()).toEqual([
      'alice',
      'bob',
      'carol',
      'dave',
      'mallory',
      'trudy',
    ]);
    expect(s.overload.steps[0].verdictCheck).toMatchObject({
      checked: expect.any(Number),
      wrongAllows: expect.any(Number),
      wrongDenies: expect.any(Number),
    });
    expect(s.throughput.decide.upstreamCallsPerAnswer).toEqual(expect.any(Number));
    // Issue 32: CPU per 2xx answer with the sheds beside it, riskgate as shipped, the references.
    expect(step.cpu.shed).toEqual(expect.any(Number));
    expect(result.machine.riskgate).toMatchObject({ config: 'shipped', processes: expect.any(Number) });
    for (const server of ['riskgate', 'floor', 'peer']) {
      expect(s.references.closed.runs[server][0].ok, server).toBeGreaterThan(0);
      expect(s.references.open.runs[server][0].cpuUsPer2xx, server).toBeGreaterThan(0);
    }
    expect(s.references.peerDisagrees).toEqual([]);
    expect(output).toContain('### Targets');
  }, 160_000);
});
