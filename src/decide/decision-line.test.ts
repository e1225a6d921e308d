import { describe, expect, it } from 'vitest';
import type { DecideResponse } from './decide-response.ts';
import { decisionLine } from './decision-line.ts';
import type { DecisionRun } from './run-decision.ts';

/** A decided run with what the line reads (the rest of a run is not the line's business). */
function run(extra: { features?: boolean; staged?: boolean } = {}): DecisionRun {
  const input: Record<string, unknown> = {
    signals: { newBrowser: { status: 'ok' } },
    user: { id: 'u1' },
    devices: [],
    adminUnavailable: undefined,
  };
  if (extra.features) {
    input.velocity = { accountsPerIp: 1 };
    input.history = { failedAuthentications1h: 0 };
    input.featuresUnavailable = { history: 'timeout' };
    input.extra = { partner: 1 };
  }
  return {
    decisionId: 'd1',
    receivedAt: new Date(Date.UTC(2026, 10, 29, 8, 0, 0)),
    request: { accountId: 'a1' },
    input,
    decision: {
      verdict: 'allow',
      score: 0,
      matchedRules: [],
      policy: { name: 'login', revision: 'r1' },
      actions: [{ type: 'one_time_code' }],
      decidedBy: 'score',
    },
    calls: [{ name: 'signals-newBrowser', durationMs: 3, outcome: 'ok' }],
    evaluationMs: 0.2,
    ...(extra.staged && { staged: { versionId: 'v2', fellBack: false } }),
  } as unknown as DecisionRun;
}

const response = {
  verdict: 'allow',
  degraded: false,
  actions: [
    { type: 'one_time_code', status: 'done', oneTimeCode: '123456' },
    { type: 'notify', status: 'queued' },
  ],
} as unknown as DecideResponse;

describe('decision line', () => {
  it('keeps its members in the one order, optional ones only when present', () => {
    const plain = decisionLine(run(), response, 12);
    expect(Object.keys(plain)).toEqual([
      'kind',
      'schemaVersion',
      'decisionId',
      'at',
      'request',
      'policy',
      'inputs',
      'outcome',
      'actions',
      'degraded',
      'timings',
    ]);
    expect(Object.keys(plain.inputs)).toEqual(['user', 'devices', 'adminUnavailable', 'signals']);
    expect(Object.keys(plain.outcome)).toEqual(['verdict', 'score', 'matchedRules', 'decidedBy']);
    expect(plain.timings).toEqual({
      totalMs: 12,
      evaluationMs: 0.2,
      calls: [{ name: 'signals-newBrowser', durationMs: 3, outcome: 'ok' }],
    });
    expect(plain.at).toBe('2026-11-29T08:00:00.000Z');

    const shadow = { policy: { name: 'login', revision: 'r0' }, verdict: 'deny', score: 90, rules: ['x'] };
    const full = decisionLine(run({ features: true, staged: true }), response, 12, shadow);
    expect(Object.keys(full)).toEqual([
      'kind',
      'schemaVersion',
      'decisionId',
      'at',
      'request',
      'policy',
      'inputs',
      'outcome',
      'actions',
      'degraded',
      'shadow',
      'staged',
      'timings',
    ]);
    expect(Object.keys(full.inputs)).toEqual([
      'user',
      'devices',
      'adminUnavailable',
      'velocity',
      'history',
      'featuresUnavailable',
      'extra',
      'signals',
    ]);
    expect(full.shadow).toBe(shadow);
    expect(full.staged).toEqual({ versionId: 'v2', fellBack: false });
  });

  it("writes latestProximity's supportingSignals last in the head, the policy's input left as it was", () => {
    const proximity = {
      status: 'ok',
      response: {
        signalType: 'latest_proximity',
        result: {
          supportingSignals: [{ type: 'ipOverlap', details: { matched: true } }],
          proximityConfidence: 0.9,
        },
        observationTimesByUnit: { subjectUnitId: '2026-11-29T07:59:00.000Z' },
      },
    };
    const r = run();
    const signals = { latestProximity: proximity, newBrowser: { status: 'ok' } };
    (r.input as unknown as Record<string, unknown>).signals = signals;
    const text = JSON.stringify(decisionLine(r, response, 12));
    const head = text.slice(0, text.indexOf(',"outcome":{'));
    expect(head).toMatch(
      /"supportingSignals":\[\{"type":"ipOverlap","details":\{"matched":true\}\}\]\}\}\}\}\}$/,
    );
    expect(JSON.parse(text).inputs.signals).toEqual(signals);
    // The policy's own objects keep the vendor's order.
    expect(Object.keys(signals)).toEqual(['latestProximity', 'newBrowser']);
    expect(Object.keys(proximity.response)).toEqual(['signalType', 'result', 'observationTimesByUnit']);
    expect(Object.keys(proximity.response.result)).toEqual(['supportingSignals', 'proximityConfidence']);

    // Unavailable, or answered without the member: written as it came, signal still last.
    signals.latestProximity = { status: 'unavailable', reason: 'timeout' } as never;
    const unavailable = decisionLine(r, response, 12).inputs.signals as Record<string, unknown>;
    expect(Object.keys(unavailable)).toEqual(['newBrowser', 'latestProximity']);
    expect(unavailable.latestProximity).toBe(signals.latestProximity);
  });

  it('keeps whether a one-time code was issued, never the code', () => {
    const line = decisionLine(run(), response, 12);
    expect(line.actions).toEqual([
      { type: 'one_time_code', status: 'done', oneTimeCode: '[redacted]' },
      { type: 'notify', status: 'queued' },
    ]);
    expect(JSON.stringify(line)).not.toContain('123456');
  });
});
