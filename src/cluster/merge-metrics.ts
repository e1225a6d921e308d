/**
 * Merges the Prometheus text of several worker processes into one exposition: every sample gets a
 * `worker="<index>"` label, and each metric family (its HELP, TYPE and UNIT lines, then the
 * samples of every worker) is written once, as the format requires.
 */
export function mergeWorkerMetrics(texts: readonly { worker: number; text: string }[]): string {
  const families = new Map<string, { meta: string[]; samples: string[] }>();
  const familyOf = (name: string) => {
    let f = families.get(name);
    if (f === undefined) {
      f = { meta: [], samples: [] };
      families.set(name, f);
    }
    return f;
  };
  for (const { worker, text } of texts) {
    let current: { meta: string[]; samples: string[] } | undefined;
    for (const line of text.split('\n')) {
      if (line === '') continue;
      const meta = /^# (HELP|TYPE|UNIT) (\S+)/.exec(line);
      if (meta) {
        current = familyOf(meta[2]!);
        // Each worker repeats the family's description: keep the first worker's.
        if (current.meta.length < 3 && !current.meta.some((m) => m.startsWith(`# ${meta[1]} `)))
          current.meta.push(line);
        continue;
      }
      if (line.startsWith('#')) continue;
      const brace = line.indexOf('{');
      const space = line.indexOf(' ');
      const labelled = brace !== -1 && brace < space;
      const name = line.slice(0, labelled ? brace : space);
      const sample = labelled
        ? `${name}{worker="${worker}",${line.slice(brace + 1)}`
        : `${name}{worker="${worker}"}${line.slice(space)}`;
      (current ?? familyOf(name)).samples.push(sample);
    }
  }
  const out: string[] = [];
  for (const f of families.values()) out.push(...f.meta, ...f.samples);
  return `${out.join('\n')}\n`;
}
