import { existsSync } from 'node:fs';
import { outboxPath } from '../outbox/open-outbox-store.ts';
import type { OutboxStatus, OutboxStore } from '../outbox/outbox-store.ts';
import { outboxEntryView } from '../outbox/outbox-view.ts';
import { SqliteOutboxStore } from '../outbox/sqlite-outbox-store.ts';
import type { CliIo } from './policy-commands.ts';

/**
 * `riskgate actions list|retry|drop`: the outbox, seen and steered by an operator, over the same
 * store the service uses (RISKGATE_OUTBOX and RISKGATE_STATE_DIR, as the service reads them).
 * Exit 0 ok, 1 when the store cannot be opened or the action is not in the state the command
 * needs, 2 on a usage error.
 */

export const ACTIONS_EXIT = { OK: 0, FAILED: 1, USAGE: 2 } as const;

export interface ActionsCommandOptions {
  env: Readonly<Record<string, string | undefined>>;
  status?: string | undefined;
  limit?: string | undefined;
  json: boolean;
}

const STATUSES: readonly OutboxStatus[] = ['pending', 'delivered', 'dead', 'dropped'];

async function openStore(env: ActionsCommandOptions['env'], io: CliIo): Promise<OutboxStore | undefined> {
  const kind = env.RISKGATE_OUTBOX?.trim() || 'sqlite';
  if (kind === 'memory') {
    io.err(
      'riskgate: RISKGATE_OUTBOX=memory keeps actions in the service process: ask it, GET /actions on its ops port',
    );
    return undefined;
  }
  if (kind !== 'sqlite') {
    if (!/^rediss?:\/\//.test(kind)) {
      io.err('riskgate: RISKGATE_OUTBOX must be sqlite, memory or a redis:// URL');
      return undefined;
    }
    const { RedisOutboxStore } = await import('../outbox/redis-outbox-store.ts');
    try {
      return await RedisOutboxStore.connect({ url: kind });
    } catch (error) {
      io.err(`riskgate: cannot reach the Redis outbox: ${(error as Error).message}`);
      return undefined;
    }
  }
  const path = outboxPath(env.RISKGATE_STATE_DIR?.trim() || '.riskgate/');
  if (!existsSync(path)) {
    io.err(`riskgate: no outbox at ${path} (set RISKGATE_STATE_DIR to the service's state directory)`);
    return undefined;
  }
  return new SqliteOutboxStore({ path });
}

/** `riskgate actions <command> [id]`. */
export async function actionsCommand(
  command: string,
  id: string | undefined,
  options: ActionsCommandOptions,
  io: CliIo,
): Promise<number> {
  if (command === 'list') {
    if (id !== undefined) return usage(io, 'actions list takes no id');
    if (options.status !== undefined && !STATUSES.includes(options.status as OutboxStatus)) {
      return usage(io, `--status must be one of ${STATUSES.join(', ')}`);
    }
    const limit = options.limit === undefined ? 100 : Number(options.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 10_000)
      return usage(io, '--limit must be 1 to 10000');
    const store = await openStore(options.env, io);
    if (store === undefined) return ACTIONS_EXIT.FAILED;
    try {
      const entries = (await store.list({ status: options.status as OutboxStatus | undefined, limit })).map(
        outboxEntryView,
      );
      const stats = await store.stats(Date.now());
      if (options.json) {
        io.out(JSON.stringify({ ...stats, actions: entries }));
      } else {
        io.out(
          `${stats.pending} pending (oldest ${Math.round(stats.oldestPendingAgeMs / 1000)} s), ${stats.dead} dead`,
        );
        for (const e of entries) {
          const why = e.reason ?? e.lastError;
          io.out(
            `${e.status.padEnd(9)} ${e.id}  attempts ${e.attempts}  ${e.updatedAt}${why ? `  ${why}` : ''}`,
          );
        }
      }
      return ACTIONS_EXIT.OK;
    } finally {
      await store.close();
    }
  }
  if (command !== 'retry' && command !== 'drop') return usage(io, `unknown command "actions ${command}"`);
  if (id === undefined) return usage(io, `actions ${command} needs the action's id (see actions list)`);
  const store = await openStore(options.env, io);
  if (store === undefined) return ACTIONS_EXIT.FAILED;
  try {
    const now = Date.now();
    const changed =
      command === 'retry' ? await store.retry(id, now) : await store.drop(id, 'dropped_by_operator', now);
    if (!changed) {
      io.err(
        `riskgate: no ${command === 'retry' ? 'dead or dropped' : 'pending or dead'} action with id ${id}`,
      );
      return ACTIONS_EXIT.FAILED;
    }
    const entry = await store.get(id);
    io.out(
      options.json
        ? JSON.stringify(outboxEntryView(entry!))
        : `${command === 'retry' ? 'pending again, due now' : 'dropped'}: ${id}`,
    );
    return ACTIONS_EXIT.OK;
  } finally {
    await store.close();
  }
}

function usage(io: CliIo, message: string): number {
  io.err(`riskgate: ${message}`);
  return ACTIONS_EXIT.USAGE;
}
