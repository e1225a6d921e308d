import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { oneRulePolicy } from '../../test/support/one-rule-policy.ts';
import { SIGNAL_VIEW_TYPES } from './cel-environment.ts';
import type { PolicySignalName, SignalOutcome } from './inputs/input-values.ts';
import { ANSWER_MEMBERS_FILLING, SIGNAL_FILLS, unreadAnswerMembers } from './policy-activation.ts';
import { loadPolicy } from './policy-loader.ts';

/**
 * What a compiled policy reads of each signal's view, and so which members of a vendor answer it
 * never needs (replay leaves them unparsed): the table of members beside the fills must say every
 * field a member fills, or a policy would be evaluated without what it reads.
 */

const ROOT = join(import.meta.dirname, '../..');
const logged = JSON.parse(
  readFileSync(join(ROOT, 'bench/fixtures/decision-lines.jsonl'), 'utf8').split('\n')[0]!,
).inputs.signals as Record<string, SignalOutcome>;

/** An answer of each signal of the table, every member in it present and filling something. */
const proximity = logged.latestProximity as SignalOutcome<'latestProximity'> & { status: 'ok' };
const supporting = proximity.response.result!.supportingSignals;
const ANSWERS: { [N in PolicySignalName]?: SignalOutcome<N> } = {
  latestProximity: proximity,
  historicalProximity: {
    status: 'ok',
    response: {
      ...proximity.response,
      signalType: 'historical_proximity',
      result: {
        bestMatch: proximity.response.result,
        bestIngressMatch: { proximityConfidence: 0.4, supportingSignals: supporting.slice(0, 2) },
      },
    },
  } as unknown as SignalOutcome<'historicalProximity'>,
};

/** `value` without any member named `key`, at any depth. */
function without(value: unknown, key: string): unknown {
  if (Array.isArray(value)) return value.map((v) => without(v, key));
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([k]) => k !== key)
      .map(([k, v]) => [k, without(v, key)]),
  );
}

function view(signal: PolicySignalName, outcome: unknown): Record<string, unknown> {
  const v = new SIGNAL_VIEW_TYPES[signal]!.ctor() as Record<string, unknown>;
  (SIGNAL_FILLS[signal] as (view: unknown, o: unknown) => void)(v, outcome);
  return { ...v };
}

describe('the answer members a view field is filled from', () => {
  const rows = Object.entries(ANSWER_MEMBERS_FILLING).flatMap(([signal, members]) =>
    Object.entries(members ?? {}).map(
      ([key, { fills }]) => [signal as PolicySignalName, key, fills] as const,
    ),
  );

  it.each(rows)('%s: dropping every `%s` member changes no field but %j', (signal, key, fields) => {
    const answer = ANSWERS[signal];
    expect(answer, `an answer of ${signal} for this test`).toBeDefined();
    expect(JSON.stringify(answer)).toContain(`"${key}":`);
    // Where the table says the member sits, and nowhere else.
    const places = ANSWER_MEMBERS_FILLING[signal]![key]!.at;
    const response = (answer as { response: Record<string, unknown> }).response;
    for (const path of places) {
      const holder = path.reduce<unknown>((o, k) => (o as Record<string, unknown>)[k], response);
      expect(holder, `${signal}: ${path.join('.')}`).toHaveProperty(key);
    }
    expect(JSON.stringify(answer).split(`"${key}":`).length - 1).toBe(places.length);
    const whole = view(signal, answer);
    const dropped = view(signal, without(answer, key));
    for (const f of Object.keys(whole)) {
      if (fields.includes(f)) expect(dropped[f], `${signal}.${f}`).not.toEqual(whole[f]);
      else expect(dropped[f], `${signal}.${f}`).toEqual(whole[f]);
    }
  });
});

const names = (members: ReturnType<typeof unreadAnswerMembers>) =>
  members.map((m) => `${m.signal}.${m.member}`);

describe('what a compiled policy never reads of an answer', () => {
  const compile = (when: string) => oneRulePolicy(when).requirements;

  it("the shipped policy: latestProximity's supporting signals (it reads the confidence)", async () => {
    const policy = await loadPolicy(join(ROOT, 'policies'));
    expect(names(unreadAnswerMembers(policy.requirements))).toEqual(['latestProximity.supportingSignals']);
  });

  it('none of a member whose field a rule reads, or of a view read whole', () => {
    expect(
      unreadAnswerMembers(compile('"wifiNetworkOverlap" in signals.latestProximity.matchedSignals')),
    ).toEqual([]);
    expect(unreadAnswerMembers(compile('signals["latestProximity"]["matchedSignals"].size() > 0'))).toEqual(
      [],
    );
    expect(
      unreadAnswerMembers(
        compile(
          'signals.historicalProximity.bestConfidence > 0.5 && signals.historicalProximity.ingressMatchedSignals.size() > 0',
        ),
      ),
    ).toEqual([]);
    expect(
      names(
        unreadAnswerMembers(
          compile('signals.historicalProximity.bestConfidence > 0.5 && signals.newBrowser.known'),
        ),
      ),
    ).toEqual(['historicalProximity.supportingSignals']);
  });
});
