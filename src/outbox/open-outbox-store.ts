import type { RiskgateConfig } from '../config/riskgate-config.ts';
import type { RiskgateDatabase } from '../database/database.ts';
import { DatabaseOutboxStore, type DatabaseOutboxStoreOptions } from './database-outbox-store.ts';
import { MemoryOutboxStore } from './memory-outbox-store.ts';
import type { OutboxStore } from './outbox-store.ts';

/**
 * The outbox's store as configured (RISKGATE_OUTBOX): the control state's database, or this
 * process's memory (whose appends still write their companions' rows to `database`).
 */
export function openOutboxStore(
  config: Pick<RiskgateConfig, 'outbox'>,
  database: RiskgateDatabase,
  options: Pick<DatabaseOutboxStoreOptions, 'onUnreadable'> = {},
): OutboxStore {
  return config.outbox.kind === 'memory'
    ? new MemoryOutboxStore({ database })
    : new DatabaseOutboxStore(database, options);
}
