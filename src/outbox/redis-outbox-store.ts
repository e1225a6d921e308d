import type { RedisClientType } from 'redis';
import { type ActionSpec, parseStoredSpec } from '../actions/admin-actions.ts';
import { connectRedis, RedisScripts } from '../redis/redis-client.ts';
import { withDeadline } from '../store/store-deadline.ts';
import {
  type ClaimOptions,
  dueAtMs,
  type OutboxEntry,
  type OutboxListFilter,
  type OutboxStats,
  type OutboxStatus,
  type OutboxStore,
  WEBHOOK_ACTION_TYPE,
} from './outbox-store.ts';

/**
 * The shared outbox on Redis, for replicas: the same leases and per-user order as the SQLite store,
 * each operation one Lua script (atomic on the server, so two replicas never hold one entry).
 *
 * Layout under `riskgate:{outbox}:` (one hash tag: every key in one slot):
 * - `e:<id>` a hash per entry (spec, status, attempts, times, owner, lease, errors);
 * - `u:<orderingKey>` a list per user, in append order: only its head is ever due, so a user's
 *   later action cannot overtake an earlier one still pending;
 * - `due` (score: next attempt time) and `leased` (score: lease end) hold the heads; a lease that
 *   ran out (its replica died) is moved back to `due` by the next claim;
 * - `pend`, `dead`, `done`, `all` index entries for stats, listing and pruning.
 *
 * Why not Streams with a consumer group: a stream delivers in append order to whichever consumer
 * reads, with no per-entry "not before" time and no per-user order; retries with backoff and
 * ordering per user would have to be rebuilt on top of it. A sorted set of due times with leases
 * is that directly, and XAUTOCLAIM's "take over a dead consumer's entries" is the expired lease.
 * Durability is the server's: run it with `appendonly yes` (riskgate warns when it is off).
 */

export interface RedisOutboxStoreOptions {
  url: string;
  /** Key prefix. Default `riskgate:{outbox}:`. */
  prefix?: string;
  /** Connect timeout, milliseconds. Default 2000. */
  timeoutMs?: number;
  /**
   * Timeout of one operation (a script, or the reads of a listing), milliseconds, enforced even
   * when the server holds the connection and never answers. Default 1000. The /decide path does
   * not wait that long: the outbox bounds an append by what is left of the decision's deadline
   * (src/outbox/outbox.ts).
   */
  commandTimeoutMs?: number;
}

const ENTRY_FIELDS = `
local function entry(k)
  return redis.call('HGETALL', k)
end
`;

const APPEND = `
local P = KEYS[1]
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local out = {}
for i = 0, n - 1 do
  local id, ok, spec, at = ARGV[3 + i * 4], ARGV[4 + i * 4], ARGV[5 + i * 4], tonumber(ARGV[6 + i * 4])
  local k = P .. 'e:' .. id
  if redis.call('EXISTS', k) == 1 then
    out[#out + 1] = 0
  else
    local seq = redis.call('INCR', P .. 'seq')
    redis.call('HSET', k, 'spec', spec, 'ok', ok, 'status', 'pending', 'attempts', 0, 'created', at,
      'horizon', at, 'next', at, 'updated', now, 'seq', seq, 'owner', '', 'lease', 0)
    redis.call('ZADD', P .. 'all', seq, id)
    redis.call('ZADD', P .. 'pend', at, id)
    local u = P .. 'u:' .. ok
    redis.call('RPUSH', u, id)
    if redis.call('LLEN', u) == 1 then redis.call('ZADD', P .. 'due', at, id) end
    out[#out + 1] = 1
  end
end
return out
`;

/** Due webhook deliveries a claim that skips them passes over at most (the rest wait their turn). */
const SKIPPED_WEBHOOKS_MAX = 1000;

const CLAIM = `${ENTRY_FIELDS}
local P = KEYS[1]
local owner, now, limit, leaseUntil = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local webhook = ARGV[5]
for _, id in ipairs(redis.call('ZRANGEBYSCORE', P .. 'leased', '-inf', now)) do
  redis.call('ZREM', P .. 'leased', id)
  redis.call('HSET', P .. 'e:' .. id, 'owner', '', 'lease', 0)
  redis.call('ZADD', P .. 'due', now, id)
end
local out = {}
-- Skipping webhooks (ARGV[5] their spec's type, else ''), a bounded number of due ones is passed over.
local window = limit
if webhook ~= '' then window = limit + ${SKIPPED_WEBHOOKS_MAX} end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', P .. 'due', '-inf', now, 'LIMIT', 0, window)) do
  if #out >= limit then break end
  local k = P .. 'e:' .. id
  if webhook == '' or not string.find(redis.call('HGET', k, 'spec'), webhook, 1, true) then
    redis.call('ZREM', P .. 'due', id)
    redis.call('ZADD', P .. 'leased', leaseUntil, id)
    redis.call('HINCRBY', k, 'attempts', 1)
    redis.call('HSET', k, 'owner', owner, 'lease', leaseUntil, 'updated', now)
    out[#out + 1] = entry(k)
  end
end
return out
`;

/** Ends a pending entry (delivered, dead or dropped) and makes its user's next entry due. */
const FINISH = `
local P = KEYS[1]
local id, owner, now, status, reason = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]
local k = P .. 'e:' .. id
local current = redis.call('HGET', k, 'status')
if owner ~= '' then
  if current ~= 'pending' or redis.call('HGET', k, 'owner') ~= owner then return 0 end
elseif status == 'dropped' then
  if current ~= 'pending' and current ~= 'dead' then return 0 end
end
redis.call('ZREM', P .. 'leased', id)
redis.call('ZREM', P .. 'due', id)
redis.call('ZREM', P .. 'pend', id)
redis.call('ZREM', P .. 'dead', id)
redis.call('HSET', k, 'status', status, 'lease', 0, 'updated', now, 'reason', reason)
if status == 'dead' then redis.call('ZADD', P .. 'dead', now, id) else redis.call('ZADD', P .. 'done', now, id) end
redis.call('ZADD', P .. 'unlogged', now, id)
local u = P .. 'u:' .. redis.call('HGET', k, 'ok')
local wasHead = redis.call('LINDEX', u, 0) == id
redis.call('LREM', u, 1, id)
if wasHead then
  local head = redis.call('LINDEX', u, 0)
  if head then redis.call('ZADD', P .. 'due', tonumber(redis.call('HGET', P .. 'e:' .. head, 'next')), head) end
end
return 1
`;

const RETRY_LATER = `
local P = KEYS[1]
local id, owner, nextAt, lastError, uncount, now = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
local k = P .. 'e:' .. id
if redis.call('HGET', k, 'status') ~= 'pending' or redis.call('HGET', k, 'owner') ~= owner then return 0 end
redis.call('ZREM', P .. 'leased', id)
redis.call('HSET', k, 'owner', '', 'lease', 0, 'next', nextAt, 'updated', now)
if lastError ~= '' then redis.call('HSET', k, 'lastError', lastError) end
if uncount > 0 then redis.call('HINCRBY', k, 'attempts', -uncount) end
redis.call('ZADD', P .. 'due', nextAt, id)
return 1
`;

const OPERATOR_RETRY = `
local P = KEYS[1]
local id, now = ARGV[1], tonumber(ARGV[2])
local k = P .. 'e:' .. id
local s = redis.call('HGET', k, 'status')
if s ~= 'dead' and s ~= 'dropped' then return 0 end
redis.call('ZREM', P .. 'dead', id)
redis.call('ZREM', P .. 'done', id)
redis.call('HSET', k, 'status', 'pending', 'reason', '', 'next', now, 'horizon', now, 'updated', now)
redis.call('ZADD', P .. 'pend', tonumber(redis.call('HGET', k, 'created')), id)
local u = P .. 'u:' .. redis.call('HGET', k, 'ok')
redis.call('RPUSH', u, id)
if redis.call('LLEN', u) == 1 then redis.call('ZADD', P .. 'due', now, id) end
return 1
`;

const RELEASE_OWNER = `
local P = KEYS[1]
local owner, now = ARGV[1], tonumber(ARGV[2])
local n = 0
for _, id in ipairs(redis.call('ZRANGE', P .. 'leased', 0, -1)) do
  local k = P .. 'e:' .. id
  if redis.call('HGET', k, 'owner') == owner then
    redis.call('ZREM', P .. 'leased', id)
    redis.call('HSET', k, 'owner', '', 'lease', 0, 'next', now)
    redis.call('ZADD', P .. 'due', now, id)
    n = n + 1
  end
end
return n
`;

const PRUNE = `
local P = KEYS[1]
local ids = redis.call('ZRANGEBYSCORE', P .. 'done', '-inf', tonumber(ARGV[1]))
for _, id in ipairs(ids) do
  redis.call('DEL', P .. 'e:' .. id)
  redis.call('ZREM', P .. 'done', id)
  redis.call('ZREM', P .. 'all', id)
end
return #ids
`;

function entryOf(flat: string[]): OutboxEntry {
  const h: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) h[flat[i]!] = flat[i + 1]!;
  return {
    spec: parseStoredSpec(h.spec ?? 'null'),
    status: h.status as OutboxStatus,
    attempts: Number(h.attempts),
    createdAtMs: Number(h.created),
    horizonStartMs: Number(h.horizon),
    nextAttemptAtMs: Number(h.next),
    updatedAtMs: Number(h.updated),
    lastError: h.lastError || undefined,
    reason: h.reason || undefined,
    owner: h.owner || undefined,
  };
}

export class RedisOutboxStore implements OutboxStore {
  readonly durable = true;
  readonly #client: RedisClientType;
  readonly #prefix: string;
  readonly #scripts: RedisScripts;
  readonly #timeoutMs: number;

  private constructor(client: RedisClientType, prefix: string, timeoutMs: number) {
    this.#client = client;
    this.#prefix = prefix;
    this.#timeoutMs = timeoutMs;
    this.#scripts = new RedisScripts(client, timeoutMs);
  }

  /** Connects (bounded by `timeoutMs`); rejects with the reason when the server cannot be reached. */
  static async connect(options: RedisOutboxStoreOptions): Promise<RedisOutboxStore> {
    const commandTimeoutMs = options.commandTimeoutMs ?? 1000;
    const client = await connectRedis({
      url: options.url,
      purpose: 'the Redis outbox',
      ...(options.timeoutMs !== undefined && { timeoutMs: options.timeoutMs }),
      commandTimeoutMs,
    });
    return new RedisOutboxStore(client, options.prefix ?? 'riskgate:{outbox}:', commandTimeoutMs);
  }

  /** Whether the server persists every write (AOF); undefined when CONFIG is not allowed. */
  async appendOnly(): Promise<boolean | undefined> {
    try {
      const r = (await this.#client.configGet('appendonly')) as Record<string, string>;
      return r.appendonly === 'yes';
    } catch {
      return undefined;
    }
  }

  async warnings(): Promise<string[]> {
    return (await this.appendOnly()) === false
      ? ['the Redis outbox server runs without appendonly: a Redis restart loses the actions queued in it']
      : [];
  }

  #run(name: string, text: string, args: (string | number)[]): Promise<unknown> {
    return this.#scripts.run(name, text, [this.#prefix], args);
  }

  /** `work` (several plain commands) under the one deadline a script has. */
  #bounded<T>(what: string, work: () => Promise<T>): Promise<T> {
    return withDeadline(work(), this.#timeoutMs, `the Redis outbox (${what})`);
  }

  async append(specs: readonly ActionSpec[], nowMs: number): Promise<boolean[]> {
    const args: (string | number)[] = [nowMs, specs.length];
    for (const s of specs) args.push(s.id, s.orderingKey, JSON.stringify(s), dueAtMs(s, nowMs));
    const r = (await this.#run('append', APPEND, args)) as number[];
    return r.map((x) => x === 1);
  }

  async claim(
    owner: string,
    limit: number,
    nowMs: number,
    leaseMs: number,
    options: ClaimOptions = {},
  ): Promise<OutboxEntry[]> {
    // The spec as JSON.stringify writes it: a webhook's body is a string, its quotes escaped.
    const webhook = options.skipWebhooks === true ? `"type":${JSON.stringify(WEBHOOK_ACTION_TYPE)}` : '';
    const r = (await this.#run('claim', CLAIM, [
      owner,
      nowMs,
      limit,
      nowMs + leaseMs,
      webhook,
    ])) as string[][];
    return r.map(entryOf);
  }

  async complete(id: string, owner: string, nowMs: number): Promise<boolean> {
    return (await this.#run('finish', FINISH, [id, owner, nowMs, 'delivered', ''])) === 1;
  }

  async retryLater(
    id: string,
    owner: string,
    nextAttemptAtMs: number,
    lastError: string | undefined,
    countAttempt: boolean,
    nowMs: number,
  ): Promise<void> {
    await this.#run('retryLater', RETRY_LATER, [
      id,
      owner,
      nextAttemptAtMs,
      lastError ?? '',
      countAttempt ? 0 : 1,
      nowMs,
    ]);
  }

  async deadLetter(id: string, owner: string, reason: string, nowMs: number): Promise<boolean> {
    return (await this.#run('finish', FINISH, [id, owner, nowMs, 'dead', reason])) === 1;
  }

  async unlogged(limit: number): Promise<OutboxEntry[]> {
    return this.#bounded('unlogged', async () => {
      const ids = await this.#client.zRange(`${this.#prefix}unlogged`, 0, limit - 1);
      const out: OutboxEntry[] = [];
      for (const id of ids) {
        const e = await this.get(id);
        if (e === undefined) await this.#client.zRem(`${this.#prefix}unlogged`, id);
        else out.push(e);
      }
      return out;
    });
  }

  async markLogged(ids: readonly string[]): Promise<void> {
    return this.#bounded('markLogged', async () => {
      if (ids.length > 0) await this.#client.zRem(`${this.#prefix}unlogged`, [...ids]);
    });
  }

  async leaseOwners(nowMs: number): Promise<string[]> {
    return this.#bounded('leaseOwners', async () => {
      // Exclusive: a lease ending now has run out (a claim at `nowMs` takes it over).
      const ids = await this.#client.zRangeByScore(`${this.#prefix}leased`, `(${nowMs}`, '+inf');
      const owners = new Set<string>();
      for (const id of ids) {
        const owner = await this.#client.hGet(`${this.#prefix}e:${id}`, 'owner');
        if (owner) owners.add(owner);
      }
      return [...owners];
    });
  }

  async releaseOwner(owner: string, nowMs: number): Promise<number> {
    return Number(await this.#run('releaseOwner', RELEASE_OWNER, [owner, nowMs]));
  }

  async list(filter: OutboxListFilter): Promise<OutboxEntry[]> {
    return this.#bounded('list', async () => {
      const limit = filter.limit ?? 100;
      const index =
        filter.status === 'pending'
          ? 'pend'
          : filter.status === 'dead'
            ? 'dead'
            : filter.status === undefined
              ? 'all'
              : 'done';
      // delivered and dropped share `done`: read more and filter.
      const want = filter.status === 'delivered' || filter.status === 'dropped' ? limit * 4 : limit;
      const ids = await this.#client.zRange(`${this.#prefix}${index}`, 0, want - 1, { REV: true });
      const out: OutboxEntry[] = [];
      for (const id of ids) {
        const flat = await this.#client.hGetAll(`${this.#prefix}e:${id}`);
        if (Object.keys(flat).length === 0) continue;
        const entry = entryOf(Object.entries(flat).flat());
        if (filter.status !== undefined && entry.status !== filter.status) continue;
        out.push(entry);
        if (out.length >= limit) break;
      }
      return out;
    });
  }

  async get(id: string): Promise<OutboxEntry | undefined> {
    return this.#bounded('get', async () => {
      const flat = await this.#client.hGetAll(`${this.#prefix}e:${id}`);
      return Object.keys(flat).length === 0 ? undefined : entryOf(Object.entries(flat).flat());
    });
  }

  async stats(nowMs: number): Promise<OutboxStats> {
    return this.#bounded('stats', async () => {
      const [pending, dead, oldest] = await Promise.all([
        this.#client.zCard(`${this.#prefix}pend`),
        this.#client.zCard(`${this.#prefix}dead`),
        this.#client.zRangeWithScores(`${this.#prefix}pend`, 0, 0),
      ]);
      const first = oldest[0];
      return {
        pending,
        dead,
        oldestPendingAgeMs: first === undefined ? 0 : Math.max(0, nowMs - first.score),
      };
    });
  }

  async retry(id: string, nowMs: number): Promise<boolean> {
    return (await this.#run('operatorRetry', OPERATOR_RETRY, [id, nowMs])) === 1;
  }

  async drop(id: string, reason: string, nowMs: number): Promise<boolean> {
    return (await this.#run('finish', FINISH, [id, '', nowMs, 'dropped', reason])) === 1;
  }

  async prune(beforeMs: number): Promise<number> {
    return Number(await this.#run('prune', PRUNE, [beforeMs]));
  }

  async close(): Promise<void> {
    try {
      await this.#client.close();
    } catch {
      this.#client.destroy();
    }
  }
}
