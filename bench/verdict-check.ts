import { setTimeout as delay } from 'node:timers/promises';

/**
 * Verdict correctness under stress (issue 22), shared by the bench's overload scenario and
 * test/stress-verdicts.test.ts so both count the same way.
 *
 * The rule: stress may only make an answer more careful, never more permissive and never harsher
 * than the evidence. So every 200 answer for a demo account must be either the account's quiet-day
 * verdict (what riskgate answers it undegraded before any stress: `deriveQuietVerdicts`) or the
 * policy's degraded verdict (challenge); an allow for an account challenged or denied on a quiet
 * day is a **wrong allow**, a deny for an account allowed or challenged on a quiet day a **wrong
 * deny**.
 */

export type Verdict = 'allow' | 'challenge' | 'deny';

/**
 * The verdict a degraded answer moves to: challenge, the default issue 22 gives the policy
 * language; the shipped policy names no other.
 */
export const DEGRADED_VERDICT: Verdict = 'challenge';

/** Verdict counts per account (`accountId` of the body) and verdict. */
export type VerdictsByAccount = Record<string, Record<string, number>>;

export interface VerdictCheck {
  /** 200 answers checked (with a known account and a quiet-day verdict for it). */
  checked: number;
  /** Answers equal to the account's quiet-day verdict. */
  asQuiet: number;
  /** Answers that moved to the degraded verdict. */
  degraded: number;
  /** Allows for accounts challenged or denied on a quiet day. */
  wrongAllows: number;
  /** Denies for accounts allowed or challenged on a quiet day (harsher than the evidence). */
  wrongDenies: number;
  /** Any other answer that is neither the quiet-day verdict nor the degraded one. */
  otherWrong: number;
  /** 200 answers of accounts without a quiet-day verdict, or without a readable verdict. */
  unchecked: number;
  /** The wrong answers by account and verdict, e.g. `{ trudy: { allow: 224 } }`. */
  wrongByAccount: VerdictsByAccount;
}

/** Counts right and wrong answers of `byAccount` against the quiet-day verdicts. */
export function checkVerdicts(
  quiet: Readonly<Record<string, Verdict>>,
  byAccount: VerdictsByAccount,
): VerdictCheck {
  const c: VerdictCheck = {
    checked: 0,
    asQuiet: 0,
    degraded: 0,
    wrongAllows: 0,
    wrongDenies: 0,
    otherWrong: 0,
    unchecked: 0,
    wrongByAccount: {},
  };
  for (const [account, verdicts] of Object.entries(byAccount)) {
    const expected = quiet[account];
    for (const [verdict, n] of Object.entries(verdicts)) {
      if (expected === undefined || !isVerdict(verdict)) {
        c.unchecked += n;
        continue;
      }
      c.checked += n;
      if (verdict === expected) {
        c.asQuiet += n;
        continue;
      }
      if (verdict === DEGRADED_VERDICT) {
        c.degraded += n;
        continue;
      }
      if (verdict === 'allow') c.wrongAllows += n;
      else if (verdict === 'deny') c.wrongDenies += n;
      else c.otherWrong += n;
      const row = c.wrongByAccount[account] ?? {};
      row[verdict] = (row[verdict] ?? 0) + n;
      c.wrongByAccount[account] = row;
    }
  }
  return c;
}

/** Adds `more` into `into` (per account and verdict). */
export function addVerdicts(into: VerdictsByAccount, more: VerdictsByAccount): VerdictsByAccount {
  for (const [account, verdicts] of Object.entries(more)) {
    const row = into[account] ?? {};
    for (const [verdict, n] of Object.entries(verdicts)) row[verdict] = (row[verdict] ?? 0) + n;
    into[account] = row;
  }
  return into;
}

function isVerdict(v: string): v is Verdict {
  return v === 'allow' || v === 'challenge' || v === 'deny';
}

/** The short form of a check, for a table cell: `0 / 0 of 1,234` (wrong allows / wrong denies of checked). */
export function verdictCheckCell(c: VerdictCheck | undefined): string {
  if (c === undefined) return '–';
  const wrong = Object.entries(c.wrongByAccount)
    .map(([a, v]) => `${a} ${Object.entries(v).map(([verdict, n]) => `${verdict} ${n}`)}`)
    .join('; ');
  return `${c.wrongAllows} / ${c.wrongDenies} of ${c.checked}${wrong ? ` (${wrong})` : ''}`;
}

/** One line per account: `alice  allow 812, challenge 3, deny 1` (every verdict seen). */
export function formatVerdictsByAccount(
  byAccount: VerdictsByAccount,
  quiet: Record<string, Verdict>,
): string[] {
  return Object.entries(byAccount)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([account, verdicts]) => {
      const parts = Object.entries(verdicts)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([v, n]) => `${v} ${n}`);
      return `${account.padEnd(8)} (quiet: ${quiet[account] ?? '?'})  ${parts.join(', ')}`;
    });
}

/**
 * One quiet-day answer: the account, the HTTP status, the verdict (undefined unless 200) and whether
 * the answer says it was degraded (undefined when it says nothing).
 */
export interface QuietAnswer {
  account: string;
  status: number;
  verdict: string | undefined;
  degraded?: boolean | undefined;
}

/**
 * Whether `a` can stand for a quiet-day verdict: a 200 that says it was not degraded (every input
 * the policy reads gathered, every rule evaluated, not an overload answer). A degraded answer is a
 * stressed one (an input timed out, the deadline or the budget ran out: on a loaded machine the
 * quiet phase is not quiet), and a reference taken from it makes every right answer after it look
 * wrong: trudy, denied for impossible travel, answered the degraded `challenge` when geovelocity
 * timed out, and each of her later `deny` answers was counted a wrong deny (issue 32).
 */
export function isQuietAnswer(a: QuietAnswer): boolean {
  return a.status === 200 && a.degraded === false && a.verdict !== undefined && isVerdict(a.verdict);
}

/** Options of `deriveQuietVerdicts`. */
export interface QuietVerdictOptions {
  /**
   * Answers asked per account and warm round before giving up when each is degraded or refused
   * (default 8): a stressed answer is set aside and the same login asked again.
   */
  attempts?: number;
  /** Waits before retry `attempt` (1-based) of a degraded or refused answer (default: none). */
  pause?: (attempt: number) => Promise<void>;
}

/**
 * Each account's quiet-day verdict, derived from what riskgate answered before any stress: `rounds`
 * answers per account, sent one at a time. The first round is riskgate's cold start (the issue saw
 * alice denied by a cold evaluation) and never a reference. In the later rounds only an answer
 * `isQuietAnswer` accepts counts: a degraded or refused one is set aside and the login asked again,
 * up to `attempts` times, and the counted answers must agree. Every answer, set aside or not, is
 * returned for the caller to check like any other. A deny that locks the account out (mallory) is
 * followed by account-locked denies: still deny.
 */
export async function deriveQuietVerdicts(
  accounts: readonly string[],
  rounds: number,
  decide: (account: string, round: number) => Promise<Omit<QuietAnswer, 'account'>>,
  options: QuietVerdictOptions = {},
): Promise<{ verdicts: Record<string, Verdict>; answers: QuietAnswer[]; setAside: number }> {
  if (rounds < 2) throw new Error('deriveQuietVerdicts needs at least 2 rounds (the first is a cold start)');
  const attempts = options.attempts ?? 8;
  const answers: QuietAnswer[] = [];
  const counted = new Map<string, QuietAnswer[]>();
  let setAside = 0;
  for (let round = 0; round < rounds; round++) {
    for (const account of accounts) {
      for (let attempt = 0; attempt < (round === 0 ? 1 : attempts); attempt++) {
        if (attempt > 0) await options.pause?.(attempt);
        const answer = { account, ...(await decide(account, round)) };
        answers.push(answer);
        if (round === 0) break;
        if (isQuietAnswer(answer)) {
          counted.set(account, [...(counted.get(account) ?? []), answer]);
          break;
        }
        setAside++;
      }
    }
  }
  const verdicts: Record<string, Verdict> = {};
  for (const account of accounts) {
    const quiet = counted.get(account) ?? [];
    const seen = new Set(quiet.map((a) => a.verdict));
    const [only] = seen;
    if (quiet.length !== rounds - 1 || seen.size !== 1 || only === undefined || !isVerdict(only)) {
      const warm = answers.filter((a) => a.account === account).slice(1);
      throw new Error(
        `no stable quiet-day verdict for ${account} (before any stress): ${quiet.length} of ${rounds - 1} warm rounds answered undegraded${
          seen.size > 1 ? ` and they disagree (${[...seen].join(', ')})` : ''
        }; warm answers ${warm.map(describeAnswer).join(', ')}`,
      );
    }
    verdicts[account] = only;
  }
  return { verdicts, answers, setAside };
}

function describeAnswer(a: QuietAnswer): string {
  if (a.status !== 200) return `HTTP ${a.status}`;
  return a.degraded === false ? String(a.verdict) : `${a.verdict} (degraded: ${a.degraded})`;
}

/** Counts of `answers` (200s only) per account and verdict. */
export function countAnswers(answers: readonly QuietAnswer[]): VerdictsByAccount {
  const by: VerdictsByAccount = {};
  for (const a of answers) {
    if (a.status !== 200 || a.verdict === undefined) continue;
    addVerdicts(by, { [a.account]: { [a.verdict]: 1 } });
  }
  return by;
}

/**
 * `deriveQuietVerdicts` over HTTP: POSTs each account's own bodies of `bodies` (round k sends the
 * account's k-th body, a distinct login scored as the seeded one) to `decideUrl`, one at a time,
 * each with a `timeoutMs` timeout (default 30 s); a degraded or refused answer is asked again after
 * 250 ms × the attempt. Accounts in the order of their first body.
 */
export async function askQuietVerdicts(o: {
  decideUrl: string;
  headers: Record<string, string>;
  bodies: readonly string[];
  rounds: number;
  timeoutMs?: number;
  /** See `QuietVerdictOptions.attempts` (default 8). */
  attempts?: number;
}): Promise<{ verdicts: Record<string, Verdict>; answers: QuietAnswer[]; setAside: number }> {
  const byAccount = new Map<string, string[]>();
  for (const body of o.bodies) {
    const account = (JSON.parse(body) as { accountId: string }).accountId;
    const list = byAccount.get(account) ?? [];
    list.push(body);
    byAccount.set(account, list);
  }
  return deriveQuietVerdicts(
    [...byAccount.keys()],
    o.rounds,
    async (account, round) => {
      const list = byAccount.get(account)!;
      const response = await fetch(o.decideUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...o.headers },
        body: list[round % list.length]!,
        signal: AbortSignal.timeout(o.timeoutMs ?? 30_000),
      });
      const text = await response.text();
      if (response.status !== 200) return { status: response.status, verdict: undefined };
      const body = JSON.parse(text) as { verdict?: string; degraded?: boolean };
      return { status: 200, verdict: body.verdict, degraded: body.degraded };
    },
    // A stressed answer comes from a busy moment: the next try waits it out a little longer.
    { ...(o.attempts !== undefined && { attempts: o.attempts }), pause: (attempt) => delay(250 * attempt) },
  );
}
