import { createClient, type RedisClientType } from 'redis';

/**
 * The one way riskgate connects to Redis (the outbox, the feature store): commands that fail at
 * once while disconnected instead of queueing behind a reconnect, a timeout on every command, a
 * bounded background reconnect, and Lua scripts run by hash with a reload when the server lost them.
 */

export interface RedisConnectOptions {
  url: string;
  /** What it is for, in the error message (`the Redis outbox`). The URL never is: it may hold a password. */
  purpose: string;
  /** Connect timeout, milliseconds. Default 2000. */
  timeoutMs?: number;
  /** Timeout of one command, milliseconds. */
  commandTimeoutMs: number;
}

export async function connectRedis(options: RedisConnectOptions): Promise<RedisClientType> {
  const timeoutMs = options.timeoutMs ?? 2000;
  const client = createClient({
    url: options.url,
    socket: {
      connectTimeout: timeoutMs,
      // Reconnect with a bounded backoff, in the background.
      reconnectStrategy: (retries: number) => Math.min(50 * 2 ** retries, 2000),
    },
    // While disconnected a command fails at once instead of queueing behind the reconnect: the
    // caller (a decision) answers now with what it has.
    disableOfflineQueue: true,
    commandOptions: { timeout: options.commandTimeoutMs },
  }) as RedisClientType;
  let firstError: unknown;
  client.on('error', (error: unknown) => {
    firstError ??= error;
  });
  try {
    await Promise.race([
      client.connect(),
      new Promise((_, reject) =>
        setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs).unref(),
      ),
    ]);
  } catch (error) {
    client.destroy();
    throw new Error(
      `cannot connect to ${options.purpose}: ${String((error as Error).message ?? firstError)}`,
    );
  }
  return client;
}

/** Lua scripts by name, loaded once and run with EVALSHA (loaded again after a server restart). */
export class RedisScripts {
  readonly #client: RedisClientType;
  readonly #loaded = new Map<string, { text: string; sha: string }>();

  constructor(client: RedisClientType) {
    this.#client = client;
  }

  async run(name: string, text: string, keys: string[], args: (string | number)[]): Promise<unknown> {
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
