/**
 * Gauges that read a store every worker shares (the outbox's SQLite file or Redis): each worker
 * reads the same figure, so they are reported once, from the lowest-numbered worker that has
 * them, without a `worker` label; a sum over the series is then the store's figure, not a multiple
 * of it. (Across replicas sharing one PostgreSQL outbox each replica still reports it: aggregate those
 * with `max`, as deploy/prometheus-rules.yaml does.)
 */
export const STORE_WIDE_GAUGES: ReadonlySet<string> = new Set([
  'riskgate_outbox_pending',
  'riskgate_outbox_oldest_pending_age_seconds',
  'riskgate_outbox_dead',
]);

/**
 * Merges the Prometheus text of several worker processes into one exposition: every sample gets a
 * `worker="<index>"` label, and each metric family (its HELP, TYPE and UNIT lines, then the
 * samples of every worker) is written once, as the format requires. The families in `storeWide`
 * (default `STORE_WIDE_GAUGES`) are taken from one worker only and carry no `worker` label.
 */
export function mergeWorkerMetrics(
  texts: readonly { worker: number; text: string }[],
  storeWide: ReadonlySet<string> = STORE_WIDE_GAUGES,
): string {
  const families = new Map<string, { meta: string[]; samples: string[]; from?: number }>();
  const familyOf = (name: string) => {
    let f = families.get(name);
    if (f === undefined) {
      f = { meta: [], samples: [] };
      families.set(name, f);
    }
    return f;
  };
  for (const { worker, text } of [...texts].sort((a, b) => a.worker - b.worker)) {
    let current: { meta: string[]; samples: string[]; from?: number } | undefined;
    let currentName = '';
    for (const line of text.split('\n')) {
      if (line === '') continue;
      const meta = /^# (HELP|TYPE|UNIT) (\S+)/.exec(line);
      if (meta) {
        currentName = meta[2]!;
        current = familyOf(currentName);
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
      const family = current ?? familyOf(name);
      if (storeWide.has(current === undefined ? name : currentName)) {
        family.from ??= worker;
        if (family.from === worker) family.samples.push(line);
        continue;
      }
      const sample = labelled
        ? `${name}{worker="${worker}",${line.slice(brace + 1)}`
        : `${name}{worker="${worker}"}${line.slice(space)}`;
      family.samples.push(sample);
    }
  }
  const out: string[] = [];
  for (const f of families.values()) out.push(...f.meta, ...f.samples);
  return `${out.join('\n')}\n`;
}
