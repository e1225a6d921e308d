import { readFileSync } from 'node:fs';

/**
 * A `--cpu-prof` profile's self time by where the code lives (issue 32: the top 15 by package and by
 * src/ folder): `node_modules/<package>`, `src/<folder>`, `bench`, Node's own JavaScript (`node:`),
 * and V8's pseudo-frames (`(garbage collector)`, `(program)`, `(idle)`, left out of the shares).
 *
 *   npx tsx bench/cpu-profile-top.ts <file.cpuprofile> [more...] [--top 15] [--last-ms N | --last-s N]
 *     [--drop-last-ms M | --drop-last-s M] [--by function | --functions]
 *
 * `--last-ms N` (or `--last-s`) keeps only each process's last N ms (the end of the last of its
 * threads' profiles, one clock: a measured run at the end of its life, or an idle process's, without
 * its start-up); `--drop-last-ms M` (or `--drop-last-s`) leaves out the final M ms too (its stop);
 * `--by function` (or `--functions`) ranks functions (`name url:line`) instead of places.
 */

interface ProfileNode {
  id: number;
  callFrame: { url: string; functionName: string; lineNumber?: number };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  endTime: number;
}

function place(url: string, name: string): string {
  if (url === '') return name.startsWith('(') ? name : '(native)';
  if (url.startsWith('node:')) return 'node internals';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1]!;
  const src = /\/src\/([^/]+)\//.exec(url);
  if (src) return `src/${src[1]}`;
  if (url.includes('/bench/')) return 'bench';
  return url;
}

function functionOf({ url, functionName, lineNumber }: ProfileNode['callFrame']): string {
  if (url === '') return functionName.startsWith('(') ? functionName : `(native) ${functionName}`;
  const short = url.replace(/^.*node_modules\//, '').replace(/^.*\/(src|bench)\//, '$1/');
  return `${functionName || '(anonymous)'} ${short}:${(lineNumber ?? 0) + 1}`;
}

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : undefined;
};
const top = Number(flag('--top') ?? 15);
const msOf = (ms: string, s: string): number | undefined =>
  flag(ms) !== undefined ? Number(flag(ms)) : flag(s) !== undefined ? Number(flag(s)) * 1000 : undefined;
const lastMs = msOf('--last-ms', '--last-s');
const dropLastMs = msOf('--drop-last-ms', '--drop-last-s') ?? 0;
const byFunction = flag('--by') === 'function' || args.includes('--functions');
// A value follows every flag but `--functions`.
const files = args.filter(
  (a, i) => !a.startsWith('--') && !(args[i - 1]?.startsWith('--') && args[i - 1] !== '--functions'),
);
const totals = new Map<string, number>();
const profiles = files.map((file) => ({
  profile: JSON.parse(readFileSync(file, 'utf8')) as Profile,
  // Node names a profile CPU.<date>.<time>.<pid>.<thread>.<seq>.cpuprofile.
  pid: /CPU\.\d+\.\d+\.(\d+)\.\d+\.\d+\.cpuprofile$/.exec(file)?.[1] ?? file,
}));
// One process's threads share a clock: its window ends where the last of them ends.
const endOf = new Map<string, number>();
for (const { profile, pid } of profiles) endOf.set(pid, Math.max(endOf.get(pid) ?? 0, profile.endTime));
for (const { profile, pid } of profiles) {
  const where = new Map(
    profile.nodes.map((n) => [
      n.id,
      byFunction ? functionOf(n.callFrame) : place(n.callFrame.url, n.callFrame.functionName),
    ]),
  );
  // Sample i was taken at endTime - (the deltas after it).
  let after = endOf.get(pid)! - profile.endTime;
  const takenBeforeEnd = new Array<number>(profile.samples.length);
  for (let i = profile.samples.length - 1; i >= 0; i--) {
    takenBeforeEnd[i] = after;
    after += profile.timeDeltas[i] ?? 0;
  }
  profile.samples.forEach((id, i) => {
    if (takenBeforeEnd[i]! < dropLastMs * 1000) return;
    if (lastMs !== undefined && takenBeforeEnd[i]! > (dropLastMs + lastMs) * 1000) return;
    const key = where.get(id)!;
    totals.set(key, (totals.get(key) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
}
const pseudo = (k: string) => k.startsWith('(idle)') || k.startsWith('(program)');
const busy = [...totals].filter(([k]) => !pseudo(k));
const sum = busy.reduce((s, [, t]) => s + t, 0);
console.log(`| where | ms | share of busy |\n|---|---:|---:|`);
for (const [k, t] of busy.sort((a, b) => b[1] - a[1]).slice(0, top))
  console.log(`| ${k} | ${(t / 1000).toFixed(0)} | ${((100 * t) / sum).toFixed(1)} % |`);
console.log(
  `busy ${(sum / 1000).toFixed(0)} ms; (program) ${(([...totals].find(([k]) => k.startsWith('(program)'))?.[1] ?? 0) / 1000).toFixed(0)} ms, (idle) ${(([...totals].find(([k]) => k.startsWith('(idle)'))?.[1] ?? 0) / 1000).toFixed(0)} ms`,
);
