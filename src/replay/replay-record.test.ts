import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { oneRulePolicy } from '../../test/support/one-rule-policy.ts';
import { compilePolicy } from '../policy/policy-compiler.ts';
import { loadPolicy } from '../policy/policy-loader.ts';
import { lineNeeds, readDecisionLine } from './replay-record.ts';

/**
 * Replay reads of a decision line only what evaluation needs (what precedes `outcome`, and the
 * outcome up to its matched rules): the same decision as parsing the whole line, and a line laid
 * out otherwise (keys of the same names deeper, another order) read whole, never misread.
 */

const FIXTURE = join(import.meta.dirname, '../../bench/fixtures/decision-lines.jsonl');
const lines = readFileSync(FIXTURE, 'utf8').trim().split('\n');

/** The line read whole: a leading space is JSON all the same, and skips the partial read. */
const wholeRead = (text: string) => readDecisionLine(` ${text}`);

/** A line's fields, to lay one out otherwise. */
// biome-ignore lint/suspicious/noExplicitAny: a test rearranges a line's JSON freely.
type LineFields = Record<string, any>;

describe('reading a decision line for replay', () => {
  it('reads the same decision from the needed fields as from the whole line', () => {
    expect(lines.length).toBeGreaterThan(3);
    for (const text of lines) {
      const read = readDecisionLine(text);
      expect(read.kind).toBe('decision');
      expect(read).toEqual(wholeRead(text));
    }
  });

  it('never parses what follows the matched rules (a third of the line)', () => {
    const text = lines[0]!;
    const cut = text.indexOf(',"thresholds":');
    expect(cut).toBeGreaterThan(0);
    // The tail replaced by bytes that are not JSON: read whole, the line is unreadable.
    const damaged = `${text.slice(0, cut)},"thresholds":#not json#}`;
    expect(wholeRead(damaged)).toEqual({ kind: 'bad', why: 'not JSON' });
    expect(readDecisionLine(damaged)).toEqual(readDecisionLine(text));
  });

  it('reads a line whose outcome ends with its matched rules, as a short line has it', () => {
    const line = (rules: string) =>
      '{"kind":"decision","schemaVersion":1,"decisionId":"d1","at":"2026-11-28T00:00:00.000Z","request":{"accountId":"a","platform":"browser"},' +
      `"policy":{"name":"login","revision":"r1"},"inputs":{"signals":{},"devices":[]},"outcome":{"verdict":"challenge","score":0,"matchedRules":${rules}}}`;
    const text = line('[{"id":"browser"},{"id":"b"}]');
    const read = readDecisionLine(text);
    expect(read).toEqual(wholeRead(text));
    expect(read.kind === 'decision' && read.decision.recorded.rules).toEqual(['browser', 'b']);
    // What follows is never parsed: read all the same.
    const damaged = `${text.slice(0, -1)},"x":#}`;
    expect(wholeRead(damaged)).toEqual({ kind: 'bad', why: 'not JSON' });
    expect(readDecisionLine(damaged)).toEqual(read);
    // A rule holding an array of its own: its end is no cut, the line is read whole.
    const nested = line('[{"id":"browser","tags":["x"]},{"id":"b"}]');
    expect(readDecisionLine(nested)).toEqual(wholeRead(nested));
    expect(readDecisionLine(`${nested.slice(0, -1)},"x":#}`)).toEqual({ kind: 'bad', why: 'not JSON' });
  });

  it('is not misled by keys named as the cuts deeper in the line', () => {
    const v = JSON.parse(lines[0]!) as LineFields;
    // A caller's context holding an outcome of its own, before the real one.
    v.request.context = { outcome: { verdict: 'deny', score: 999, matchedRules: [{ id: 'fake' }] } };
    // And after it: a shadow outcome nested in a field riskgate may add later.
    v.later = { x: [1], outcome: { verdict: 'deny', score: 1, matchedRules: [] } };
    const text = JSON.stringify(v);
    const read = readDecisionLine(text);
    expect(read).toEqual(wholeRead(text));
    expect(read.kind === 'decision' && read.decision.recorded).toMatchObject({
      verdict: v.outcome.verdict,
      score: v.outcome.score,
    });
  });

  it('reads a line whose outcome is laid out in another order whole', () => {
    const v = JSON.parse(lines[1]!) as LineFields;
    const { verdict, ...rest } = v.outcome;
    v.outcome = { matchedRules: rest.matchedRules, ...rest, verdict, description: '],"x' };
    const text = JSON.stringify(v);
    expect(readDecisionLine(text)).toEqual(wholeRead(text));
    expect(readDecisionLine(text).kind).toBe('decision');
  });

  it('passes over an overload answer, never evaluated, as it did', () => {
    const text = JSON.stringify({
      kind: 'decision',
      schemaVersion: 1,
      decisionId: 'd-1',
      at: '2026-11-28T00:00:00.000Z',
      request: { accountId: 'a' },
      outcome: { verdict: 'challenge', score: 0, matchedRules: [], shed: true },
    });
    expect(readDecisionLine(text)).toEqual({ kind: 'other' });
  });

  describe('for a candidate that reads fewer signals than the line holds', () => {
    const compiled = compilePolicy(
      'narrow.yaml',
      `apiVersion: riskgate/v1
kind: Policy
name: narrow
thresholds: { challenge: 40, deny: 80 }
rules:
  - { id: new-browser, description: a new browser, when: 'signals.newBrowser.success && !signals.newBrowser.known', score: 40 }
  - { id: locked, description: locked out, when: 'user.status == "locked_out"', verdict: deny }
`,
    );
    const policy = compiled.policy!;
    const needs = lineNeeds(policy);
    const text = lines[0]!;
    const signalsOf = (t: string) => Object.keys(JSON.parse(t).inputs.signals as object);

    it('parses only the signals it reads, and evaluates as the whole line does', () => {
      expect([...policy.requirements.signals]).toEqual(['newBrowser']);
      expect(signalsOf(text).length).toBeGreaterThan(3);
      for (const t of lines) {
        const read = readDecisionLine(t, needs);
        const whole = wholeRead(t);
        if (read.kind !== 'decision' || whole.kind !== 'decision') throw new Error('not read as a decision');
        expect(Object.keys(read.decision.input.signals)).toEqual(
          signalsOf(t).filter((s) => s === 'newBrowser'),
        );
        const { signals, ...rest } = read.decision.input;
        const { signals: allSignals, ...wholeRest } = whole.decision.input;
        expect(rest).toEqual(wholeRest);
        expect(signals.newBrowser).toEqual(allSignals.newBrowser);
        expect(read.decision.recorded).toEqual(whole.decision.recorded);
        expect(policy.evaluate(read.decision.input)).toEqual(policy.evaluate(whole.decision.input));
      }
    });

    it('passes over a broken byte inside a signal it does not read, and refuses one in a signal it reads', () => {
      const v = JSON.parse(text) as LineFields;
      expect(v.inputs.signals.latestProximity.status).toBe('ok');
      v.inputs.signals.latestProximity.response.result.proximityConfidence = 'BROKEN';
      v.inputs.signals.newBrowser.response.result.known = 'BROKEN';
      // A bare word where a number was: balanced, but not JSON.
      const unread = JSON.stringify({
        ...v,
        inputs: {
          ...v.inputs,
          signals: { ...v.inputs.signals, newBrowser: JSON.parse(text).inputs.signals.newBrowser },
        },
      }).replace('"BROKEN"', 'BROKEN');
      expect(wholeRead(unread)).toEqual({ kind: 'bad', why: 'not JSON' });
      expect(readDecisionLine(unread, needs)).toEqual(readDecisionLine(text, needs));
      const brokenRead = JSON.stringify({
        ...v,
        inputs: {
          ...v.inputs,
          signals: { ...v.inputs.signals, latestProximity: JSON.parse(text).inputs.signals.latestProximity },
        },
      }).replace('"BROKEN"', 'BROKEN');
      expect(readDecisionLine(brokenRead, needs)).toEqual({ kind: 'bad', why: 'not JSON' });
    });

    it('reads a line whose signals are not balanced whole, and refuses it', () => {
      const at = text.indexOf('"latestProximity":{') + '"latestProximity":{'.length;
      const unbalanced = `${text.slice(0, at)}"x":[1,${text.slice(at)}`;
      expect(readDecisionLine(unbalanced, needs)).toEqual({ kind: 'bad', why: 'not JSON' });
    });
  });

  describe("for a candidate that never reads an answer's member (the shipped policy: latestProximity's supportingSignals)", async () => {
    const policy = await loadPolicy(join(import.meta.dirname, '../../policies'));
    const supporting = (read: ReturnType<typeof readDecisionLine>) =>
      read.kind === 'decision'
        ? (read.decision.input.signals.latestProximity as LineFields | undefined)?.response?.result
            ?.supportingSignals
        : undefined;
    /** The read without the member: what the whole read gives with the member emptied. */
    const emptied = (text: string) => {
      const whole = wholeRead(text);
      const proximity = whole.kind === 'decision' ? whole.decision.input.signals.latestProximity : undefined;
      const result = (proximity as LineFields | undefined)?.response?.result;
      if (result?.supportingSignals !== undefined) result.supportingSignals = [];
      return whole;
    };

    it('leaves it unparsed, reads all else as the whole line, and evaluates the same', () => {
      const needs = lineNeeds(policy);
      for (const text of lines) {
        const read = readDecisionLine(text, needs);
        expect(supporting(wholeRead(text)).length).toBeGreaterThan(0);
        expect(supporting(read)).toEqual([]);
        expect(read).toEqual(emptied(text));
        const whole = wholeRead(text);
        if (read.kind !== 'decision' || whole.kind !== 'decision') throw new Error('not read as a decision');
        expect(policy.evaluate(read.decision.input)).toEqual(policy.evaluate(whole.decision.input));
      }
    });

    it('parses it for a candidate that reads the matched types', () => {
      const reads = oneRulePolicy('"wifiNetworkOverlap" in signals.latestProximity.matchedSignals');
      const needs = lineNeeds(reads);
      expect(needs.cuts).toEqual([]);
      for (const text of lines) {
        expect(supporting(readDecisionLine(text, needs))).toEqual(supporting(wholeRead(text)));
      }
    });

    it('reads whole a line where the member is not where the answer holds it', () => {
      const needs = lineNeeds(policy);
      const v = JSON.parse(lines[0]!) as LineFields;
      const proximity = v.inputs.signals.latestProximity.response;
      // Moved out of `result` into the answer itself: found by the search, not where it is read from.
      const moved = JSON.parse(JSON.stringify(v)) as LineFields;
      const m = moved.inputs.signals.latestProximity.response;
      moved.inputs.signals.latestProximity.response = {
        supportingSignals: m.result.supportingSignals,
        ...m,
        result: { proximityConfidence: m.result.proximityConfidence },
      };
      const text = JSON.stringify(moved);
      expect(readDecisionLine(text, needs)).toEqual(wholeRead(text));
      // And one deeper in another signal's answer, the proximity unavailable: never cut there.
      const elsewhere = JSON.parse(JSON.stringify(v)) as LineFields;
      elsewhere.inputs.signals.latestProximity = { status: 'unavailable', reason: 'timeout' };
      elsewhere.inputs.signals.remoteAccessTool.response.result.supportingSignals =
        proximity.result.supportingSignals;
      const other = JSON.stringify(elsewhere);
      expect(readDecisionLine(other, needs)).toEqual(wholeRead(other));
    });

    it('refuses a line whose member is not balanced, and reads the same whatever the lines before held', () => {
      const text = lines[1]!;
      const at = text.indexOf('"supportingSignals":[') + '"supportingSignals":['.length;
      expect(readDecisionLine(`${text.slice(0, at)}{"x":[1}${text.slice(at)}`, lineNeeds(policy))).toEqual({
        kind: 'bad',
        why: 'not JSON',
      });
      // A line holding a signal the candidate does not read, between two that do not: each read as
      // it is read alone.
      const v = JSON.parse(text) as LineFields;
      v.inputs.signals.geolocation = { status: 'unavailable', reason: 'timeout' };
      const more = JSON.stringify(v);
      const needs = lineNeeds(policy);
      const alone = (t: string) => readDecisionLine(t, lineNeeds(policy));
      for (const t of [text, more, text, more, more, text])
        expect(readDecisionLine(t, needs)).toEqual(alone(t));
      expect(alone(more)).toEqual(alone(text));
    });

    it('decodes and parses nothing of it in a line written with it last, nor after it', () => {
      const needs = lineNeeds(policy);
      const text = lines[0]!;
      const member = text.indexOf('"supportingSignals":[') + '"supportingSignals":'.length;
      const expected = emptied(text);
      const decodes = vi.spyOn(Buffer.prototype, 'toString');
      let decoded: string[];
      try {
        expect(readDecisionLine(text, needs)).toEqual(expected);
        decoded = decodes.mock.results.map((r) => String(r.value));
      } finally {
        decodes.mockRestore();
      }
      // The head's one decode stops where the member's value begins; no decode holds its types.
      expect(decoded.some((t) => t.length === member)).toBe(true);
      expect(decoded.filter((t) => t.includes('reportedIpOverlap'))).toEqual([]);
    });

    it('reads a line written before (signals first, the member inside) as it did', () => {
      /** The layout of a line written before session 9: `signals` first in `inputs`, `result` first in the proximity's answer. */
      const before = (text: string) => {
        const v = JSON.parse(text) as LineFields;
        const { signals, ...rest } = v.inputs;
        const proximity = signals.latestProximity;
        if (proximity?.response?.result !== undefined) {
          const { result, ...others } = proximity.response;
          proximity.response = { result, ...others };
        }
        const { latestProximity, ...others } = signals;
        v.inputs = {
          signals: latestProximity === undefined ? signals : { latestProximity, ...others },
          ...rest,
        };
        return JSON.stringify(v);
      };
      const fewer = lineNeeds(oneRulePolicy('signals.newBrowser.known'));
      for (const text of lines) {
        const old = before(text);
        expect(old).not.toBe(text);
        expect(readDecisionLine(old, lineNeeds(policy))).toEqual(emptied(old));
        expect(readDecisionLine(old, lineNeeds(policy))).toEqual(readDecisionLine(text, lineNeeds(policy)));
        expect(readDecisionLine(old, fewer)).toEqual(readDecisionLine(text, fewer));
        expect(readDecisionLine(old)).toEqual(wholeRead(text));
      }
    });
  });
});
