import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { eventually } from './support/eventually.ts';
import { processesOfRun, RUN_MARKER, spawnTree } from './support/process-tree.ts';

/**
 * The bench's processes die with the harness: `npm run bench` SIGKILLed (a CI timeout, the smoke
 * test's own 80 s limit) leaves no sandbox, riskgate, floor server or load generator running. The
 * harness runs with a marker of its own in its environment, which its children inherit, so they
 * are found in /proc whoever their parent is by then.
 */

describe.runIf(process.platform === 'linux')('bench harness killed', () => {
  it('takes its sandbox, riskgate and load generator with it when SIGKILLed', async () => {
    const marker = randomUUID();
    const results = mkdtempSync(join(tmpdir(), 'riskgate-bench-orphans-'));
    const harness = spawnTree(
      process.execPath,
      ['--import', 'tsx', 'bench/run.ts', '--smoke', '--no-pin', '--results-dir', results],
      {
        cwd: join(import.meta.dirname, '..'),
        env: { ...process.env, [RUN_MARKER]: marker },
        stdio: 'ignore',
      },
    );
    const children = () => processesOfRun(marker).filter((p) => p.pid !== harness.pid);
    try {
      // The sandbox, riskgate and the load generator, started one after the other.
      const started = () =>
        ['src/dev/sandbox-main.ts', 'bench/riskgate-under-bench.ts', 'bench/open-loop-generator.ts'].every(
          (entry) => children().some((p) => p.command.includes(entry)),
        );
      const outcome = await eventually(
        () => (started() ? 'started' : harness.exitCode !== null ? 'exited' : undefined),
        { timeoutMs: 60_000, intervalMs: 100, what: 'the harness starting its processes' },
      );
      if (outcome === 'exited') {
        throw new Error(`the harness never started its processes: ${JSON.stringify(children())}`);
      }
      process.kill(harness.pid!, 'SIGKILL');
      await expect.poll(() => children().map((p) => p.command), { timeout: 5000, interval: 100 }).toEqual([]);
    } finally {
      for (const p of processesOfRun(marker)) {
        try {
          process.kill(p.pid, 'SIGKILL');
        } catch {
          // gone meanwhile
        }
      }
      rmSync(results, { recursive: true, force: true });
    }
  }, 90_000);
});
