/**
 * Bench only (issue 32): what the admission sampler (src/admission/admission-control.ts) costs a
 * main thread that has nothing else to do, with two requests in flight, as between the requests
 * of a low rate: the thread's wake-ups (voluntary context switches) and CPU per second (its
 * `se.sum_exec_runtime` from `/proc/self/task/<pid>/sched`), for each tree, in a fresh process per
 * run, the trees alternated round by round:
 *
 *   npx tsx bench/admission-sampler-idle.ts --trees before=/tmp/before,after=. [--rounds 3] [--seconds 8]
 *
 * A tree outside this checkout needs a tsconfig that includes it (`TSX_TSCONFIG_PATH`).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { median } from './bench-median.ts';

const { values } = parseArgs({
  options: {
    trees: { type: 'string', default: 'this=.' },
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '8' },
    /** Internal: one run in this process, of this tree. */
    run: { type: 'string' },
  },
});
const seconds = Number(values.seconds);

/** The main thread's voluntary context switches and CPU milliseconds so far. */
function thread(): { wakeups: number; cpuMs: number } {
  const task = `/proc/self/task/${process.pid}`;
  const status = readFileSync(`${task}/status`, 'utf8');
  const sched = readFileSync(`${task}/sched`, 'utf8');
  return {
    wakeups: Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(status)?.[1]),
    cpuMs: Number(/se\.sum_exec_runtime\s*:\s*([\d.]+)/.exec(sched)?.[1]),
  };
}

if (values.run !== undefined) {
  const { AdmissionControl } = (await import(
    `${values.run}/src/admission/admission-control.ts`
  )) as typeof import('../src/admission/admission-control.ts');
  const admission = new AdmissionControl({ deadlineMs: 300 });
  admission.start();
  admission.enter();
  admission.enter();
  await new Promise((r) => setTimeout(r, 1000));
  const before = thread();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const after = thread();
  admission.stop();
  console.log(JSON.stringify({ wakeups: after.wakeups - before.wakeups, cpuMs: after.cpuMs - before.cpuMs }));
} else {
  const trees = values.trees.split(',').map((t) => {
    const at = t.indexOf('=');
    return { name: t.slice(0, at), path: resolve(t.slice(at + 1)) };
  });
  const results = new Map(trees.map((t) => [t.name, { wakeups: [] as number[], cpuUs: [] as number[] }]));
  console.log('| round | tree | load | wake-ups/s | CPU µs/s | µs per wake-up |');
  console.log('|---|---|---|---:|---:|---:|');
  for (let round = 1; round <= Number(values.rounds); round++) {
    for (const tree of round % 2 === 1 ? trees : [...trees].reverse()) {
      const out = execFileSync(
        process.execPath,
        [...process.execArgv, process.argv[1]!, '--run', tree.path, '--seconds', String(seconds)],
        { encoding: 'utf8' },
      );
      const { wakeups, cpuMs } = JSON.parse(out.trim().split('\n').at(-1)!) as {
        wakeups: number;
        cpuMs: number;
      };
      const r = results.get(tree.name)!;
      r.wakeups.push(wakeups / seconds);
      r.cpuUs.push((cpuMs * 1000) / seconds);
      console.log(
        `| ${round} | ${tree.name} | ${loadavg()[0]!.toFixed(2)} | ${(wakeups / seconds).toFixed(1)} | ${((cpuMs * 1000) / seconds).toFixed(0)} | ${((cpuMs * 1000) / wakeups).toFixed(0)} |`,
      );
    }
  }
  for (const [name, r] of results)
    console.log(
      `${name}: median ${median(r.wakeups).toFixed(1)} wake-ups/s, ${median(r.cpuUs).toFixed(0)} µs of CPU a second`,
    );
}
