import { OPERATOR_ROLES, type OperatorRole } from './operator.ts';

/**
 * Operator key entries (RISKGATE_OPS_KEYS, comma-separated): `name:role:key` names the person and
 * their role; a plain `key` (the form before roles existed) is an `admin` named by its key id, so
 * a deployment that set keys before keeps its rights. The entries travel as configured (strings)
 * and are parsed where a keyring is built (src/edge/caller-auth.ts) and where the configuration is
 * checked (src/config/riskgate-config.ts), by this one parser.
 */

/** An operator's name: letters, digits, `.`, `_`, `-`, `@`; 1-64 characters (src/operators/operator.ts). */
export const OPERATOR_NAME = /^[A-Za-z0-9._@-]{1,64}$/;

/** Shortest operator key, as for caller keys. */
export const MIN_OPERATOR_KEY_LENGTH = 16;

/** One parsed entry: `name` is undefined for a plain key (the keyring names it by its key id). */
export interface OperatorKeyEntry {
  name: string | undefined;
  role: OperatorRole;
  key: string;
}

// `name:role:key` only when the middle part is a role: a plain key holding colons stays a plain key.
const NAMED = new RegExp(`^([^:]*):(${OPERATOR_ROLES.join('|')}):(.*)$`);

/**
 * Parses one entry; a string saying what is wrong (never echoing the key) when it is malformed.
 */
export function parseOperatorKeyEntry(entry: string): OperatorKeyEntry | string {
  const named = NAMED.exec(entry);
  const parsed: OperatorKeyEntry =
    named === null
      ? { name: undefined, role: 'admin', key: entry }
      : { name: named[1]!, role: named[2] as OperatorRole, key: named[3]! };
  if (parsed.name !== undefined && !OPERATOR_NAME.test(parsed.name)) {
    return `an operator name must be 1-64 letters, digits, ".", "_", "-" or "@" (entry name:role:key, ${JSON.stringify(parsed.name.slice(0, 64))})`;
  }
  if (parsed.key.length < MIN_OPERATOR_KEY_LENGTH) {
    return parsed.name === undefined
      ? `each key must be at least ${MIN_OPERATOR_KEY_LENGTH} characters`
      : `each key must be at least ${MIN_OPERATOR_KEY_LENGTH} characters (the key of operator ${parsed.name})`;
  }
  return parsed;
}

/**
 * Parses every entry and checks them together: names unique, no key given twice. A string saying
 * what is wrong with the first bad one (never a key).
 */
export function parseOperatorKeyEntries(entries: readonly string[]): OperatorKeyEntry[] | string {
  const parsed: OperatorKeyEntry[] = [];
  const names = new Set<string>();
  const keys = new Set<string>();
  for (const entry of entries) {
    const one = parseOperatorKeyEntry(entry);
    if (typeof one === 'string') return one;
    if (one.name !== undefined) {
      if (names.has(one.name)) return `names operator ${one.name} twice: each name must be unique`;
      names.add(one.name);
    }
    if (keys.has(one.key)) {
      return `gives one key twice${one.name === undefined ? '' : ` (the second time for operator ${one.name})`}: each operator needs a key of their own`;
    }
    keys.add(one.key);
    parsed.push(one);
  }
  return parsed;
}
