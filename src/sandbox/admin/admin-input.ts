import { z } from 'zod';
import { DEVICE_TYPES, FACTORS, USER_STATUSES } from '../../admin/admin-schemas.ts';
import { invalidParameter, zodToVendorError } from '../vendor-api-errors.ts';

/**
 * Request input of the emulated Admin API: body decoding, query parameter rules, the input
 * restrictions of docs/vendor-api.md#admin-resources. Each failure is 400 / 40000, `detail` naming the field.
 */

/** docs/vendor-api.md#admin-resources (input restrictions): username. */
export const USERNAME_PATTERN = /^[A-Za-z0-9._\-=@#$+]{1,100}$/;
/** display_name: spaces, Unicode letters, Unicode punctuation, digits, `= @ # $ +`; ≤ 100 characters. */
export const DISPLAY_NAME_PATTERN = /^[ \p{L}\p{P}0-9=@#$+]{0,100}$/u;
/** Device display_name: spaces, Unicode letters, digits, `- + / . ( )`. */
export const DEVICE_DISPLAY_NAME_PATTERN = /^[ \p{L}0-9\-+/.()]{1,100}$/u;
/** International phone number (E.164). */
export const PHONE_NUMBER_PATTERN = /^\+[1-9]\d{6,14}$/;

export const usernameSchema = z
  .string()
  .regex(USERNAME_PATTERN, 'max 100 characters: letters, digits and . _ - = @ # $ + (no spaces)');
export const displayNameSchema = z
  .string()
  .regex(DISPLAY_NAME_PATTERN, 'max 100 characters: letters, punctuation, digits, spaces and = @ # $ +');
export const deviceDisplayNameSchema = z
  .string()
  .regex(DEVICE_DISPLAY_NAME_PATTERN, 'letters, digits, spaces and - + / . ( ) only');
export const factorSchema = z.enum(FACTORS);
const int = (min: number, max: number) => z.number().int().min(min).max(max);

/** Body of PUT /users/{id}. */
export const putUserSchema = z
  .object({
    allowed_factors: z.array(factorSchema).optional(),
    status: z.enum(['enabled', 'bypass', 'locked_out', 'disabled']).optional(),
    username: usernameSchema.optional(),
    display_name: displayNameSchema.optional(),
    max_attempts: int(5, 40).optional(),
  })
  .strict();

/** Fields shared by every enrollment body (POST /users, POST /users/{id}/devices, POST /devices). */
const enrollmentFields = {
  valid_secs: int(60, 7_776_000).optional(),
  short_code: z.boolean().optional(),
  success_callback_url: z.string().optional(),
  enrollment_flow_binding_enabled: z.boolean().optional(),
  account_recovery_flow_binding_enabled: z.boolean().optional(),
  fido: z.literal(true).optional(),
  attestation_preference: z.string().optional(),
  authenticator_selection: z.record(z.string(), z.unknown()).optional(),
  hwtoken_id: z.string().optional(),
  hwtoken_passcode: z.string().optional(),
  phone_number: z.string().optional(),
};

export const postUserSchema = z
  .object({
    username: usernameSchema.optional(),
    display_name: displayNameSchema.optional(),
    ...enrollmentFields,
  })
  .strict();
export const postUserDeviceSchema = z.object(enrollmentFields).strict();
export const postDeviceSchema = z.object({ user_id: z.string().min(1), ...enrollmentFields }).strict();
export type EnrollmentBody = z.infer<typeof postUserDeviceSchema>;

export const putDeviceSchema = z.object({ display_name: deviceDisplayNameSchema.optional() }).strict();

export const putInfoSchema = z
  .object({
    accounts_migration_callback_url: z.string().optional(),
    session_timeout: int(30, 120).optional(),
  })
  .strict();

export const postLogoSchema = z.object({ logo: z.string().min(1) }).strict();

export const postBackupCodesSchema = z
  .object({
    count: int(1, 10).optional(),
    length: int(8, 20).optional(),
    reuse_count: z.number().int().min(0).optional(),
  })
  .strict();

export const postOneTimeCodeSchema = z
  .object({ length: int(4, 20).optional(), valid_secs: int(60, 604_800).optional() })
  .strict();

/** Parses a validated body with `schema`. */
export function parseBody<T extends z.ZodType>(schema: T, body: Record<string, unknown>): z.infer<T> {
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw zodToVendorError(parsed.error);
  return parsed.data;
}

/**
 * Decodes a POST/PUT body: empty means `{}`; otherwise Content-Type must be application/json and
 * the JSON a plain object.
 */
export function decodeJsonObject(
  bytes: Uint8Array,
  contentType: string | undefined,
): Record<string, unknown> {
  if (bytes.length === 0) return {};
  if (!contentType || !/^application\/json\b/i.test(contentType.trim())) {
    throw invalidParameter('Content-Type', 'must be application/json');
  }
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch {
    throw invalidParameter('body', 'not valid JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw invalidParameter('body', 'must be a JSON object');
  }
  return value as Record<string, unknown>;
}

/** Query parameters of a request. A name given twice is a 400 naming it (no silent first-wins). */
export class QueryParams {
  readonly #values = new Map<string, string>();
  constructor(pairs: readonly (readonly [string, string])[]) {
    for (const [k, v] of pairs) {
      if (this.#values.has(k)) throw invalidParameter(k, 'must be given once');
      this.#values.set(k, v);
    }
  }

  has(name: string): boolean {
    return this.#values.has(name);
  }

  string(name: string): string | undefined {
    return this.#values.get(name);
  }

  /** An integer in [min, max]; `def` when absent. */
  int(name: string, min: number, max: number, def: number): number;
  int(name: string, min: number, max: number): number | undefined;
  int(name: string, min: number, max: number, def?: number): number | undefined {
    const raw = this.#values.get(name);
    if (raw === undefined) return def;
    if (!/^-?\d+$/.test(raw)) throw invalidParameter(name, 'must be an integer');
    const n = Number(raw);
    if (n < min || n > max) throw invalidParameter(name, `must be between ${min} and ${max}`);
    return n;
  }

  bool(name: string): boolean | undefined {
    const raw = this.#values.get(name);
    if (raw === undefined) return undefined;
    if (raw === 'true') return true;
    if (raw === 'false') return false;
    throw invalidParameter(name, 'must be true or false');
  }

  /** One of `allowed`; `def` when absent. */
  oneOf<T extends string>(name: string, allowed: readonly T[], def: T): T;
  oneOf<T extends string>(name: string, allowed: readonly T[]): T | undefined;
  oneOf<T extends string>(name: string, allowed: readonly T[], def?: T): T | undefined {
    const raw = this.#values.get(name);
    if (raw === undefined) return def;
    if (!(allowed as readonly string[]).includes(raw)) {
      throw invalidParameter(name, `must be one of ${allowed.join(', ')}`);
    }
    return raw as T;
  }

  /** A comma-separated list whose items are all in `allowed`. */
  list<T extends string>(name: string, allowed: readonly T[]): T[] | undefined {
    const raw = this.#values.get(name);
    if (raw === undefined) return undefined;
    const items = raw
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
    for (const item of items) {
      if (!(allowed as readonly string[]).includes(item)) {
        throw invalidParameter(name, `'${item}' is not one of ${allowed.join(', ')}`);
      }
    }
    return items as T[];
  }
}

export const DEVICE_STATUSES = ['enrolled', 'unenrolled', 'archived'] as const;
export type DeviceStatus = (typeof DEVICE_STATUSES)[number];
export { DEVICE_TYPES, FACTORS, USER_STATUSES };

/**
 * Callback URLs must be https, an FQDN (no IP address) and port 443. With `allowInsecure` the sandbox
 * also accepts http(s) to 127.0.0.1 / localhost / [::1] on any port so local tests can receive them.
 */
export function checkCallbackUrl(field: string, raw: string, allowInsecure: boolean): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalidParameter(field, 'not a valid URL');
  }
  const host = url.hostname;
  const isLoopback = host === '127.0.0.1' || host === 'localhost' || host === '[::1]';
  if (allowInsecure && isLoopback && (url.protocol === 'http:' || url.protocol === 'https:')) return raw;
  if (url.protocol !== 'https:') throw invalidParameter(field, 'must be an https URL');
  const isIp = /^\d{1,3}(\.\d{1,3}){3}$/.test(host) || host.startsWith('[');
  if (isIp || !host.includes('.')) throw invalidParameter(field, 'must use a fully qualified domain name');
  if (url.port !== '' && url.port !== '443') throw invalidParameter(field, 'must use port 443');
  return raw;
}
