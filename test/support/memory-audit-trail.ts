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
    async list(filter: AuditFilter) {
      const entries = trail.entries
        .filter((e) => filter.action === undefined || e.action === filter.action)
        .filter((e) => filter.target === undefined || e.target === filter.target)
        .toReversed();
      return { entries: entries.slice(0, filter.limit ?? 50) };
    },
  };
  return trail;
}
