import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

/**
 * The property-access sites of a V8 IC log (`node --log-ic --logfile=DIR/v8.log`, one file per
 * isolate), each with its IC events, its last state and how many maps it saw (issue 32: which
 * sites on the hot path go megamorphic, by counting rather than by a profile's samples):
 *
 *   npx tsx bench/ic-log-sites.ts DIR/isolate-<main>-v8.log [--from-s 30] [--to-s 60]
 *     [--where 'src/(decide|policy)'] [--state N] [--top 40]
 *
 * An IC event is logged when an access misses its inline cache (a state change, or a megamorphic
 * stub-cache miss), not on every access: at steady state few are logged, and a megamorphic site's
 * cost is its stub-cache probes. So `--from-s`/`--to-s` (seconds since the isolate started) count
 * the misses of a stretch, while the state and maps (over the whole log) say how generic each site
 * is. A site is the function (from the log's code-creation events), its line and column (tsx's
 * output is one line per module: the column is in the transpiled text, shown around the site), and
 * the IC kind. States: 0 uninitialized, 1 monomorphic, P polymorphic, N megamorphic, X no feedback.
 */

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    'from-s': { type: 'string', default: '0' },
    'to-s': { type: 'string', default: 'Infinity' },
    where: { type: 'string', default: '' },
    state: { type: 'string', default: '01PNX' },
    top: { type: 'string', default: '40' },
  },
});
const fromUs = Number(values['from-s']) * 1e6;
const toUs = Number(values['to-s']) * 1e6;
const where = new RegExp(values.where);

const IC_EVENT =
  /^(LoadIC|KeyedLoadIC|StoreIC|KeyedStoreIC|DefineKeyedOwnIC|DefineNamedOwnIC|KeyedHasIC|StoreInArrayLiteralIC),/;

interface Code {
  start: number;
  end: number;
  name: string;
  script: number | undefined;
}
interface Site {
  events: number;
  inStretch: number;
  state: string;
  maps: Set<string>;
  keys: Map<string, number>;
  code: Code;
  line: number;
  column: number;
}

/** Code objects by start address, kept sorted; a new one replaces those it overlaps. */
const codes: Code[] = [];
function indexAfter(address: number): number {
  let lo = 0;
  let hi = codes.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (codes[mid]!.start <= address) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
function codeAt(address: number): Code | undefined {
  const c = codes[indexAfter(address) - 1];
  return c !== undefined && address < c.end ? c : undefined;
}
function addCode(code: Code): void {
  let i = indexAfter(code.start - 1);
  if (i > 0 && codes[i - 1]!.end > code.start) i--;
  let j = i;
  while (j < codes.length && codes[j]!.start < code.end) j++;
  codes.splice(i, j - i, code);
}

const sites = new Map<string, Site>();
const sources = new Map<number, string>();
for (const file of positionals) {
  const lines = readFileSync(file, 'latin1').split('\n');
  const scriptOf = new Map<number, number>();
  for (const line of lines) {
    if (!line.startsWith('code-source-info,')) continue;
    const f = line.split(',');
    scriptOf.set(Number(f[1]), Number(f[2]));
  }
  for (const line of lines) {
    if (line.startsWith('script-source,')) {
      const f = line.split(',');
      sources.set(Number(f[1]), f.slice(3).join(',').replaceAll('\\x2C', ',').replaceAll('\\n', '\n'));
    } else if (line.startsWith('code-creation,')) {
      // code-creation,kind,tier,time,address,size,name[,sfi address,marker] (JS code carries the last two)
      const f = line.split(',');
      const start = Number(f[4]);
      if (!Number.isFinite(start)) continue;
      const name = f.slice(6, f[1] === 'JS' ? f.length - 2 : f.length).join(',');
      addCode({ start, end: start + Number(f[5]), name: name.trim(), script: scriptOf.get(start) });
    } else if (IC_EVENT.test(line)) {
      // type,code address,time,line,column,old state,new state,map,key,modifier,slow reason
      const f = line.split(',');
      const code = codeAt(Number(f[1]));
      const name = (code?.name ?? '?').replace(/file:\/\/\S*?\/(src|bench|node_modules)\//, '$1/');
      if (!where.test(name)) continue;
      const id = `${name} @${f[3]}:${f[4]} ${f[0]}`;
      let site = sites.get(id);
      if (site === undefined) {
        site = {
          events: 0,
          inStretch: 0,
          state: '',
          maps: new Set(),
          keys: new Map(),
          code: code ?? { start: 0, end: 0, name, script: undefined },
          line: Number(f[3]),
          column: Number(f[4]),
        };
        sites.set(id, site);
      }
      const time = Number(f[2]);
      site.events++;
      if (time >= fromUs && time <= toUs) site.inStretch++;
      site.state = f[6]!;
      site.maps.add(f[7]!);
      const key = f[8] ?? '';
      site.keys.set(key, (site.keys.get(key) ?? 0) + 1);
    }
  }
}

/** The transpiled text around a site, for sites in one-line modules. */
function around(site: Site): string {
  const text = site.code.script === undefined ? undefined : sources.get(site.code.script);
  const line = text?.split('\n')[site.line - 1];
  if (line === undefined) return '';
  return line.slice(Math.max(0, site.column - 50), site.column + 30).replace(/\s+/g, ' ');
}

const ranked = [...sites]
  .filter(([, s]) => values.state.includes(s.state))
  .sort((a, b) => b[1].inStretch - a[1].inStretch || b[1].events - a[1].events)
  .slice(0, Number(values.top));
console.log('| events in stretch | events | last state | maps | site | keys | around |');
console.log('|---:|---:|---|---:|---|---|---|');
for (const [id, s] of ranked) {
  const keys = [...s.keys]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 4)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
  console.log(
    `| ${s.inStretch} | ${s.events} | ${s.state} | ${s.maps.size} | ${id.replaceAll('|', '\\|')} | ${keys.replaceAll('|', '\\|')} | \`${around(s).replaceAll('`', "'").replaceAll('|', '\\|')}\` |`,
  );
}
