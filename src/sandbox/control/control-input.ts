import type { Context } from 'hono';
import type { z } from 'zod';
import { invalidParameter, zodToVendorError } from '../vendor-api-errors.ts';

/**
 * Reads the JSON body of a `/sandbox/...` control route (empty means `{}`) and parses it with
 * `schema`. Throws a 400 VendorApiError naming the field, which the modules' error handler answers
 * as problem+json.
 */
export async function parseControlBody<T extends z.ZodType>(c: Context, schema: T): Promise<z.infer<T>> {
  const text = await c.req.text();
  let raw: unknown = {};
  if (text !== '') {
    try {
      raw = JSON.parse(text);
    } catch {
      throw invalidParameter('body', 'must be a JSON document');
    }
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) throw zodToVendorError(parsed.error);
  return parsed.data;
}
