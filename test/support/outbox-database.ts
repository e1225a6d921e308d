import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ActionOutcome } from '../../src/actions/action-dispatcher.ts';
import type { ActionSpec } from '../../src/actions/admin-actions.ts';
import { type DatabaseTarget, openDatabase } from '../../src/database/database.ts';
import { DatabaseOutboxStore } from '../../src/outbox/database-outbox-store.ts';
import { outboxMigrations } from '../../src/outbox/outbox-tables.ts';

/** A fresh embedded database file for an outbox (its own temp dir). */
export function outboxSqliteFile(prefix = 'rg-outbox-'): DatabaseTarget {
  return { kind: 'sqlite', path: join(mkdtempSync(join(tmpdir(), prefix)), 'control.sqlite') };
}

/** The database outbox store over `target` (default: a fresh SQLite file), its database closed with it. */
export async function openDatabaseOutbox(
  target: DatabaseTarget = outboxSqliteFile(),
): Promise<DatabaseOutboxStore> {
  return new DatabaseOutboxStore(await openDatabase(target, { migrations: outboxMigrations }), {
    ownsDatabase: true,
  });
}

/** Decision `d<n>`'s lock-out of `user`, as the outbox holds it (the user its ordering key). */
export function lockOutSpec(n: number, user: string): ActionSpec {
  return {
    id: `d${n}:lock_out_user:${user}`,
    decisionId: `d${n}`,
    type: 'lock_out_user',
    target: user,
    orderingKey: user,
    call: { method: 'updateUser', userId: user, update: { status: 'locked_out' } },
  };
}

/** `spec` done at its first attempt, as the outbox tells its outcome. */
export function doneOutcome(spec: Pick<ActionSpec, 'id' | 'decisionId' | 'type' | 'target'>): ActionOutcome {
  const { id: key, decisionId, type, target } = spec;
  return { key, decisionId, type, target, status: 'done', attempts: 1, elapsedMs: 0 };
}
