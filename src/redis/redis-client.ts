import { createClient, type RedisClientType } from 'redis';
import { withDeadline } from '../store/store-deadline.ts';
import { exponentialDelayMs } from '../timing/backoff.ts';
import { withTimeout } from '../timing/with-timeout.ts';

/**
 * The one way riskgate connects to Redis (the outbox, the feature store): commands that fail at
 * once while disconnected instead of queueing behind a reconnect, a timeout on every command, a
 * bounded background reconnect, and Lua scripts run by hash with a reload when the server lost them.
 *
 * node-redis's own command timeout ends when the command is written: a server that accepts the
 * bytes and never answers (stopped, stalled) would hold the caller until it answers. So scripts
 * run under a deadline of their own (src/store/store-deadline.ts), and the commands a stalled server
 * leaves waiting are bounded (`MAX_COMMANDS_IN_FLIGHT`): past it a command fails at once.
 */

/** Commands written or waiting to be, per connection, before new ones fail at once. */
export const MAX_COMMANDS_IN_FLIGHT = 10_000;

export interface RedisConnectOptions {
  url: string;
  /** What it is for, in the error message (`the feature store`). The URL never is: it may hold a password. */
  purpose: string;
  /** Connect timeout, milliseconds. Default 2000. */
  timeoutMs?: number;
  /** Timeout of one command, milliseconds (enforced by the client until the command is written). */
  commandTimeoutMs: number;
}

export async function connectRedis(options: RedisConnectOptions): Promise<RedisClientType> {
  const timeoutMs = options.timeoutMs ?? 2000;
  const client = createClient({
    url: options.url,
    socket: {
      connectTimeout: timeoutMs,
      // Reconnect with a bounded backoff, in the background.
      reconnectStrategy: (retries: number) => exponentialDelayMs({ initialMs: 50, maxMs: 2000 }, retries + 1),
    },
    // While disconnected a command fails at once instead of queueing behind the reconnect: the
    // caller (a decision) answers now with what it has.
    disableOfflineQueue: true,
    commandsQueueMaxLength: MAX_COMMANDS_IN_FLIGHT,
    commandOptions: { timeout: options.commandTimeoutMs },
  }) as RedisClientType;
  let firstError: unknown;
  client.on('error', (error: unknown) => {
    firstError ??= error;
  });
  try {
    await withTimeout(client.connect(), {
      timeoutMs,
      onTimeout: () => new Error(`no answer within ${timeoutMs} ms`),
      ref: false,
    });
  } catch (error) {
    client.destroy();
    throw new Error(
      `cannot connect to ${options.purpose}: ${String((error as Error).message ?? firstError)}`,
    );
  }
  return client;
}

/**
 * Lua scripts by name, loaded once and run with EVALSHA (loaded again after a server restart).
 * `timeoutMs` (milliseconds) bounds a whole run, a reload included: past it the run rejects with
 * `StoreTimeoutError` though the script may still run on the server later.
 */
export class RedisScripts {
  readonly #client: RedisClientType;
  readonly #timeoutMs: number;
  readonly #loaded = new Map<string, { text: string; sha: string }>();

  constructor(client: RedisClientType, timeoutMs: number) {
    this.#client = client;
    this.#timeoutMs = timeoutMs;
  }

  run(name: string, text: string, keys: string[], args: (string | number)[]): Promise<unknown> {
    return withDeadline(this.#run(name, text, keys, args), this.#timeoutMs, `redis script ${name}`);
  }

  async #run(name: string, text: string, keys: string[], args: (string | number)[]): Promise<unknown> {
    let script = this.#loaded.get(name);
    if (script === undefined) {
      script = { text, sha: await this.#client.scriptLoad(text) };
      this.#loaded.set(name, script);
    }
    const options = { keys, arguments: args.map(String) };
    try {
      return await this.#client.evalSha(script.sha, options);
    } catch (error) {
      // A server restarted without its script cache: load it again once.
      if (!String(error).includes('NOSCRIPT')) throw error;
      script.sha = await this.#client.scriptLoad(text);
      return this.#client.evalSha(script.sha, options);
    }
  }
}
