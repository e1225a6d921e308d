import type { AuditEntry, AuditTrail } from '../../src/audit/audit-trail.ts';

/** An audit trail in memory for tests: entries in order; `failing` makes `record` reject. */
export class MemoryAuditTrail implements AuditTrail {
  readonly entries: AuditEntry[] = [];
  failing = false;

  async record(entry: Omit<AuditEntry, 'id' | 'at'>): Promise<AuditEntry> {
    if (this.failing) throw new Error('the audit trail is down');
    const at = new Date().toISOString();
    const full: AuditEntry = { id: `${at}-${this.entries.length}`, at, ...entry };
    this.entries.push(full);
    return full;
  }

  async list(): Promise<{ entries: AuditEntry[] }> {
    return { entries: [...this.entries].reverse() };
  }
}
