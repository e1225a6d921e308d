import type { RedisClientType } from 'redis';
import { type CheckpointStore, type LogCheckpoint, logCheckpointSchema } from '../logs/log-checkpoint.ts';
import { connectRedis, RedisScripts } from '../redis/redis-client.ts';
import { withDeadline } from '../store/store-deadline.ts';
import {
  bucketWidthMs,
  COUNTER_BUCKETS,
  type CounterOp,
  type CounterReadings,
  type FeatureStore,
  HISTORY_MAX_EVENTS_PER_USER,
  HISTORY_RETENTION_MS,
  type HistoryEvent,
  type HistoryKind,
  type HistoryReading,
  MAX_DISTINCT_MEMBERS,
} from './feature-store.ts';

/**
 * The feature store shared by replicas, on the Redis the outbox uses. Every operation is one Lua
 * script, so one decision's counters are read in one round trip and counted atomically in another,
 * whichever replica answers it.
 *
 * Layout under `riskgate:{features}:` (one hash tag: every key in one slot):
 * - `c:<counter key>` a hash of COUNTER_BUCKETS + 1 slots, each `<sub-window>:<count>` (a ring, so
 *   a counter under a steady flood stays 13 fields), expiring a window after its last count;
 * - `d:<counter key>` a sorted set of distinct members by last sighting, trimmed to the window and
 *   to MAX_DISTINCT_MEMBERS;
 * - `h:<user key>` a sorted set of history events by time (`<kind>|<event id>|<device key>`);
 * - `cursor` how far the Log API follower has read; `lease` who follows; `checkpoint` its checkpoint.
 */

const SLOTS = COUNTER_BUCKETS + 1;

// ARGV: now, then per op: key, bucketWidth, windowMs, member ('' for a count).
const READ_COUNTERS = `
local P, now = KEYS[1], tonumber(ARGV[1])
local out = {}
local i = 2
while i <= #ARGV do
  local key, width, window, member = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), ARGV[i + 3]
  i = i + 4
  if member == '' then
    local bucket = math.floor(now / width)
    local sum = 0
    local flat = redis.call('HGETALL', P .. 'c:' .. key)
    for j = 2, #flat, 2 do
      local sep = string.find(flat[j], ':', 1, true)
      local stamp = tonumber(string.sub(flat[j], 1, sep - 1))
      if bucket - stamp < ${SLOTS} then sum = sum + tonumber(string.sub(flat[j], sep + 1)) end
    end
    out[#out + 1] = sum
    out[#out + 1] = 0
  else
    local z = P .. 'd:' .. key
    out[#out + 1] = redis.call('ZCOUNT', z, now - window, '+inf')
    local at = redis.call('ZSCORE', z, member)
    out[#out + 1] = (at and tonumber(at) >= now - window) and 1 or 0
  end
end
return out
`;

const RECORD_COUNTERS = `
local P, now = KEYS[1], tonumber(ARGV[1])
local i = 2
while i <= #ARGV do
  local key, width, window, member = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), ARGV[i + 3]
  i = i + 4
  if member == '' then
    local h = P .. 'c:' .. key
    local bucket = math.floor(now / width)
    local slot = tostring(bucket % ${SLOTS})
    local current = redis.call('HGET', h, slot)
    local count = 1
    if current then
      local sep = string.find(current, ':', 1, true)
      if tonumber(string.sub(current, 1, sep - 1)) == bucket then count = tonumber(string.sub(current, sep + 1)) + 1 end
    end
    redis.call('HSET', h, slot, bucket .. ':' .. count)
    redis.call('PEXPIRE', h, window + width)
  else
    local z = P .. 'd:' .. key
    redis.call('ZADD', z, now, member)
    redis.call('ZREMRANGEBYSCORE', z, '-inf', '(' .. (now - window))
    local card = redis.call('ZCARD', z)
    if card > ${MAX_DISTINCT_MEMBERS} then redis.call('ZREMRANGEBYRANK', z, 0, card - ${MAX_DISTINCT_MEMBERS} - 1) end
    redis.call('PEXPIRE', z, window)
  end
end
return 1
`;

// ARGV: cursor, then per event: userKey, member, atMs.
const RECORD_HISTORY = `
local P, cursor = KEYS[1], tonumber(ARGV[1])
local touched = {}
local i = 2
while i <= #ARGV do
  local h = P .. 'h:' .. ARGV[i]
  redis.call('ZADD', h, 'NX', tonumber(ARGV[i + 2]), ARGV[i + 1])
  touched[h] = true
  i = i + 3
end
for h, _ in pairs(touched) do
  redis.call('ZREMRANGEBYSCORE', h, '-inf', '(' .. (cursor - ${HISTORY_RETENTION_MS}))
  local card = redis.call('ZCARD', h)
  if card > ${HISTORY_MAX_EVENTS_PER_USER} then redis.call('ZREMRANGEBYRANK', h, 0, card - ${HISTORY_MAX_EVENTS_PER_USER} - 1) end
  redis.call('PEXPIRE', h, ${HISTORY_RETENTION_MS + 3_600_000})
end
local previous = tonumber(redis.call('GET', P .. 'cursor') or '0')
if cursor > previous then redis.call('SET', P .. 'cursor', cursor) end
return 1
`;

const READ_HISTORY = `
local P, now = KEYS[1], tonumber(ARGV[2])
local events = redis.call('ZRANGEBYSCORE', P .. 'h:' .. ARGV[1], now - ${HISTORY_RETENTION_MS}, '+inf', 'WITHSCORES')
return { redis.call('GET', P .. 'cursor') or '', events }
`;

const HOLD_LEASE = `
local k = KEYS[1] .. 'lease'
local owner, ttl = ARGV[1], tonumber(ARGV[2])
local holder = redis.call('GET', k)
if holder == owner then
  redis.call('PEXPIRE', k, ttl)
  return 1
end
if holder then return 0 end
redis.call('SET', k, owner, 'PX', ttl)
return 1
`;

export interface RedisFeatureStoreOptions {
  url: string;
  /** Key prefix. Default `riskgate:{features}:`. */
  prefix?: string;
  /** Connect timeout, milliseconds. Default 2000. */
  timeoutMs?: number;
  /**
   * Timeout of one operation, milliseconds, enforced even when the server holds the connection and
   * never answers (src/store/store-deadline.ts). Default 2000. A decision stops waiting at the
   * policy's own `timeoutMs` (50 by default); this bounds the counting after the answer and the
   * Log API follower's writes, which a busy machine can make slow without the server being lost.
   */
  commandTimeoutMs?: number;
}

function opArgs(ops: readonly CounterOp[], nowMs: number): (string | number)[] {
  const args: (string | number)[] = [nowMs];
  for (const op of ops) args.push(op.key, bucketWidthMs(op.windowMs), op.windowMs, op.member ?? '');
  return args;
}

export class RedisFeatureStore implements FeatureStore {
  readonly kind = 'redis';
  readonly durable = true;
  readonly followerCheckpoint: CheckpointStore;
  readonly #client: RedisClientType;
  readonly #prefix: string;
  readonly #scripts: RedisScripts;
  readonly #commandTimeoutMs: number;

  private constructor(client: RedisClientType, prefix: string, commandTimeoutMs: number) {
    this.#client = client;
    this.#prefix = prefix;
    this.#commandTimeoutMs = commandTimeoutMs;
    this.#scripts = new RedisScripts(client, commandTimeoutMs);
    const key = `${prefix}checkpoint`;
    this.followerCheckpoint = {
      load: async () => {
        const text = await this.#bounded(client.get(key), 'checkpoint load');
        if (text === null) return undefined;
        return logCheckpointSchema.parse(JSON.parse(text)) satisfies LogCheckpoint;
      },
      save: async (checkpoint) => {
        await this.#bounded(client.set(key, JSON.stringify(checkpoint)), 'checkpoint save');
      },
    };
  }

  /**
   * A plain command under the store's deadline, as the scripts are: node-redis's own timeout ends
   * once the command is written, so a stopped server held the Log API follower's cursor read (and
   * with it the follower) until it came back.
   */
  #bounded<T>(work: Promise<T>, what: string): Promise<T> {
    return withDeadline(work, this.#commandTimeoutMs, `redis ${what}`);
  }

  /** Connects (bounded by `timeoutMs`); rejects with the reason when the server cannot be reached. */
  static async connect(options: RedisFeatureStoreOptions): Promise<RedisFeatureStore> {
    const commandTimeoutMs = options.commandTimeoutMs ?? 2000;
    const client = await connectRedis({
      url: options.url,
      purpose: 'the Redis feature store',
      ...(options.timeoutMs !== undefined && { timeoutMs: options.timeoutMs }),
      commandTimeoutMs,
    });
    return new RedisFeatureStore(client, options.prefix ?? 'riskgate:{features}:', commandTimeoutMs);
  }

  #run(name: string, text: string, args: (string | number)[]): Promise<unknown> {
    return this.#scripts.run(name, text, [this.#prefix], args);
  }

  async readCounters(ops: readonly CounterOp[], nowMs: number): Promise<CounterReadings> {
    const flat = (await this.#run('readCounters', READ_COUNTERS, opArgs(ops, nowMs))) as number[];
    const counts: number[] = [];
    const seen: boolean[] = [];
    for (let i = 0; i < flat.length; i += 2) {
      counts.push(Number(flat[i]));
      seen.push(Number(flat[i + 1]) === 1);
    }
    return { counts, seen };
  }

  async recordCounters(ops: readonly CounterOp[], nowMs: number): Promise<void> {
    await this.#run('recordCounters', RECORD_COUNTERS, opArgs(ops, nowMs));
  }

  async recordHistory(events: readonly HistoryEvent[], cursorMs: number): Promise<void> {
    // Bounded script size: a window of thousands of events goes in slices.
    const SLICE = 500;
    for (let from = 0; from < Math.max(events.length, 1); from += SLICE) {
      const args: (string | number)[] = [cursorMs];
      for (const e of events.slice(from, from + SLICE))
        args.push(e.userKey, `${e.kind}|${e.eventId}|${e.deviceKey ?? ''}`, e.atMs);
      await this.#run('recordHistory', RECORD_HISTORY, args);
    }
  }

  async readHistory(userKey: string, nowMs: number): Promise<HistoryReading> {
    const [cursor, flat] = (await this.#run('readHistory', READ_HISTORY, [userKey, nowMs])) as [
      string,
      string[],
    ];
    const events: HistoryEvent[] = [];
    for (let i = 0; i < flat.length; i += 2) {
      // `<kind>|<event id>|<device key>`: the id may hold a `|`, the other two never do.
      const member = flat[i]!;
      const first = member.indexOf('|');
      const last = member.lastIndexOf('|');
      const deviceKey = member.slice(last + 1);
      events.push({
        userKey,
        kind: member.slice(0, first) as HistoryKind,
        eventId: member.slice(first + 1, last),
        atMs: Number(flat[i + 1]),
        ...(deviceKey !== '' && { deviceKey }),
      });
    }
    return { events, cursorMs: cursor === '' ? undefined : Number(cursor) };
  }

  async holdFollowerLease(owner: string, ttlMs: number): Promise<boolean> {
    return (await this.#run('holdLease', HOLD_LEASE, [owner, ttlMs])) === 1;
  }

  async followerCursor(): Promise<number | undefined> {
    const cursor = await this.#bounded(this.#client.get(`${this.#prefix}cursor`), 'cursor read');
    return cursor === null ? undefined : Number(cursor);
  }

  /** Closes within the command deadline: a stopped server never answers QUIT, so then the socket is dropped. */
  async close(): Promise<void> {
    await this.#bounded(this.#client.close(), 'close').catch(() => this.#client.destroy());
  }
}
