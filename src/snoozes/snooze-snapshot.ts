import { type Cidr, cidrContains, type IpWords, parseCidr, parseIp } from '../net/ip-cidr.ts';
import type { PolicyRequest } from '../policy-input/policy-request.ts';
import type { SnoozedRule, SnoozeEntity, SnoozeLookup } from '../policy-input/rule-snooze.ts';

/**
 * The active rule snoozes as one process holds them: what a decision reads, never waiting on the
 * database. By rule first, so a rule nobody snoozed costs one map read; then ids exactly (account,
 * user, unit) and IP snoozes as networks, checked in turn (a rule rarely has more than a few).
 * Expiry is checked at lookup: a snooze stops at its `until`, not at the next refresh.
 */

/** One active snooze as the snapshot is built from it (src/snoozes/snooze-store.ts). */
export interface SnoozeRow {
  id: string;
  ruleId: string;
  entity: SnoozeEntity;
  /** Canonical (src/lists/list-values.ts): a CIDR for `ip`. */
  value: string;
  untilMs: number;
}

interface Held {
  untilMs: number;
  match: SnoozedRule;
}

class RuleSnoozes {
  /** `<entity>\u0000<value>` → the snoozes of that entity (several: the latest `until` answers). */
  readonly exact = new Map<string, Held[]>();
  readonly networks: { cidr: Cidr; held: Held }[] = [];

  add(row: SnoozeRow): void {
    const held: Held = {
      untilMs: row.untilMs,
      match: Object.freeze({
        id: row.ruleId,
        snoozeId: row.id,
        entity: row.entity,
        value: row.value,
        until: new Date(row.untilMs).toISOString(),
      }),
    };
    if (row.entity === 'ip') {
      const cidr = parseCidr(
        row.value.includes('/') ? row.value : `${row.value}/${row.value.includes(':') ? 128 : 32}`,
      );
      if (cidr !== null) this.networks.push({ cidr, held });
      return;
    }
    const key = `${row.entity}\u0000${row.value}`;
    const list = this.exact.get(key);
    if (list === undefined) this.exact.set(key, [held]);
    else list.push(held);
  }

  match(request: PolicyRequest, nowMs: number): SnoozedRule | undefined {
    let best: Held | undefined;
    const consider = (held: Held) => {
      if (held.untilMs > nowMs && (best === undefined || held.untilMs > best.untilMs)) best = held;
    };
    if (this.exact.size > 0) {
      for (const [entity, value] of [
        ['accountId', request.accountId],
        ['userId', request.userId],
        ['unitId', request.unitId],
      ] as const) {
        if (value === undefined) continue;
        const list = this.exact.get(`${entity}\u0000${value}`);
        if (list !== undefined) for (const held of list) consider(held);
      }
    }
    if (this.networks.length > 0 && request.ip !== undefined) {
      const ip: IpWords | null = parseIp(request.ip);
      if (ip !== null) for (const n of this.networks) if (cidrContains(n.cidr, ip)) consider(n.held);
    }
    return best?.match;
  }
}

/** An immutable snapshot of the active snoozes (a refresh builds a new one). */
export class SnoozeSnapshot implements SnoozeLookup {
  readonly #rules = new Map<string, RuleSnoozes>();
  /** Snoozes held (expired ones included until the next refresh). */
  readonly size: number;

  constructor(rows: Iterable<SnoozeRow>) {
    let size = 0;
    for (const row of rows) {
      let rule = this.#rules.get(row.ruleId);
      if (rule === undefined) {
        rule = new RuleSnoozes();
        this.#rules.set(row.ruleId, rule);
      }
      rule.add(row);
      size++;
    }
    this.size = size;
  }

  match(ruleId: string, request: PolicyRequest, nowMs: number): SnoozedRule | undefined {
    return this.#rules.get(ruleId)?.match(request, nowMs);
  }
}
