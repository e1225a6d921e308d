import { describe, expect, it } from 'vitest';
import { csvField } from './decisions-export.ts';
import { chartFrame } from './decisions-page.tsx';

describe('a CSV field of an export', () => {
  it('quotes a quote, a comma or a line break, doubling the quotes', () => {
    expect(csvField('a,b')).toBe('"a,b"');
    expect(csvField('say "hi"')).toBe('"say ""hi"""');
    expect(csvField('two\nlines')).toBe('"two\nlines"');
    expect(csvField('plain')).toBe('plain');
  });

  it('defuses what a spreadsheet would run as a formula, and leaves numbers and blanks alone', () => {
    expect(csvField('=HYPERLINK("http://x","y")')).toBe('"\'=HYPERLINK(""http://x"",""y"")"');
    for (const lead of ['+', '-', '@', '\t', '\r'])
      expect(
        csvField(`${lead}1`).startsWith(`'${lead}`) || csvField(`${lead}1`).startsWith(`"'${lead}`),
      ).toBe(true);
    expect(csvField(-3)).toBe('-3');
    expect(csvField(undefined)).toBe('');
    expect(csvField(false)).toBe('false');
  });
});

describe('the decisions-over-time chart', () => {
  it('picks the smallest slice that fits the range in 60, starting on a whole slice', () => {
    const to = Date.parse('2026-11-28T17:47:00Z');
    const hour = 3_600_000;
    expect(chartFrame(to - hour, to).bucketMs).toBe(5 * 60_000);
    expect(chartFrame(to - 24 * hour, to).bucketMs).toBe(hour);
    expect(chartFrame(to - 7 * 24 * hour, to).bucketMs).toBe(3 * hour);
    expect(chartFrame(to - 30 * 24 * hour, to).bucketMs).toBe(12 * hour);
    const year = chartFrame(to - 365 * 24 * hour, to);
    expect(year.bucketMs).toBe(24 * hour);
    // Never more than 60 slices: a long range shows its last 60 days.
    expect((to - year.fromMs) / year.bucketMs).toBeLessThanOrEqual(61);
    expect(year.fromMs % year.bucketMs).toBe(0);
  });
});
