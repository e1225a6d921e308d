import type { Kysely } from 'kysely';
import type { FeatureMigrations, RiskgateDatabase } from '../database/database.ts';

/**
 * The "was this you?" links' table, the same on SQLite and PostgreSQL (control state: the system
 * of record, src/database/database.ts). One row per link, keyed by the SHA-256 of the token's id
 * (src/ask-user/ask-user-token.ts: the table alone gives no working link). What the link asks
 * about (decision, account, user) and what a "no" does (`on_no`, as the policy said when it
 * asked) are here, never in the token. Answered once: `answered_ms` and `answer` are set by the
 * one UPDATE that finds them null and the link unexpired, so two answers at once give one winner.
 * Times are epoch milliseconds.
 */

// Types, not interfaces: kysely's withTables wants an index signature.
export type AskUserTables = {
  ask_user_link: {
    token_key: string;
    decision_id: string;
    account_id: string;
    user_id: string;
    verdict: string;
    /** JSON: the {@link OnNoAction}s a "no" takes. */
    on_no: string;
    created_ms: number;
    expires_ms: number;
    answered_ms: number | null;
    answer: string | null;
  };
};

export const askUserMigrations: FeatureMigrations = {
  'ask-user-001-links': {
    async up(db) {
      await db.schema
        .createTable('ask_user_link')
        .ifNotExists()
        .addColumn('token_key', 'text', (c) => c.primaryKey())
        .addColumn('decision_id', 'text', (c) => c.notNull())
        .addColumn('account_id', 'text', (c) => c.notNull())
        .addColumn('user_id', 'text', (c) => c.notNull())
        .addColumn('verdict', 'text', (c) => c.notNull())
        .addColumn('on_no', 'text', (c) => c.notNull())
        .addColumn('created_ms', 'bigint', (c) => c.notNull())
        .addColumn('expires_ms', 'bigint', (c) => c.notNull())
        .addColumn('answered_ms', 'bigint')
        .addColumn('answer', 'text')
        .execute();
    },
  },
  // The pruning's reads (src/ask-user/ask-user-pruning.ts): the links past their expiry, oldest first.
  'ask-user-002-expiry-index': {
    async up(db) {
      await db.schema
        .createIndex('ask_user_link_expiry')
        .ifNotExists()
        .on('ask_user_link')
        .column('expires_ms')
        .execute();
    },
  },
};

/** A lock-out a "no" takes: the policy's `lock_out_user` action as it stood when it asked. */
export interface OnNoAction {
  name: string;
  durationMs?: number | undefined;
  escalateWithinMs?: number | undefined;
}

export type AskUserAnswer = 'yes' | 'no';

export interface AskUserLink {
  tokenKey: string;
  decisionId: string;
  accountId: string;
  userId: string;
  verdict: string;
  onNo: readonly OnNoAction[];
  createdMs: number;
  expiresMs: number;
  answeredMs: number | null;
  answer: AskUserAnswer | null;
}

/** What a token's row says at a moment: answerable, or why not. */
export type LinkState =
  | { state: 'open'; link: AskUserLink }
  | { state: 'used' | 'expired'; link: AskUserLink }
  | { state: 'unknown' };

/** The links' queries, written once for both engines. */
export class AskUserStore {
  readonly #db: Kysely<AskUserTables>;

  constructor(database: RiskgateDatabase) {
    this.#db = database.db.withTables<AskUserTables>();
  }

  async add(link: AskUserLink): Promise<void> {
    await this.#db
      .insertInto('ask_user_link')
      .values({
        token_key: link.tokenKey,
        decision_id: link.decisionId,
        account_id: link.accountId,
        user_id: link.userId,
        verdict: link.verdict,
        on_no: JSON.stringify(link.onNo),
        created_ms: link.createdMs,
        expires_ms: link.expiresMs,
        answered_ms: null,
        answer: null,
      })
      .execute();
  }

  /** The state of `tokenKey`'s link at `nowMs`; changes nothing (a GET, a mail scanner's prefetch). */
  async state(tokenKey: string, nowMs: number): Promise<LinkState> {
    const row = await this.#db
      .selectFrom('ask_user_link')
      .selectAll()
      .where('token_key', '=', tokenKey)
      .executeTakeFirst();
    return stateOf(row, nowMs);
  }

  /**
   * Records `answer` on `tokenKey`'s link within `tx` (an outbox append's transaction: the answer
   * and the lock-outs it queues commit together, or neither does) when the link is open at
   * `nowMs`; false when it is not (used by another answer, expired, unknown), changing nothing.
   */
  static async answerIn(
    tx: RiskgateDatabase['db'],
    tokenKey: string,
    answer: AskUserAnswer,
    nowMs: number,
  ): Promise<boolean> {
    const row = await tx
      .withTables<AskUserTables>()
      .updateTable('ask_user_link')
      .set({ answered_ms: nowMs, answer })
      .where('token_key', '=', tokenKey)
      .where('answered_ms', 'is', null)
      .where('expires_ms', '>', nowMs)
      .returning('token_key')
      .executeTakeFirst();
    return row !== undefined;
  }

  /**
   * Records `answer` on `tokenKey`'s link when it is open at `nowMs`: one conditional UPDATE, so
   * of two answers at once exactly one is `answered`; otherwise why not, and nothing changed.
   */
  async answer(
    tokenKey: string,
    answer: AskUserAnswer,
    nowMs: number,
  ): Promise<{ state: 'answered'; link: AskUserLink } | Exclude<LinkState, { state: 'open' }>> {
    return this.#db.transaction().execute(async (trx) => {
      const row = await trx
        .updateTable('ask_user_link')
        .set({ answered_ms: nowMs, answer })
        .where('token_key', '=', tokenKey)
        .where('answered_ms', 'is', null)
        .where('expires_ms', '>', nowMs)
        .returningAll()
        .executeTakeFirst();
      if (row !== undefined) return { state: 'answered' as const, link: linkOf(row) };
      const current = await trx
        .selectFrom('ask_user_link')
        .selectAll()
        .where('token_key', '=', tokenKey)
        .executeTakeFirst();
      const s = stateOf(current, nowMs);
      // Open here cannot be (the UPDATE found it not): a row that changed between is "used".
      return s.state === 'open' ? { state: 'used' as const, link: s.link } : s;
    });
  }

  /**
   * Deletes at most `limit` links that expired before `beforeMs` (answered or not), the ones that
   * expired first; how many it deleted. One statement: a link is either kept whole or gone.
   */
  async pruneExpired(beforeMs: number, limit: number): Promise<number> {
    const result = await this.#db
      .deleteFrom('ask_user_link')
      .where('token_key', 'in', (eb) =>
        eb
          .selectFrom('ask_user_link')
          .select('token_key')
          .where('expires_ms', '<', beforeMs)
          .orderBy('expires_ms')
          .limit(limit),
      )
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}

function stateOf(row: AskUserTables['ask_user_link'] | undefined, nowMs: number): LinkState {
  if (row === undefined) return { state: 'unknown' };
  const link = linkOf(row);
  if (link.answeredMs !== null) return { state: 'used', link };
  if (link.expiresMs <= nowMs) return { state: 'expired', link };
  return { state: 'open', link };
}

function linkOf(r: AskUserTables['ask_user_link']): AskUserLink {
  return {
    tokenKey: r.token_key,
    decisionId: r.decision_id,
    accountId: r.account_id,
    userId: r.user_id,
    verdict: r.verdict,
    onNo: parseOnNo(r.on_no),
    createdMs: Number(r.created_ms),
    expiresMs: Number(r.expires_ms),
    answeredMs: r.answered_ms === null ? null : Number(r.answered_ms),
    answer: r.answer === 'yes' || r.answer === 'no' ? r.answer : null,
  };
}

/** A bad `on_no` (a hand-edited row) takes no action rather than a wrong one. */
function parseOnNo(text: string): OnNoAction[] {
  try {
    const parsed: unknown = JSON.parse(text);
    if (!Array.isArray(parsed)) return [];
    return parsed.filter(
      (a): a is OnNoAction => typeof a === 'object' && a !== null && typeof a.name === 'string',
    );
  } catch {
    return [];
  }
}
