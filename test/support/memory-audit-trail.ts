import type { AuditEntry, AuditFilter, AuditTrail } from '../../src/operators/audit-trail.ts';

/** An audit trail in memory for tests; `failing` makes `record` reject (a trail that is down). */
export interface MemoryAuditTrail extends AuditTrail {
  entries: AuditEntry[];
  failing: boolean;
}

export function memoryAuditTrail(): MemoryAuditTrail {
  const trail: MemoryAuditTrail = {
    entries: [],
    failing: false,
    async record(entry) {
      if (trail.failing) throw new Error('the audit trail is down');
      const written: AuditEntry = {
        ...entry,
        id: String(trail.entries.length + 1).padStart(8, '0'),
        at: new Date().toISOString(),
      };
      trail.entries.push(written);
      return written;
    },
    async settle(id, outcome) {
      if (trail.failing) throw new Error('the audit trail is down');
      const entry = trail.entries.find((e) => e.id === id);
      if (entry !== undefined && (entry.outcome === undefined || entry.outcome.status === 'unknown')) {
        entry.outcome = { ...outcome, at: new Date().toISOString() };
      }
    },
    async list(filter: AuditFilter) {
      const entries = trail.entries
        .filter((e) => filter.action === undefined || e.action === filter.action)
        .filter((e) => filter.target === undefined || e.target === filter.target)
        .map((e) => ({ ...e, outcome: e.outcome ?? { status: 'unknown' as const } }))
        .toReversed();
      return { entries: entries.slice(0, filter.limit ?? 50) };
    },
  };
  return trail;
}
