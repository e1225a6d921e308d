import { describe, expect, it } from 'vitest';
import { parseRfc3339 } from './rfc3339.ts';

describe('parseRfc3339 (with offsets)', () => {
  it('reads UTC and offset forms as the same instant', () => {
    const expected = Date.UTC(2024, 0, 2, 10, 0, 0);
    for (const v of [
      '2024-01-02T10:00:00Z',
      '2024-01-02t10:00:00z',
      '2024-01-02T11:30:00+01:30',
      '2024-01-02T09:00:00-01:00',
      '2024-01-02T10:00:00+00:00',
    ]) {
      expect(parseRfc3339(v), v).toBe(expected);
    }
    expect(parseRfc3339('2024-01-02T11:00:00.5+01:00')).toBe(expected + 500);
  });

  it('accepts a leap day', () => {
    expect(parseRfc3339('2024-02-29T00:30:00+01:00')).toBe(Date.UTC(2024, 1, 28, 23, 30));
  });

  it.each([
    '2024-02-30T00:00:00Z',
    '2024-02-30T00:00:00+01:00',
    '2023-02-29T00:00:00-05:00',
    '2024-04-31T00:00:00Z',
    '2024-01-01T24:00:00+01:00',
    '2024-01-01T23:59:60Z',
    '2024-01-01T10:00:00+24:00',
    '2024-01-01T10:00:00+01:60',
    '2024-01-01T10:00:00+0100',
    '2024-01-01T10:00:00',
    '2024-01-02-01:00',
    '2024-01-01',
  ])('refuses %s', (v) => {
    expect(parseRfc3339(v)).toBeUndefined();
  });
});
