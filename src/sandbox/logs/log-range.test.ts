import { describe, expect, it } from 'vitest';
import { formatCreatedAt, parseLogTimestamp, resolveLogRange } from './log-range.ts';

const NS = (iso: string) => BigInt(Date.parse(iso)) * 1_000_000n;

describe('parseLogTimestamp', () => {
  it('reads the four formats as the same instant', () => {
    const expected = NS('2026-01-15T11:00:00Z');
    for (const v of [
      '1768474800',
      '2026-01-15T11:00:00',
      '2026-01-15T11:00:00Z',
      '2026-01-15T12:00:00+01:00',
      '2026-01-15T10:00:00-01:00',
      '2026-01-15T12:00:00 01:00',
      '2026-01-15T12:00:00+0100',
    ]) {
      expect(parseLogTimestamp(v), v).toBe(expected);
    }
  });
  it('keeps nanoseconds', () => {
    expect(parseLogTimestamp('2026-01-15T11:00:00.000000001Z')).toBe(NS('2026-01-15T11:00:00Z') + 1n);
    expect(parseLogTimestamp('2026-01-15T11:00:00.5Z')).toBe(NS('2026-01-15T11:00:00Z') + 500_000_000n);
  });
  it('refuses what is not a timestamp', () => {
    for (const v of [
      '',
      'now',
      '2026-01-15',
      '2026-02-29T00:00:00Z',
      '2026-01-15T11:00:60Z',
      '-5',
      '2026-01-15T11:00:00+25:00',
    ]) {
      expect(parseLogTimestamp(v), v).toBeUndefined();
    }
  });
});

describe('resolveLogRange', () => {
  const now = Date.parse('2026-01-15T12:00:00Z');
  it('defaults to the minute ending one minute ago', () => {
    expect(resolveLogRange({}, now)).toEqual({
      startNs: NS('2026-01-15T11:58:00Z'),
      endNs: NS('2026-01-15T11:59:00Z'),
    });
  });
  it('applies start default relative to an explicit end', () => {
    expect(resolveLogRange({ end: '2026-01-15T11:00:00Z' }, now).startNs).toBe(NS('2026-01-15T10:59:00Z'));
  });
});

describe('formatCreatedAt', () => {
  it('writes nanosecond or second precision in UTC', () => {
    const at = NS('2026-01-15T11:00:00.123Z') + 456_789n;
    expect(formatCreatedAt(at, false)).toBe('2026-01-15T11:00:00.123456789Z');
    expect(formatCreatedAt(at, true)).toBe('2026-01-15T11:00:00Z');
  });
});
