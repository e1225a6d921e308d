/**
 * Bench only (issue 32): reads what bench/timer-fires.ts wrote (`<pid>.ndjson`, one cumulative
 * line a second) and prints, per creating call site, the timers created and fired, per second and
 * per request, with the main thread's wake-ups (voluntary context switches) beside them, over the
 * steady stretch of a run: the longest run of seconds whose requests are within a quarter of
 * `--rate`, less its first `--skip` seconds (the warm-up). Several files (one per run) print one
 * table each, then their sum.
 *
 *   npx tsx bench/timer-fires-report.ts --rate 200 [--skip 3] [--top 25] /tmp/timer-fires/*.ndjson
 */
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { parseArgs } from 'node:util';

interface Site {
  created: number;
  fired: number;
  /** Fires that woke a sleeping loop (bench/timer-fires.ts). */
  woke: number;
}
interface Line {
  atMs: number;
  requests: number;
  /** The main thread's voluntary context switches so far: its sleeps, each followed by a wake-up. */
  wakeups: number;
  /** The loop's iterations so far, and those in which a counted callback or an event ran. */
  iterations: number;
  seen: number;
  sites: Record<string, Site>;
}
interface Stretch {
  seconds: number;
  requests: number;
  wakeups: number;
  iterations: number;
  seen: number;
  sites: Map<string, Site>;
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    rate: { type: 'string', default: '200' },
    skip: { type: 'string', default: '3' },
    top: { type: 'string', default: '25' },
  },
});
const rate = Number(values.rate);
const skip = Number(values.skip);
const top = Number(values.top);

/** The longest run of lines whose second's requests are near `rate`, less its first `skip`. */
function steady(lines: Line[]): Stretch | undefined {
  const near = (i: number) =>
    Math.abs(
      ((lines[i]!.requests - lines[i - 1]!.requests) * 1000) / (lines[i]!.atMs - lines[i - 1]!.atMs) - rate,
    ) <=
    rate / 4;
  let best: [number, number] = [0, 0];
  let start = 0;
  for (let i = 1; i < lines.length; i++) {
    if (!near(i)) start = i;
    else if (i - start > best[1] - best[0]) best = [start, i];
  }
  const from = best[0] + skip;
  if (best[1] - from < 2) return undefined;
  const first = lines[from]!;
  const last = lines[best[1]]!;
  const sites = new Map<string, Site>();
  for (const [name, s] of Object.entries(last.sites)) {
    const before = first.sites[name] ?? { created: 0, fired: 0, woke: 0 };
    sites.set(name, {
      created: s.created - before.created,
      fired: s.fired - before.fired,
      woke: s.woke - before.woke,
    });
  }
  return {
    seconds: (last.atMs - first.atMs) / 1000,
    requests: last.requests - first.requests,
    wakeups: last.wakeups - first.wakeups,
    iterations: last.iterations - first.iterations,
    seen: last.seen - first.seen,
    sites,
  };
}

function print(title: string, s: Stretch): void {
  const sum = { created: 0, fired: 0, woke: 0 };
  for (const site of s.sites.values()) {
    sum.created += site.created;
    sum.fired += site.fired;
    sum.woke += site.woke;
  }
  const perS = (n: number) => (n / s.seconds).toFixed(1);
  const perRequest = (n: number) => (n / s.requests).toFixed(3);
  console.log(
    `\n${title}: ${s.seconds.toFixed(1)} s, ${s.requests} requests (${perS(s.requests)}/s); main thread wake-ups ${perS(s.wakeups)}/s, ${perRequest(s.wakeups)} per request; loop iterations ${perS(s.iterations)}/s, of which nothing counted ran in ${perS(s.iterations - s.seen)}/s`,
  );
  console.log('| site | created/s | fired/s | woke the loop /s | fired per request | woke per request |');
  console.log('|---|---:|---:|---:|---:|---:|');
  const row = (name: string, site: Site) =>
    console.log(
      `| ${name} | ${perS(site.created)} | ${perS(site.fired)} | ${perS(site.woke)} | ${perRequest(site.fired)} | ${perRequest(site.woke)} |`,
    );
  row('**all**', sum);
  const sorted = [...s.sites].filter(([, site]) => site.fired > 0).sort((a, b) => b[1].fired - a[1].fired);
  for (const [name, site] of sorted.slice(0, top)) row(`\`${name}\``, site);
}

const total: Stretch = { seconds: 0, requests: 0, wakeups: 0, iterations: 0, seen: 0, sites: new Map() };
for (const path of positionals) {
  const lines = readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Line);
  const stretch = steady(lines);
  if (stretch === undefined) {
    console.log(`\n${basename(path)}: no steady stretch at ${rate}/s`);
    continue;
  }
  print(basename(path), stretch);
  total.seconds += stretch.seconds;
  total.requests += stretch.requests;
  total.wakeups += stretch.wakeups;
  total.iterations += stretch.iterations;
  total.seen += stretch.seen;
  for (const [name, site] of stretch.sites) {
    const t = total.sites.get(name) ?? { created: 0, fired: 0, woke: 0 };
    total.sites.set(name, {
      created: t.created + site.created,
      fired: t.fired + site.fired,
      woke: t.woke + site.woke,
    });
  }
}
if (positionals.length > 1 && total.seconds > 0) print('all files', total);
