import { describe, expect, it } from 'vitest';
import {
  checkVerdicts,
  deriveQuietVerdicts,
  type QuietAnswer,
  type Verdict,
  type VerdictsByAccount,
} from '../bench/verdict-check.ts';

type Answer = Omit<QuietAnswer, 'account'>;
const quiet = (verdict: Verdict): Answer => ({ status: 200, verdict, degraded: false });
const stressed = (verdict: Verdict): Answer => ({ status: 200, verdict, degraded: true });
const shed: Answer = { status: 503, verdict: undefined };

/** A riskgate that answers each account from its own script, one answer per call, in order. */
function scripted(script: Record<string, Answer[]>): (account: string) => Promise<Answer> {
  const next = new Map<string, number>();
  return async (account) => {
    const i = next.get(account) ?? 0;
    next.set(account, i + 1);
    const answers = script[account]!;
    return answers[Math.min(i, answers.length - 1)]!;
  };
}

describe('the quiet-day reference (bench/verdict-check.ts)', () => {
  it("sets a degraded answer aside and asks again: a stressed challenge never becomes trudy's reference", async () => {
    const decide = scripted({
      alice: [quiet('allow')],
      // The cold start, then a loaded moment: geovelocity timed out twice and the degraded floor
      // answered challenge, before her undegraded deny.
      trudy: [
        stressed('challenge'),
        stressed('challenge'),
        stressed('challenge'),
        quiet('deny'),
        quiet('deny'),
      ],
    });
    const pauses: number[] = [];
    const r = await deriveQuietVerdicts(['alice', 'trudy'], 3, decide, {
      pause: async (attempt) => {
        pauses.push(attempt);
      },
    });
    expect(r.verdicts).toEqual({ alice: 'allow', trudy: 'deny' });
    expect(r.setAside).toBe(2);
    expect(pauses).toEqual([1, 2]);
    // Every answer is kept for the caller to check, the set-aside ones included.
    expect(r.answers.filter((a) => a.account === 'trudy')).toHaveLength(5);
  });

  it('sets a shed answer aside too, and takes the cold start for no reference even when undegraded', async () => {
    const decide = scripted({ alice: [quiet('deny'), shed, quiet('allow'), quiet('allow')] });
    const r = await deriveQuietVerdicts(['alice'], 3, decide);
    expect(r.verdicts).toEqual({ alice: 'allow' });
    expect(r.setAside).toBe(1);
  });

  it('fails rather than record a stressed reference when every attempt is degraded', async () => {
    const decide = scripted({ trudy: [stressed('challenge')] });
    await expect(deriveQuietVerdicts(['trudy'], 3, decide, { attempts: 4 })).rejects.toThrow(
      /no stable quiet-day verdict for trudy .*0 of 2 warm rounds answered undegraded.*challenge \(degraded: true\)/,
    );
  });

  it('fails when an answer does not say whether it was degraded (it cannot vouch for itself)', async () => {
    const decide = scripted({ alice: [{ status: 200, verdict: 'allow' }] });
    await expect(deriveQuietVerdicts(['alice'], 2, decide, { attempts: 2 })).rejects.toThrow(
      /no stable quiet-day verdict for alice/,
    );
  });

  it('fails when undegraded warm answers disagree', async () => {
    const decide = scripted({ bob: [quiet('challenge'), quiet('challenge'), quiet('allow')] });
    await expect(deriveQuietVerdicts(['bob'], 3, decide)).rejects.toThrow(/disagree \(challenge, allow\)/);
  });
});

describe('the verdict check against a quiet-day reference', () => {
  const reference: Record<string, Verdict> = { alice: 'allow', bob: 'challenge', trudy: 'deny' };
  const check = (byAccount: VerdictsByAccount) => checkVerdicts(reference, byAccount);

  it('counts an answer more permissive than the quiet day as a wrong allow', () => {
    const c = check({ bob: { allow: 3, challenge: 5 }, trudy: { allow: 2, deny: 7 } });
    expect(c.wrongAllows).toBe(5);
    expect(c.wrongByAccount).toEqual({ bob: { allow: 3 }, trudy: { allow: 2 } });
    expect(c.asQuiet).toBe(12);
  });

  it('counts no wrong verdict for the quiet one or a move to the degraded verdict under stress', () => {
    const c = check({
      alice: { allow: 10, challenge: 4 },
      bob: { challenge: 6 },
      trudy: { deny: 9, challenge: 2 },
    });
    expect(c).toMatchObject({
      checked: 31,
      asQuiet: 25,
      degraded: 6,
      wrongAllows: 0,
      wrongDenies: 0,
      otherWrong: 0,
    });
    expect(c.wrongByAccount).toEqual({});
  });

  it('counts a deny the quiet day did not give as wrong (harsher than the evidence, policies/README.md)', () => {
    const c = check({ alice: { deny: 1 }, bob: { deny: 2 } });
    expect(c.wrongDenies).toBe(3);
    expect(c.wrongByAccount).toEqual({ alice: { deny: 1 }, bob: { deny: 2 } });
  });

  it('leaves unchecked an account without a reference and a verdict it cannot read', () => {
    const c = check({ eve: { allow: 4 }, alice: { refused: 1 } });
    expect(c).toMatchObject({ checked: 0, unchecked: 5 });
  });
});
