/** "Did you mean" suggestions for misspelled names: in policy files, and in the environment riskgate reads. */

function editDistance(a: string, b: string): number {
  const prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0]!;
    prev[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const tmp = prev[j]!;
      prev[j] = Math.min(prev[j]! + 1, prev[j - 1]! + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
      diag = tmp;
    }
  }
  return prev[b.length]!;
}

/**
 * The name in `names` closest to `wrong` (case-insensitive), if it is within `maxDistance - 1`
 * edits. Default `maxDistance` 3: two typos are a suggestion, more is a different name.
 */
export function closestName(wrong: string, names: readonly string[], maxDistance = 3): string | undefined {
  let best: string | undefined;
  let bestD = maxDistance;
  const w = wrong.toLowerCase();
  for (const name of names) {
    const d = editDistance(w, name.toLowerCase());
    if (d < bestD) {
      bestD = d;
      best = name;
    }
  }
  return best;
}
