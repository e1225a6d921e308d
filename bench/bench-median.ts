/**
 * The median of several runs, figure by figure: every number in the results is replaced by the
 * median of the same number across runs (same path in the JSON). Strings, booleans and the memory
 * samples come from the first run. Runs must have the same shape (same options).
 */
export function medianOf<T>(runs: T[]): T {
  if (runs.length === 0) throw new Error('medianOf: no runs');
  return merge(runs as unknown[], []) as T;
}

/**
 * The median of `values`: the middle one, or the mean of the two middle ones when they are even in
 * number. Every bench takes its medians here, so all of them mean the same thing.
 */
export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

function merge(values: unknown[], path: string[]): unknown {
  const first = values[0];
  if (typeof first === 'number') {
    const numbers = values.filter((v): v is number => typeof v === 'number');
    return Math.round(median(numbers) * 1000) / 1000;
  }
  if (Array.isArray(first)) {
    // A time series is one run's story, not a figure to take the median of.
    if (path.at(-1) === 'samples') return first;
    return first.map((_, i) =>
      merge(
        values.map((v) => (Array.isArray(v) ? v[i] : undefined)),
        [...path, String(i)],
      ),
    );
  }
  if (first !== null && typeof first === 'object') {
    const out: Record<string, unknown> = {};
    const keys = new Set<string>();
    for (const v of values) if (v && typeof v === 'object') for (const k of Object.keys(v)) keys.add(k);
    for (const key of keys) {
      const present = values
        .map((v) => (v && typeof v === 'object' ? (v as Record<string, unknown>)[key] : undefined))
        .filter((v) => v !== undefined);
      out[key] = merge(present, [...path, key]);
    }
    return out;
  }
  return first;
}
