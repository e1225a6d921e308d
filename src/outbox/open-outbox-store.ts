import { join } from 'node:path';
import type { RiskgateConfig } from '../config/riskgate-config.ts';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import { MemoryOutboxStore } from './memory-outbox-store.ts';
import type { OutboxStore } from './outbox-store.ts';
import { SqliteOutboxStore } from './sqlite-outbox-store.ts';

/** The outbox's store as configured (RISKGATE_OUTBOX). */
export async function openOutboxStore(
  config: Pick<RiskgateConfig, 'outbox' | 'stateDir'>,
): Promise<OutboxStore> {
  const o = config.outbox;
  switch (o.kind) {
    case 'memory':
      return new MemoryOutboxStore();
    case 'sqlite':
      return new SqliteOutboxStore({ path: outboxPath(config.stateDir), sync: o.sync });
    case 'redis': {
      // Loaded only when configured: the embedded default never loads a Redis client.
      const { RedisOutboxStore } = await import('./redis-outbox-store.ts');
      try {
        return await RedisOutboxStore.connect({ url: o.url });
      } catch (error) {
        // The URL may carry a password: the message names the failure, never the URL.
        throw new RiskgateError(ErrorCode.INVALID_CONFIG, `RISKGATE_OUTBOX: ${(error as Error).message}`);
      }
    }
  }
}

/** Where the embedded outbox lives. */
export function outboxPath(stateDir: string): string {
  return join(stateDir, 'outbox.sqlite');
}
