import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readDecisionLine } from './replay-record.ts';

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
});
