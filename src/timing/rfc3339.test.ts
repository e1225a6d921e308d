import { describe, expect, it } from 'vitest';
import { parseIso8601Ns, parseRfc3339, parseRfc3339Utc, rfc3339Schema } from './rfc3339.ts';

describe('parseRfc3339Utc', () => {
  it('reads UTC timestamps with or without a fraction, T and Z in either case', () => {
    expect(parseRfc3339Utc('2024-01-02T10:00:00Z')).toBe(Date.UTC(2024, 0, 2, 10));
    expect(parseRfc3339Utc('2024-01-02T10:00:00.25Z')).toBe(Date.UTC(2024, 0, 2, 10, 0, 0, 250));
    expect(parseRfc3339Utc('2024-01-02T10:00:00.123456789Z')).toBe(Date.UTC(2024, 0, 2, 10, 0, 0, 123));
    expect(parseRfc3339Utc('2024-01-02t10:00:00z')).toBe(Date.UTC(2024, 0, 2, 10));
    expect(parseRfc3339Utc('2024-02-29T23:59:59Z')).toBe(Date.UTC(2024, 1, 29, 23, 59, 59)); // leap year
  });

  it('counts days as Date does across the centuries (2000 a leap year, 1900 not, years before 100)', () => {
    expect(parseRfc3339Utc('2000-02-29T00:00:00Z')).toBe(Date.UTC(2000, 1, 29));
    expect(parseRfc3339Utc('1900-02-29T00:00:00Z')).toBeUndefined();
    expect(parseRfc3339Utc('1969-12-31T23:59:59Z')).toBe(-1000);
    expect(parseRfc3339Utc('0042-03-01T00:00:00Z')).toBe(Date.parse('0042-03-01T00:00:00Z'));
    expect(parseRfc3339Utc('0000-02-29T00:00:00Z')).toBe(Date.parse('0000-02-29T00:00:00Z'));
    expect(parseRfc3339Utc('9999-12-31T23:59:59Z')).toBe(Date.parse('9999-12-31T23:59:59Z'));
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
    '2024-01-01T10:00:00 01:00',
    '2024-01-01 10:00:00+01:00',
    '2024-01-01T10:00:00',
    '2024-01-02-01:00',
    '2024-01-01',
  ])('refuses %s', (v) => {
    expect(parseRfc3339(v)).toBeUndefined();
  });
});

describe('parseIso8601Ns (the Log API form)', () => {
  const at = BigInt(Date.UTC(2026, 0, 15, 11)) * 1_000_000n;

  it('reads RFC 3339 and the Log API looser forms as the same instant', () => {
    for (const v of [
      '2026-01-15T11:00:00Z',
      '2026-01-15t11:00:00z',
      '2026-01-15T11:00:00',
      '2026-01-15 11:00:00',
      '2026-01-15T12:00:00+01:00',
      '2026-01-15T12:00:00+0100',
      '2026-01-15T12:00:00 01:00',
      '2026-01-15T10:00:00-01:00',
    ]) {
      expect(parseIso8601Ns(v), v).toBe(at);
    }
  });

  it('keeps nanoseconds exactly', () => {
    expect(parseIso8601Ns('2026-01-15T11:00:00.000000001Z')).toBe(at + 1n);
    expect(parseIso8601Ns('2026-01-15T12:00:00.5+01:00')).toBe(at + 500_000_000n);
  });

  it.each([
    '',
    'yesterday',
    '2026-01-15',
    '2026-02-29T00:00:00Z',
    '2026-01-15T11:00:60Z',
    '2026-01-15T11:00:00+25:00',
  ])('refuses %s', (v) => {
    expect(parseIso8601Ns(v)).toBeUndefined();
  });
});

describe('rfc3339Schema', () => {
  it('accepts RFC 3339 with Z or an offset', () => {
    for (const v of ['2024-01-02T10:00:00Z', '2024-01-02T10:00:00.123456789+05:30', '2024-01-02t10:00:00z']) {
      expect(rfc3339Schema.safeParse(v).success, v).toBe(true);
    }
  });

  it('refuses the empty string, a missing offset and impossible dates, naming why', () => {
    for (const v of ['', '2024-01-02T10:00:00', '2024-02-30T10:00:00Z', '2024-01-02', 42]) {
      const r = rfc3339Schema.safeParse(v);
      expect(r.success, String(v)).toBe(false);
    }
    expect(rfc3339Schema.safeParse('soon').error?.issues[0]?.message).toBe(
      'must be an RFC 3339 timestamp of a real date and time',
    );
  });
});

describe('the timestamp scanner', () => {
  // The shape as a regular expression: the scanner must accept exactly what it accepts.
  const SHAPE =
    /^(\d{4}-\d{2}-\d{2})([Tt ])(\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+\- ])(\d{2})(:?)(\d{2}))?$/;
  const VALID = [
    '2024-01-02T10:00:00Z',
    '2024-02-29t23:59:59.123456789z',
    '2024-01-02T11:30:00+01:30',
    '2024-01-02 09:00:00-0100',
    '2024-01-02T10:00:00.5 01:00',
    '2024-12-31T23:59:59',
  ];
  const ALPHABET = '0123456789:-+ .TtZz٣x';

  /** Deterministic mutations of the valid forms: a character replaced, inserted or removed. */
  function* mutations(): Generator<string> {
    let seed = 7;
    const next = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed % n;
    };
    const mutate = (v: string) => {
      const at = next(v.length + 1);
      const ch = ALPHABET[next(ALPHABET.length)]!;
      const how = next(3);
      if (how === 0) return v.slice(0, at) + ch + v.slice(at + 1);
      return how === 1 ? v.slice(0, at) + ch + v.slice(at) : v.slice(0, at) + v.slice(at + 1);
    };
    for (const v of VALID) {
      yield v;
      for (let k = 0; k < 3000; k++) yield k % 2 === 0 ? mutate(v) : mutate(mutate(v));
    }
  }

  it('accepts the shape the regular expression describes, and nothing else, in every form', () => {
    let accepted = 0;
    for (const text of mutations()) {
      const iso = parseIso8601Ns(text);
      // The ISO 8601 form takes every shape; what it then refuses is a field out of range.
      if (!SHAPE.test(text)) expect(iso, text).toBeUndefined();
      if (iso !== undefined) accepted++;
      const m = SHAPE.exec(text);
      const rfc = m !== null && /[Tt]/.test(m[2]!) && (m[5] !== undefined || (m[8] === ':' && m[6] !== ' '));
      if (!rfc) expect(parseRfc3339(text), text).toBeUndefined();
      else if (iso !== undefined) {
        // Milliseconds are the nanoseconds floored (the fraction truncated, before 1970 too).
        const ms = iso / 1_000_000n - (iso % 1_000_000n < 0n ? 1n : 0n);
        expect(BigInt(parseRfc3339(text)!), text).toBe(ms);
      }
    }
    expect(accepted).toBeGreaterThan(100);
  });
});
