import { z } from 'zod';
import { parseIso8601Ns } from '../timing/rfc3339.ts';

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

/**
 * `created_at` as nanoseconds since the epoch, exact at any precision; `undefined` when it is not
 * ISO 8601 or not a real date and time. No offset means UTC (as the API reads its own query parameters).
 */
export function createdAtNs(value: string): bigint | undefined {
  return parseIso8601Ns(value);
}
