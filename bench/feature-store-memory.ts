import { parseArgs } from 'node:util';
import {
  DEFAULT_MAX_COUNTER_BYTES,
  DEFAULT_MAX_HISTORY_BYTES,
  MemoryFeatureStore,
  type MemoryFeatureStoreOptions,
} from '../src/features/memory-feature-store.ts';
import {
  floodDistinctMembers,
  floodHistory,
  floodNewKeys,
  heapAfterGcBytes,
} from '../test/support/feature-store-flood.ts';

/**
 * What the memory feature store's entries cost in the heap (the prices in ENTRY_BYTES come from
 * here), and what the issue-22 floods leave behind with the default bounds: 3,000 accounts tried
 * from 1,000 addresses each (3 M members), 300,000 new addresses, 600,000 history events.
 *
 *   npx tsx bench/feature-store-memory.ts [--scale 1]
 */

const { values } = parseArgs({ options: { scale: { type: 'string', default: '1' } } });
const scale = Number(values.scale);
const MB = 1024 * 1024;
const unbounded = { maxCounterBytes: Number.MAX_SAFE_INTEGER, maxHistoryBytes: Number.MAX_SAFE_INTEGER };

function grown(run: (store: MemoryFeatureStore) => void, options: MemoryFeatureStoreOptions = unbounded) {
  const store = new MemoryFeatureStore(options);
  const before = heapAfterGcBytes();
  run(store);
  const bytes = heapAfterGcBytes() - before;
  // Read after measuring, so the store is alive while it is measured.
  return { bytes, held: store.heldBytes() };
}

console.log('entry costs (heap used + array buffers after a full GC):');
const n = Math.round(100_000 * scale);
const newKeys = grown((s) => floodNewKeys(s, n));
console.log(`  a count and a one-member distinct counter per key: ${(newKeys.bytes / n).toFixed(0)} B`);
for (const members of [1, 100, 1000]) {
  const keys = Math.max(1, Math.round((members === 1 ? 100_000 : 300_000 / members) * scale));
  const g = grown((s) => floodDistinctMembers(s, keys, members));
  console.log(
    `  distinct counter of ${members} member(s): ${(g.bytes / keys).toFixed(0)} B (${(g.bytes / keys / members).toFixed(1)} B a member)`,
  );
}
for (const events of [1, 100, 1000]) {
  const users = Math.max(1, Math.round((events === 1 ? 100_000 : 300_000 / events) * scale));
  const g = grown((s) => floodHistory(s, users, events));
  console.log(
    `  history of ${events} event(s): ${(g.bytes / users).toFixed(0)} B (${(g.bytes / users / events).toFixed(1)} B an event)`,
  );
}

console.log(
  `floods against the default bounds (${DEFAULT_MAX_COUNTER_BYTES / MB} MiB counters, ${DEFAULT_MAX_HISTORY_BYTES / MB} MiB history):`,
);
const defaults: MemoryFeatureStoreOptions = {};
const floods: [string, (s: MemoryFeatureStore) => void][] = [
  ['3,000 keys x 1,000 members', (s) => floodDistinctMembers(s, Math.round(3000 * scale), 1000)],
  ['300,000 new keys', (s) => floodNewKeys(s, Math.round(300_000 * scale))],
  ['600,000 history events (600 users x 1,000)', (s) => floodHistory(s, Math.round(600 * scale), 1000)],
  ['600,000 history events (600,000 users x 1)', (s) => floodHistory(s, Math.round(600_000 * scale), 1)],
];
for (const [name, run] of floods) {
  const startedAt = performance.now();
  const g = grown(run, defaults);
  console.log(
    `  ${name}: +${(g.bytes / MB).toFixed(1)} MiB heap, held ${(g.held.counters / MB).toFixed(1)} + ${(g.held.history / MB).toFixed(1)} MiB priced, ${((performance.now() - startedAt) / 1000).toFixed(1)} s`,
  );
}
