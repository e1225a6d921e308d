import { describe, expect, it } from 'vitest';
import { parseRfc3339Utc } from './rfc3339.ts';

describe('parseRfc3339Utc', () => {
  it('reads UTC timestamps with or without a fraction, T and Z in either case', () => {
    expect(parseRfc3339Utc('2024-01-02T10:00:00Z')).toBe(Date.UTC(2024, 0, 2, 10));
    expect(parseRfc3339Utc('2024-01-02T10:00:00.25Z')).toBe(Date.UTC(2024, 0, 2, 10, 0, 0, 250));
    expect(parseRfc3339Utc('2024-01-02T10:00:00.123456789Z')).toBe(Date.UTC(2024, 0, 2, 10, 0, 0, 123));
    expect(parseRfc3339Utc('2024-01-02t10:00:00z')).toBe(Date.UTC(2024, 0, 2, 10));
    expect(parseRfc3339Utc('2024-02-29T23:59:59Z')).toBe(Date.UTC(2024, 1, 29, 23, 59, 59)); // leap year
  });

  it('refuses dates and times that do not exist instead of rolling them over', () => {
    for (const impossible of [
      '2024-02-30T00:00:00Z',
      '2023-02-29T00:00:00Z',
      '2024-04-31T00:00:00Z',
      '2024-13-01T00:00:00Z',
      '2024-00-10T00:00:00Z',
      '2024-01-00T00:00:00Z',
      '2024-01-01T24:00:00Z',
      '2024-01-01T23:60:00Z',
      '2024-12-31T23:59:60Z',
    ]) {
      expect(parseRfc3339Utc(impossible), impossible).toBeUndefined();
    }
  });

  it('refuses offsets, missing parts and other formats', () => {
    for (const bad of [
      '2024-01-02T10:00:00+01:00',
      '2024-01-02T10:00:00',
      '2024-01-02',
      '2024-01-02 10:00:00Z',
      '2024-01-02T10:00Z',
      '2024-01-02T10:00:00.Z',
      '2024-01-02T10:00:00.1234567890Z',
      'yesterday',
      '',
    ]) {
      expect(parseRfc3339Utc(bad), bad).toBeUndefined();
    }
  });
});
