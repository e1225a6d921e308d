import { describe, expect, it } from 'vitest';
import { csvField } from './decisions-export.ts';

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
