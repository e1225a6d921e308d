import { describe, expect, it } from 'vitest';
import { InputError } from '../errors/riskgate-error.ts';
import {
  checkRemoteAccessTool,
  newBrowserQuery,
  proximityQuery,
  remoteAccessToolQuery,
  singleUnitQuery,
} from './signal-params.ts';

const P = '?serviceId=s';
const NOW = Date.parse('2024-03-01T00:00:00Z');

function fieldOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(InputError);
    return (e as InputError).field;
  }
  return undefined;
}

describe('signal parameters', () => {
  it('builds single-unit queries in order, encoding only what needs it', () => {
    expect(
      singleUnitQuery(
        P,
        {
          accountId: 'alice',
          unitId: 'alice-app',
          verificationStatus: 'verified',
          interactionId: 'alice-login',
          sdkVersionId: 'ios/1.2',
          windowEnd: new Date('2024-02-01T00:00:00Z'),
        },
        NOW,
      ),
    ).toBe(
      '?serviceId=s&accountId=alice&unitId=alice-app&verificationStatus=verified&interactionId=alice-login&sdkVersionId=ios%2F1.2&windowEnd=2024-02-01T00:00:00.000Z',
    );
  });

  it('enforces the ordering rule per side', () => {
    expect(fieldOf(() => singleUnitQuery(P, { accountId: 'a', verificationStatus: 'verified' }, NOW))).toBe(
      'verificationStatus',
    );
    expect(fieldOf(() => singleUnitQuery(P, { accountId: 'a', unitId: 'u', interactionId: 'i' }, NOW))).toBe(
      'interactionId',
    );
    expect(
      fieldOf(() =>
        proximityQuery(P, { subjectAccountId: 'a', baselineUnitId: 'u', baselineInteractionId: 'i' }, NOW),
      ),
    ).toBe('baselineInteractionId');
    expect(
      fieldOf(() => newBrowserQuery(P, { subjectAccountId: 'a', subjectVerificationStatus: 'fraud' }, NOW)),
    ).toBe('subjectVerificationStatus');
  });

  it('refuses identifiers that break their patterns or lengths', () => {
    expect(fieldOf(() => singleUnitQuery(P, { accountId: 'a b' }, NOW))).toBe('accountId');
    expect(fieldOf(() => singleUnitQuery(P, { accountId: 'x'.repeat(51) }, NOW))).toBe('accountId');
    expect(fieldOf(() => singleUnitQuery(P, { accountId: 'a', unitId: 'u'.repeat(1001) }, NOW))).toBe(
      'unitId',
    );
    expect(fieldOf(() => singleUnitQuery(P, { accountId: 'a', unitId: 'u&x=1' }, NOW))).toBe('unitId');
    expect(fieldOf(() => singleUnitQuery(P, { accountId: 'a', sdkVersionId: 'v 1' }, NOW))).toBe(
      'sdkVersionId',
    );
    expect(
      fieldOf(() =>
        singleUnitQuery(P, { accountId: 'a', unitId: 'u', verificationStatus: 'maybe' as 'fraud' }, NOW),
      ),
    ).toBe('verificationStatus');
  });

  it('refuses windows over 31 days, reversed or not RFC 3339 UTC', () => {
    const w = (windowStart?: string, windowEnd?: string) =>
      fieldOf(() => singleUnitQuery(P, { accountId: 'a', windowStart, windowEnd }, NOW));
    expect(w('2024-01-01T00:00:00Z', '2024-02-01T00:00:00Z')).toBeUndefined(); // exactly 31 days
    expect(w('2024-01-01T00:00:00Z', '2024-02-01T00:00:01Z')).toBe('windowStart');
    expect(w('2024-02-02T00:00:00Z', '2024-02-01T00:00:00Z')).toBe('windowStart');
    expect(w('2024-01-01T00:00:00Z')).toBe('windowStart'); // open end = now, 60 days
    expect(w(undefined, '2024-02-01T00:00:00+01:00')).toBe('windowEnd');
    expect(w(undefined, 'yesterday')).toBe('windowEnd');
  });

  it('refuses a window bound that names an impossible date or time, naming the field', () => {
    const w = (windowStart?: string, windowEnd?: string) =>
      fieldOf(() => newBrowserQuery(P, { subjectAccountId: 'a', windowStart, windowEnd }, NOW));
    expect(w('2024-02-30T00:00:00Z')).toBe('windowStart');
    expect(w(undefined, '2024-02-30T00:00:00Z')).toBe('windowEnd');
    expect(w(undefined, '2024-02-28T24:00:00Z')).toBe('windowEnd');
    expect(w('2024-02-29T00:00:00Z', '2024-02-29T12:00:00Z')).toBeUndefined();
    expect(() => singleUnitQuery(P, { accountId: 'a', windowStart: '2023-02-29T00:00:00Z' }, NOW)).toThrow(
      /windowStart must be an existing RFC 3339 UTC time/,
    );
  });

  it('checks new-browser and proximity extras', () => {
    expect(
      newBrowserQuery(P, { subjectAccountId: 'a', matchScope: 'full_fingerprint', cooldownSeconds: 0 }, NOW),
    ).toBe('?serviceId=s&subjectAccountId=a&matchScope=full_fingerprint&cooldownSeconds=0');
    expect(fieldOf(() => newBrowserQuery(P, { subjectAccountId: 'a', cooldownSeconds: -1 }, NOW))).toBe(
      'cooldownSeconds',
    );
    expect(fieldOf(() => newBrowserQuery(P, { subjectAccountId: 'a', cooldownSeconds: 1.5 }, NOW))).toBe(
      'cooldownSeconds',
    );
    expect(
      fieldOf(() =>
        proximityQuery(P, { subjectAccountId: 'a', supportingSignal: 'telepathy' as 'locationOverlap' }, NOW),
      ),
    ).toBe('supportingSignal');
  });

  it('requires every remote-access-tool identifier but sdkVersionId', () => {
    const ok = { accountId: 'a', unitId: 'u', verificationStatus: 'unverified', interactionId: 'i' } as const;
    expect(remoteAccessToolQuery(P, { ...ok, baselineScope: 'full_history' })).toBe(
      '?serviceId=s&accountId=a&unitId=u&verificationStatus=unverified&interactionId=i&baselineScope=full_history',
    );
    expect(
      fieldOf(() => checkRemoteAccessTool({ ...ok, interactionId: undefined as unknown as string })),
    ).toBe('interactionId');
    expect(fieldOf(() => checkRemoteAccessTool({ ...ok, unitId: undefined as unknown as string }))).toBe(
      'unitId',
    );
  });
});
