import { hash } from 'node:crypto';
import type { PolicyRequest } from '../policy-input/policy-request.ts';
import type { Verdict } from '../policy-input/verdict.ts';
import type { CounterOp, CounterReadings } from './feature-store.ts';

/**
 * Velocity counters as a policy declares them (`velocity.counters` in the policy file), and how a
 * decision turns into counter reads before it is evaluated and counter updates after it is answered.
 *
 * Values a policy reads include the decision being made for `decisions` and `distinct` counters (a
 * login is one of the attempts: `accountsPerIp >= 20` means this is at least the 20th account), and
 * not for `denies` (its verdict is not known yet). Each decision is counted once, after it is
 * decided, so a request never counts itself twice.
 */

/** Request fields a counter can be keyed on or count distinct values of. */
export const COUNTER_REQUEST_FIELDS = [
  'accountId',
  'userId',
  'deviceId',
  'platform',
  'unitId',
  'sdkVersionId',
  'ip',
  'userAgent',
] as const;

/** `accountId`, `ip`, ..., or `context.<key>`. */
export type CounterField = (typeof COUNTER_REQUEST_FIELDS)[number] | `context.${string}`;

export type CounterCounts = 'decisions' | 'denies' | 'distinct';

export interface CompiledCounter {
  /** The name policies read (`velocity.<name>`). */
  name: string;
  /**
   * Store prefix: the name and a hash of the definition, so an edited counter (another key, window
   * or field) starts from zero rather than reading counts it did not define.
   */
  storeId: string;
  key: readonly CounterField[];
  counts: CounterCounts;
  /** For `distinct`: the field whose distinct values are counted. */
  of?: CounterField | undefined;
  windowMs: number;
}

/** `30s`, `10m`, `1h`, `24h` as milliseconds; undefined when malformed. */
export function parseWindow(text: string): number | undefined {
  const m = /^(\d{1,5})(s|m|h)$/.exec(text);
  if (!m) return undefined;
  const unit = m[2] === 's' ? 1000 : m[2] === 'm' ? 60_000 : 3_600_000;
  return Number(m[1]) * unit;
}

export function compileCounter(
  name: string,
  def: {
    key: readonly CounterField[];
    count: CounterCounts;
    of?: CounterField | undefined;
    windowMs: number;
  },
): CompiledCounter {
  const fingerprint = JSON.stringify([def.key, def.count, def.of ?? null, def.windowMs]);
  const storeId = `${name}.${hash('sha256', fingerprint, 'base64url').slice(0, 8)}`;
  return { name, storeId, key: def.key, counts: def.count, of: def.of, windowMs: def.windowMs };
}

function fieldValue(request: PolicyRequest, field: CounterField): string | undefined {
  if (field.startsWith('context.')) {
    const v = request.context[field.slice(8)];
    return v === undefined ? undefined : String(v);
  }
  const v = request[field as (typeof COUNTER_REQUEST_FIELDS)[number]];
  return v === undefined || v === '' ? undefined : v;
}

/** A short keyed-free hash: counters need spread, not secrecy; the store sees no clear identifier. */
function digest(text: string): string {
  return hash('sha256', text, 'base64url').slice(0, 22);
}

/** Digests of one request, each text hashed once (counters often share a key or a member). */
type DigestCache = Map<string, string>;

function cachedDigest(cache: DigestCache, text: string): string {
  let d = cache.get(text);
  if (d === undefined) {
    d = digest(text);
    cache.set(text, d);
  }
  return d;
}

/** The store key of `counter` for `request`; undefined when the request lacks a key field. */
function instanceKey(
  counter: CompiledCounter,
  request: PolicyRequest,
  cache: DigestCache,
): string | undefined {
  let joined = '';
  for (const f of counter.key) {
    const v = fieldValue(request, f);
    if (v === undefined) return undefined;
    // Length-prefixed: ("a:b", "c") and ("a", "b:c") never share a key.
    joined += `${v.length}:${v}|`;
  }
  return `${counter.storeId}:${cachedDigest(cache, joined)}`;
}

/** The counters of one decision: which to read, and which apply to the request at all. */
export interface CounterPlan {
  counters: readonly CompiledCounter[];
  /** Per counter: its op, or undefined when the request lacks a key field (the value reads 0). */
  ops: (CounterOp | undefined)[];
}

export function planCounters(counters: readonly CompiledCounter[], request: PolicyRequest): CounterPlan {
  const ops: (CounterOp | undefined)[] = [];
  const cache: DigestCache = new Map();
  for (const c of counters) {
    const key = instanceKey(c, request, cache);
    if (key === undefined) {
      ops.push(undefined);
      continue;
    }
    let member: string | undefined;
    if (c.counts === 'distinct') {
      const v = fieldValue(request, c.of!);
      if (v === undefined) {
        ops.push(undefined);
        continue;
      }
      // Members are told apart from keys by their prefix (a key text always holds a `|`).
      member = cachedDigest(cache, `=${v}`);
    }
    ops.push({ key, windowMs: c.windowMs, member });
  }
  return { counters, ops };
}

/** The ops to read in one round trip (requests lacking a key field are not read). */
export function readOps(plan: CounterPlan): CounterOp[] {
  return plan.ops.filter((o): o is CounterOp => o !== undefined);
}

/** The values policies see (`velocity.<name>`), this decision included where it counts. */
export function counterValues(plan: CounterPlan, readings: CounterReadings): Record<string, number> {
  const values: Record<string, number> = {};
  let r = 0;
  for (let i = 0; i < plan.counters.length; i++) {
    const c = plan.counters[i]!;
    const op = plan.ops[i];
    if (op === undefined) {
      values[c.name] = 0;
      continue;
    }
    const count = readings.counts[r]!;
    const seen = readings.seen[r]!;
    r++;
    values[c.name] =
      c.counts === 'denies' ? count : c.counts === 'decisions' ? count + 1 : seen ? count : count + 1;
  }
  return values;
}

/** The updates of a decided request: every counter it applies to, `denies` ones only on a deny. */
export function recordOps(plan: CounterPlan, verdict: Verdict): CounterOp[] {
  const out: CounterOp[] = [];
  for (let i = 0; i < plan.counters.length; i++) {
    const op = plan.ops[i];
    if (op === undefined) continue;
    if (plan.counters[i]!.counts === 'denies' && verdict !== 'deny') continue;
    out.push(op);
  }
  return out;
}
