import { describe, expect, it } from 'vitest';
import { parseRfc3339, utcDateTimeMs } from './rfc3339.ts';

describe('parseRfc3339', () => {
  it('reads UTC and offset forms as the same instant', () => {
    const expected = Date.UTC(2024, 0, 2, 10, 0, 0);
    for (const v of ['2024-01-02T10:00:00Z', '2024-01-02t10:00:00z', '2024-01-02T11:30:00+01:30']) {
      expect(parseRfc3339(v), v).toBe(expected);
    }
    expect(parseRfc3339('2024-01-02T09:00:00-01:00')).toBe(expected);
  });

  it('keeps milliseconds and drops finer digits', () => {
    expect(parseRfc3339('2024-01-02T10:00:00.5Z')).toBe(Date.UTC(2024, 0, 2, 10, 0, 0, 500));
    expect(parseRfc3339('2024-01-02T10:00:00.123456789Z')).toBe(Date.UTC(2024, 0, 2, 10, 0, 0, 123));
  });

  it('accepts the leap day of a leap year', () => {
    expect(parseRfc3339('2024-02-29T00:00:00Z')).toBe(Date.UTC(2024, 1, 29));
    expect(parseRfc3339('2000-02-29T00:00:00Z')).toBe(Date.UTC(2000, 1, 29));
  });

  it.each([
    '2024-02-30T00:00:00Z',
    '2023-02-29T00:00:00Z',
    '1900-02-29T00:00:00Z',
    '2024-04-31T00:00:00Z',
    '2024-00-10T00:00:00Z',
    '2024-13-01T00:00:00Z',
    '2024-01-00T00:00:00Z',
    '2024-01-01T24:00:00Z',
    '2024-01-01T23:60:00Z',
    '2024-01-01T23:59:60Z',
    '2024-01-01T10:00:00+24:00',
    '2024-01-01T10:00:00',
    '2024-01-01',
    ' 2024-01-01T10:00:00Z',
  ])('refuses %s', (v) => {
    expect(parseRfc3339(v)).toBeUndefined();
  });

  it('refuses offsets when utcOnly', () => {
    expect(parseRfc3339('2024-01-02T10:00:00+00:00', { utcOnly: true })).toBeUndefined();
    expect(parseRfc3339('2024-01-02T10:00:00Z', { utcOnly: true })).toBe(Date.UTC(2024, 0, 2, 10));
  });
});

describe('utcDateTimeMs', () => {
  it('takes years below 100 as written, not as 19xx', () => {
    expect(new Date(utcDateTimeMs(50, 1, 1, 0, 0, 0)!).getUTCFullYear()).toBe(50);
  });
});
