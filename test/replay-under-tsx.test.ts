import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { loadPolicy } from '../src/policy/policy-loader.ts';
import { type ReplayReport, replayDecisions } from '../src/replay/replay-run.ts';
import { tempDirForBlock } from './support/temp-dir-for-block.ts';

/**
 * A replay started under `npx tsx` (the benches, `npm start`'s backtests) starts its threads without
 * tsx's loader (src/replay/replay-threads.ts): they load src/ by Node's own type stripping, and
 * must replay as one pass does.
 */

const ROOT = resolve(import.meta.dirname, '..');
const dir = tempDirForBlock('riskgate-replay-tsx-');

function comparable(r: ReplayReport): Omit<ReplayReport, 'elapsedMs'> {
  const { elapsedMs: _, ...rest } = r;
  return rest;
}

const lines = readFileSync(join(ROOT, 'bench/fixtures/decision-lines.jsonl'), 'utf8').trim().split('\n');
const log = join(dir, 'decisions.jsonl');
// Each decision twice, so that each of three threads has several.
writeFileSync(log, `${[...lines, ...lines].join('\n')}\n`);
const policies = join(ROOT, 'policies');

/**
 * A replay on three threads in a child Node started with `nodeOptions` then `--import tsx`: what
 * each thread started with, and the report.
 */
async function replayInChild(nodeOptions: string[]): Promise<{ threads: string[]; report: ReplayReport }> {
  const script = `
      import { loadPolicy } from ${JSON.stringify(join(ROOT, 'src/policy/policy-loader.ts'))};
      import { replayDecisions } from ${JSON.stringify(join(ROOT, 'src/replay/replay-run.ts'))};
      const policy = await loadPolicy(${JSON.stringify(policies)});
      const report = await replayDecisions(policy, [${JSON.stringify(log)}], {
        changedLimit: Number.POSITIVE_INFINITY,
        policyPath: ${JSON.stringify(policies)},
        threads: 3,
        minBytesPerThread: 1,
      });
      process.stdout.write(JSON.stringify(report));
    `;
  const entry = join(dir, 'replay.mjs');
  writeFileSync(entry, script);
  // Loaded by every thread too (an --import other than tsx's passes on): says what each started with.
  const probe = join(dir, 'thread-probe.mjs');
  writeFileSync(
    probe,
    `import { isMainThread } from 'node:worker_threads';
      if (!isMainThread) process.stderr.write('thread ' + JSON.stringify(process.execArgv) + '\\n');`,
  );
  const child = await promisify(execFile)(
    process.execPath,
    [...nodeOptions, '--import', 'tsx', '--import', probe, entry],
    { cwd: ROOT, encoding: 'utf8', timeout: 60_000 },
  );
  return {
    threads: child.stderr.split('\n').filter((l) => l.startsWith('thread ')),
    report: JSON.parse(child.stdout) as ReplayReport,
  };
}

describe('a replay run under tsx', () => {
  it('replays on threads started without tsx what one pass in process reports', async () => {
    const probe = join(dir, 'thread-probe.mjs');
    const { threads, report } = await replayInChild([]);
    expect(threads).toEqual(Array(3).fill(`thread ${JSON.stringify(['--import', probe])}`));
    const onePass = await replayDecisions(await loadPolicy(policies), [log], {
      changedLimit: Number.POSITIVE_INFINITY,
    });
    expect(onePass.decisions).toBe(2 * lines.length);
    expect(comparable(report)).toEqual(comparable(onePass));
  });

  it("starts its threads when Node runs with V8's options, which Node refuses in a thread's own", async () => {
    const probe = join(dir, 'thread-probe.mjs');
    // A heap limit an operator gives a large replay: it holds for the threads without being theirs.
    const { threads, report } = await replayInChild(['--max-old-space-size=1024', '--stack-size=2000']);
    expect(threads).toEqual(Array(3).fill(`thread ${JSON.stringify(['--import', probe])}`));
    const onePass = await replayDecisions(await loadPolicy(policies), [log], {
      changedLimit: Number.POSITIVE_INFINITY,
    });
    expect(comparable(report)).toEqual(comparable(onePass));
  });
});
