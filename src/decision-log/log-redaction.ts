import { createHmac } from 'node:crypto';
import { isIPv4, isIPv6 } from 'node:net';
import type { RedactionMode, RedactionRule } from '../config/redaction-rules.ts';

/**
 * Redaction of decision log lines (RISKGATE_DECISION_LOG_REDACT): a list of `path:mode` entries.
 * A path is dotted over the line (`request.ip`, `inputs.user.username`, `request.context`); an
 * array met on the way applies the rest to each element (`inputs.devices.display_name`). Modes:
 * - `drop`: the field is left out;
 * - `hash`: HMAC-SHA256 under RISKGATE_DECISION_LOG_HASH_KEY, `hmac:` and 16 hex digits, so lines
 *   about the same person still correlate but a dictionary of usernames does not reverse them;
 * - `truncate`: an IP address keeps its network (IPv4 /24, IPv6 /48); anything else is dropped.
 * Redaction copies what it changes: the objects the decision used are never touched. Its copy is
 * for JSON: a dropped field is undefined there, which JSON leaves out.
 */

/** IPv4 to its /24, IPv6 to its /48; undefined for a non-IP. */
export function truncateIp(value: string): string | undefined {
  if (isIPv4(value)) return `${value.split('.').slice(0, 3).join('.')}.0/24`;
  if (isIPv6(value)) {
    // Expand `::` so the first three groups are the /48.
    const [head = '', tail] = value.split('::');
    const h = head === '' ? [] : head.split(':');
    const groups =
      tail === undefined
        ? h
        : [...h, ...Array(8 - h.length - tail.split(':').filter(Boolean).length).fill('0')];
    return `${groups
      .slice(0, 3)
      .concat(Array(Math.max(0, 3 - groups.length)).fill('0'))
      .map((g) => g.toLowerCase().replace(/^0+(?=.)/, ''))
      .join(':')}::/48`;
  }
  return undefined;
}

/**
 * The `hash` mode's value: `hmac:` and the first 16 hex digits of HMAC-SHA256 under `hashKey`
 * (a non-string is hashed as its JSON). Span URLs use it too, so they correlate with log lines.
 */
export function hashForLog(value: unknown, hashKey: string | undefined): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return `hmac:${createHmac('sha256', hashKey ?? '')
    .update(text)
    .digest('hex')
    .slice(0, 16)}`;
}

/** A function applying `rules` to a log line (a copy where anything changed); identity for none. */
export function createRedactor(
  rules: readonly RedactionRule[],
  hashKey: string | undefined,
): (line: object) => object {
  if (rules.length === 0) return (line) => line;
  const hash = (value: unknown) => hashForLog(value, hashKey);
  const apply = (value: unknown, mode: RedactionMode): unknown => {
    if (mode === 'hash') return hash(value);
    if (mode === 'truncate' && typeof value === 'string') return truncateIp(value);
    return undefined;
  };
  const redactAt = (node: unknown, path: readonly string[], mode: RedactionMode): unknown => {
    if (Array.isArray(node)) {
      let changed = false;
      const out = node.map((el) => {
        const r = redactAt(el, path, mode);
        if (r !== el) changed = true;
        return r;
      });
      return changed ? out : node;
    }
    if (node === null || typeof node !== 'object') return node;
    const [key, ...rest] = path as [string, ...string[]];
    if (!Object.hasOwn(node, key)) return node;
    const current = (node as Record<string, unknown>)[key];
    const copy: Record<string, unknown> = { ...(node as Record<string, unknown>) };
    if (rest.length === 0) {
      if (current === undefined) return node;
      // Dropped: undefined, which JSON leaves out as it does a missing member (the copy is only
      // ever serialised: the log's line, the store's). Not `delete`: that turns the copy into a
      // dictionary-mode object, which JSON.stringify serialises at half the speed (issue 32: the
      // default drops each device's and the user's display_name on every decision).
      copy[key] = apply(current, mode);
      return copy;
    }
    const inner = redactAt(current, rest, mode);
    if (inner === current) return node;
    copy[key] = inner;
    return copy;
  };
  return (line) => {
    let out: unknown = line;
    for (const r of rules) out = redactAt(out, r.path, r.mode);
    return out as object;
  };
}
