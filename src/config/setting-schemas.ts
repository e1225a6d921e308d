import { z } from 'zod';
import { parseTrustedProxies } from '../edge/client-address.ts';
import { OPERATOR_ROLES, type OperatorRole } from '../operators/operator.ts';
import { OPERATOR_NAME, parseOperatorKeyEntries } from '../operators/operator-keys.ts';
import { parseRedaction } from './redaction-rules.ts';

/**
 * The kinds of value a setting takes (src/config/settings.ts): each parses one environment variable
 * and, when the variable has a default, carries it once, for the parser and the documentation alike.
 * Messages follow the variable's name (`RISKGATE_PORT must be ...`); a value is echoed only by the
 * kinds no secret uses.
 */

/** A schema and the default it applies, as an env file would write it (undefined: none). */
export interface ValueKind<S extends z.ZodType = z.ZodType> {
  schema: S;
  default?: string;
}

/** A comment after a value in an env file becomes part of it under docker --env-file: refused, not parsed as a #fragment. */
export const NO_COMMENT =
  'must not contain spaces or a # (a comment after a value in an env file becomes part of the value)';

/** Unset or empty (a copied env file's `NAME=`) is undefined; anything else must pass `schema`. */
export const optional = <T extends z.ZodType>(schema: T) =>
  z.preprocess((v) => (v === '' ? undefined : v), schema.optional());

/**
 * A number, in plain words: unset means `fallback`; set but empty (`RISKGATE_PORT=` in an env
 * file) is an error rather than a silent 0; anything else must be a number within bounds. The value
 * is echoed in the message: no secret is numeric.
 */
export function numberSchema(options: { min: number; max: number; fallback: number; whole?: boolean }) {
  const whole = options.whole ?? true;
  const range = `${whole ? 'a whole number' : 'a number'} from ${options.min} to ${options.max}`;
  return z
    .string()
    .optional()
    .transform((raw, ctx) => {
      if (raw === undefined) return options.fallback;
      const text = raw.trim();
      if (text === '') {
        ctx.addIssue({
          code: 'custom',
          message: `is set but empty: unset it for the default (${options.fallback}), or give ${range}`,
        });
        return z.NEVER;
      }
      const value = Number(text);
      const shaped = whole ? /^\d+$/.test(text) : /^\d+(\.\d+)?$/.test(text);
      if (!shaped || value < options.min || value > options.max) {
        ctx.addIssue({ code: 'custom', message: `must be ${range}, not "${text.slice(0, 40)}"` });
        return z.NEVER;
      }
      return value;
    });
}

/** A number from `min` to `max` (whole unless said), `fallback` when unset. */
export const num = (options: { min: number; max: number; fallback: number; whole?: boolean }) => ({
  schema: numberSchema(options),
  default: String(options.fallback),
});

/** A listening port; 0 asks the system for a free one (tests). */
export const port = (fallback: number) => num({ min: 0, max: 65535, fallback });

/** One of `values`, `fallback` when unset. */
export const oneOf = <const V extends readonly [string, ...string[]]>(values: V, fallback: V[number]) => ({
  schema: z
    .enum(values, { error: `must be ${values.slice(0, -1).join(', ')} or ${values.at(-1)}` })
    .default(fallback as never),
  default: fallback,
});

export const nonEmpty = z.string().trim().min(1, 'must not be empty');

/** A non-empty text, `fallback` when unset. */
export const text = (fallback: string) => ({ schema: nonEmpty.default(fallback), default: fallback });

/** An http(s) URL, its trailing slashes dropped. */
export const httpUrl = z
  .string()
  .refine((u) => !/[\s#]/.test(u), NO_COMMENT)
  .pipe(z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }))
  .transform((u) => u.replace(/\/+$/, ''));

export const commaList = (s: string) =>
  s
    .split(',')
    .map((k) => k.trim())
    .filter((k) => k.length > 0);

/** A comma-separated list of `item`s, none empty. */
export const commaListOf = <T extends z.ZodType<unknown, string>>(item: T, none: string) =>
  z.string().transform(commaList).pipe(z.array(item).min(1, none));

/** A comma-separated list of bearer keys. */
export const keyList = commaListOf(
  z
    .string()
    .min(16, 'each key must be at least 16 characters')
    .refine((k) => !/[\s#]/.test(k), NO_COMMENT),
  'lists no key',
);

/** A text parsed by `parse`, which answers the value or a message saying what is wrong. */
export const parsedBy = <T>(parse: (text: string) => T | string) =>
  z.string().transform((text, ctx) => {
    const parsed = parse(text);
    if (typeof parsed === 'string') {
      ctx.addIssue({ code: 'custom', message: parsed });
      return z.NEVER;
    }
    return parsed;
  });

/**
 * `name:role:key` entries or plain keys (an `admin` named by its key id; src/operators/operator-keys.ts).
 * Kept as entries; every message names the operator, never the key.
 */
export const opsKeyList = parsedBy((text): string[] | string => {
  const entries = commaList(text);
  if (entries.length === 0) return 'lists no key';
  if (entries.some((k) => /[\s#]/.test(k))) return NO_COMMENT;
  const parsed = parseOperatorKeyEntries(entries);
  return typeof parsed === 'string' ? parsed : entries;
});

/** `identity:role,...` (an identity as the proxy sends it, an email). */
export const ssoOperators = parsedBy((text): Map<string, OperatorRole> | string => {
  const operators = new Map<string, OperatorRole>();
  for (const entry of commaList(text)) {
    const colon = entry.lastIndexOf(':');
    const identity = entry.slice(0, Math.max(colon, 0)).toLowerCase();
    const role = entry.slice(colon + 1);
    if (colon < 0 || !(OPERATOR_ROLES as readonly string[]).includes(role)) {
      return `entries are identity:role with a role of ${OPERATOR_ROLES.join(', ')} (not ${JSON.stringify(entry.slice(0, 80))})`;
    }
    if (operators.has(identity)) return `names ${identity} twice`;
    if (!OPERATOR_NAME.test(identity)) {
      return `names ${JSON.stringify(identity.slice(0, 80))}: an identity must be 1-64 letters, digits, ".", "_", "-" or "@"`;
    }
    operators.set(identity, role as OperatorRole);
  }
  return operators.size === 0 ? 'lists no operator' : operators;
});

/** IPs or CIDRs. */
export const trustedProxies = parsedBy((text) => {
  const proxies = parseTrustedProxies(commaList(text));
  return typeof proxies !== 'string' && proxies.length === 0 ? 'lists no address' : proxies;
});

/** Headers a proxy's identity must never be read from: riskgate or the proxy give them other meanings. */
const RESERVED_HEADERS = [
  'authorization',
  'cookie',
  'host',
  'x-forwarded-for',
  'content-type',
  'content-length',
];

/** A header name, lower case. */
export const identityHeader = z
  .string()
  .trim()
  .toLowerCase()
  .regex(/^[a-z0-9-]{1,100}$/, 'must be a header name (letters, digits and -), e.g. X-Forwarded-Email')
  .refine((h) => !RESERVED_HEADERS.includes(h), 'must not be a header riskgate or the proxy reads otherwise');

/** The decision log's redaction rules, `fallback` when unset. */
export const redaction = (fallback: string) => ({
  schema: z.string().default(fallback).pipe(parsedBy(parseRedaction)),
  default: fallback,
});
