import { existsSync } from 'node:fs';
import { type DatabaseTarget, openDatabase } from '../database/database.ts';
import { stateFiles } from '../database/state-files.ts';
import { DatabaseOutboxStore } from '../outbox/database-outbox-store.ts';
import type { OutboxStatus, OutboxStore } from '../outbox/outbox-store.ts';
import { outboxEntryView } from '../outbox/outbox-view.ts';
import { ALL_MIGRATIONS, CONTROL_MIGRATIONS } from '../service/database-migrations.ts';
import type { CliIo } from './policy-commands.ts';

/**
 * `riskgate actions list|retry|drop`: the outbox, seen and steered by an operator, over the same
 * database the service uses (RISKGATE_DATABASE and RISKGATE_STATE_DIR, as the service reads them).
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

/** The database the service's outbox is in, as RISKGATE_DATABASE names it; undefined (said why) when none. */
function outboxDatabase(env: ActionsCommandOptions['env'], io: CliIo): DatabaseTarget | undefined {
  if (env.RISKGATE_OUTBOX?.trim() === 'memory') {
    io.err(
      'riskgate: RISKGATE_OUTBOX=memory keeps actions in the service process: ask it, GET /actions on its ops port',
    );
    return undefined;
  }
  const setting = env.RISKGATE_DATABASE?.trim() || 'sqlite';
  if (/^postgres(ql)?:\/\//.test(setting)) return { kind: 'postgres', url: setting };
  if (setting !== 'sqlite') {
    io.err('riskgate: RISKGATE_DATABASE must be sqlite or a postgres:// URL for the actions commands');
    return undefined;
  }
  const path = stateFiles(env.RISKGATE_STATE_DIR?.trim() || '.riskgate/').control;
  if (!existsSync(path)) {
    io.err(`riskgate: no database at ${path} (set RISKGATE_STATE_DIR to the service's state directory)`);
    return undefined;
  }
  return { kind: 'sqlite', path };
}

async function openStore(env: ActionsCommandOptions['env'], io: CliIo): Promise<OutboxStore | undefined> {
  const target = outboxDatabase(env, io);
  if (target === undefined) return undefined;
  try {
    // The migrations the service applied there (kysely refuses a database with applied migrations
    // it is not given): the control file's embedded, every feature's in the one PostgreSQL.
    const migrations = target.kind === 'sqlite' ? CONTROL_MIGRATIONS : ALL_MIGRATIONS;
    const database = await openDatabase(target, { migrations });
    return new DatabaseOutboxStore(database, { ownsDatabase: true });
  } catch (error) {
    // The message names the failure, never the URL (it may carry a password).
    io.err(`riskgate: cannot open the outbox's database: ${(error as Error).message}`);
    return undefined;
  }
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
