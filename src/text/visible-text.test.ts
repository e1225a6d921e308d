import { describe, expect, it } from 'vitest';
import { visibleText } from './visible-text.ts';

describe('visibleText', () => {
  it('names a right-to-left override where it stood, so what follows reads in the order sent', () => {
    expect(visibleText('photo\u202egpj.exe')).toBe('photo⟨U+202E⟩gpj.exe');
  });

  it('names bidi isolates, marks and C0/C1 controls, and keeps tab and line breaks', () => {
    expect(visibleText('a\u2066b\u2069c\u200fd\u0007e\u0085f\tg\nh')).toBe(
      'a⟨U+2066⟩b⟨U+2069⟩c⟨U+200F⟩d⟨U+0007⟩e⟨U+0085⟩f\tg\nh',
    );
  });

  it('returns plain text unchanged, right-to-left letters included', () => {
    const text = 'Mozilla/5.0 שלום مرحبا';
    expect(visibleText(text)).toBe(text);
  });
});
