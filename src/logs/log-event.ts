import { z } from 'zod';

/**
 * A Log API event (docs/vendor-api.md#log-events): the common fields are checked, the per-kind ones kept
 * as they came. `created_at` is ISO 8601 with second or nanosecond precision.
 */
export const logEventSchema = z.looseObject({
  created_at: z.string().min(1),
  type: z.string().min(1),
  event_id: z.string().min(1),
  client_ip_address: z.string().optional(),
  client_port: z.string().optional(),
  service_id: z.string().optional(),
  organization_id: z.string().optional(),
});
export type LogEvent = z.infer<typeof logEventSchema>;

const ISO = /^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|z|[+-]\d{2}:?\d{2})?$/;

/**
 * `created_at` as nanoseconds since the epoch, exact at any precision; `undefined` when it is not
 * ISO 8601. No offset means UTC (as the API reads its own query parameters).
 */
export function createdAtNs(value: string): bigint | undefined {
  const m = ISO.exec(value);
  if (!m) return undefined;
  let zone = m[4] ?? 'Z';
  if (zone === 'z') zone = 'Z';
  else if (zone !== 'Z' && zone.length === 5) zone = `${zone.slice(0, 3)}:${zone.slice(3)}`;
  const ms = Date.parse(`${m[1]}T${m[2]}${zone}`);
  if (Number.isNaN(ms)) return undefined;
  return BigInt(ms) * 1_000_000n + BigInt((m[3] ?? '').padEnd(9, '0'));
}
