/**
 * Replay throughput (issues 16, 32): `npx tsx bench/replay-throughput.ts [--decisions 1000000]
 * [--action-lines 1] [--threads N] [--log FILE] [--policy DIR]` (threads default: the cores there are;
 * `--log`: the log is kept there and reused when it exists, so builds are compared over the same
 * bytes; `--policy`: the candidate, default the shipped policy).
 * Writes a decision log of N lines made from real ones (bench/fixtures/decision-lines.jsonl: lines a
 * running riskgate wrote for the sandbox's demo accounts with the shipped policy, their members put
 * in today's writer's order by its `withLastInHead`, session 9; each copy gets its own decisionId),
 * then times `replayDecisions` over it with the shipped policy, as `riskgate replay --policy
 * policies/ <log>` runs it. Prints decisions/s, elapsed seconds, peak RSS,
 * and the replay's CPU: the process's, and each thread's from /proc (Linux), per decision.
 */
import { randomUUID } from 'node:crypto';
import {
  createWriteStream,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
} from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { actionLine } from '../src/decision-log/decision-record.ts';
import { loadPolicy } from '../src/policy/policy-loader.ts';
import { replayDecisions } from '../src/replay/replay-run.ts';

const { values } = parseArgs({
  options: {
    decisions: { type: 'string', default: '1000000' },
    threads: { type: 'string' },
    'action-lines': { type: 'string', default: '1' },
    log: { type: 'string' },
    policy: { type: 'string' },
  },
});
const n = Number(values.decisions);
const root = resolve(import.meta.dirname, '..');
const templates = readFileSync(join(root, 'bench/fixtures/decision-lines.jsonl'), 'utf8').trim().split('\n');
const dir = mkdtempSync(join(tmpdir(), 'riskgate-replay-bench-'));
const log = values.log ?? join(dir, 'decisions.jsonl');
const reused = values.log !== undefined && existsSync(log);

// A real log holds action outcomes and labels between the decisions: `--action-lines` of them per
// decision (default 1), each an outcome line as riskgate writes it (src/decision-log/decision-record.ts).
const actionLines = Number(values['action-lines']);
const writeStartedAt = performance.now();
if (!reused) {
  const out = createWriteStream(log, { highWaterMark: 1 << 20 });
  for (let i = 0; i < n; i++) {
    const decisionId = randomUUID();
    let chunk = `${templates[i % templates.length]!.replace(/"decisionId":"[^"]+"/, `"decisionId":"${decisionId}"`)}\n`;
    for (let a = 0; a < actionLines; a++) {
      chunk += `${JSON.stringify(
        actionLine({
          key: `${decisionId}:lock_out_user:${a}`,
          decisionId,
          type: 'lock_out_user',
          target: 'DU0000000000000000',
          status: 'done',
          attempts: 1,
          elapsedMs: 42,
        }),
      )}\n`;
    }
    if (!out.write(chunk)) await new Promise<void>((r) => out.once('drain', () => r()));
  }
  await new Promise<void>((r) => out.end(r));
}
const bytes = statSync(log).size;
console.log(
  `${reused ? 'reused' : 'wrote'} ${n} decisions and ${n * actionLines} action lines, ${(bytes / 1e9).toFixed(2)} GB, in ${((performance.now() - writeStartedAt) / 1000).toFixed(1)} s`,
);

let peakRss = 0;
// Each thread's CPU from /proc (Linux): a replay thread's last reading before it ends is kept, so
// the report can say how the work was shared and that the main thread only waits.
const threadTicks = new Map<string, number>();
const tasks = existsSync('/proc/self/task') ? '/proc/self/task' : undefined;
function sampleThreads(): void {
  if (tasks === undefined) return;
  for (const tid of readdirSync(tasks)) {
    try {
      const stat = readFileSync(`${tasks}/${tid}/stat`, 'latin1');
      // Fields after the `(comm)`: utime and stime are the 12th and 13th (clock ticks).
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      threadTicks.set(tid, Number(f[11]) + Number(f[12]));
    } catch {
      // The thread ended between the listing and the read: its last sample stands.
    }
  }
}
const cpuBefore = process.cpuUsage();
sampleThreads();
const ticksBefore = new Map(threadTicks);
const sampler = setInterval(() => {
  peakRss = Math.max(peakRss, process.memoryUsage().rss);
  sampleThreads();
}, 100);
const policyPath = values.policy === undefined ? join(root, 'policies') : resolve(values.policy);
const policy = await loadPolicy(policyPath);
const startedAt = performance.now();
const report = await replayDecisions(policy, [log], {
  policyPath,
  ...(values.threads !== undefined && { threads: Number(values.threads) }),
});
const elapsedS = (performance.now() - startedAt) / 1000;
clearInterval(sampler);
sampleThreads();
const cpu = process.cpuUsage(cpuBefore);
console.log(
  `replayed ${report.decisions} decisions in ${elapsedS.toFixed(1)} s: ${Math.round(report.decisions / elapsedS)} decisions/s, ` +
    `${(bytes / 1e6 / elapsedS).toFixed(0)} MB/s, ${report.changed} changed, peak RSS ${(peakRss / 1e6).toFixed(0)} MB, load average ${loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')}`,
);
// USER_HZ is 100 on Linux.
const threadCpu = [...threadTicks]
  .map(([tid, t]) => ({ tid, s: (t - (ticksBefore.get(tid) ?? 0)) / 100 }))
  .filter((t) => t.s >= 0.05)
  .sort((a, b) => b.s - a.s);
const mainTid = String(process.pid);
console.log(
  `CPU ${((cpu.user + cpu.system) / 1e6).toFixed(1)} s (user ${(cpu.user / 1e6).toFixed(1)} + sys ${(cpu.system / 1e6).toFixed(1)}), ` +
    `${((cpu.user + cpu.system) / report.decisions).toFixed(1)} us per decision; by thread (10 ms ticks, ≥ 0.05 s): ` +
    threadCpu
      .map(
        (t) =>
          `${t.tid === mainTid ? 'main' : t.tid} ${t.s.toFixed(1)} s = ${((t.s * 1e6) / report.decisions).toFixed(1)} us per decision of the whole`,
      )
      .join(', '),
);
rmSync(dir, { recursive: true, force: true });
