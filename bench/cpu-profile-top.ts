import { readFileSync } from 'node:fs';

/**
 * A `--cpu-prof` profile's self time by where the code lives (issue 32: the top 15 by package and by
 * src/ folder): `node_modules/<package>`, `src/<folder>`, `bench`, Node's own JavaScript (`node:`),
 * and V8's pseudo-frames (`(garbage collector)`, `(program)`, `(idle)`, left out of the shares).
 *
 *   npx tsx bench/cpu-profile-top.ts <file.cpuprofile> [more...] [--top 15] [--last-s 20] [--functions]
 *
 * `--last-s N`: only the profile's last N seconds (an idle process's, its start left out), the
 * final `--drop-last-s M` (its stop) left out too.
 * `--functions`: by function (`name url:line`) instead of by place.
 */

interface ProfileNode {
  id: number;
  callFrame: { url: string; functionName: string; lineNumber?: number };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
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

const args = process.argv.slice(2);
const flagValue = (flag: string): number | undefined => {
  const at = args.indexOf(flag);
  return at >= 0 ? Number(args[at + 1]) : undefined;
};
const top = flagValue('--top') ?? 15;
const lastS = flagValue('--last-s');
const dropLastS = flagValue('--drop-last-s') ?? 0;
const byFunction = args.includes('--functions');
const files = args.filter(
  (a, i) => !a.startsWith('--') && !['--top', '--last-s', '--drop-last-s'].includes(args[i - 1] ?? ''),
);
const totals = new Map<string, number>();
for (const file of files) {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  const where = new Map(
    profile.nodes.map((n) => {
      const f = n.callFrame;
      const key = byFunction
        ? `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*\/(node_modules|src)\//, '$1/')}:${(f.lineNumber ?? 0) + 1}`
        : place(f.url, f.functionName);
      return [n.id, key];
    }),
  );
  const totalUs = profile.timeDeltas.reduce((s, d) => s + d, 0);
  const toUs = totalUs - dropLastS * 1e6;
  const fromUs = lastS === undefined ? 0 : toUs - lastS * 1e6;
  let atUs = 0;
  profile.samples.forEach((id, i) => {
    atUs += profile.timeDeltas[i] ?? 0;
    if (atUs < fromUs || atUs > toUs) return;
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
