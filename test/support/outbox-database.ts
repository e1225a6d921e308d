import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
