import { describe, expect, it } from 'vitest';
import { randomActivationCode, randomDigits, spaceDigits, unspaceDigits } from './codes.ts';

describe('spaced digits', () => {
  it('groups by four from the left', () => {
    expect(spaceDigits('1234567890')).toBe('1234 5678 90');
    expect(spaceDigits('12345678')).toBe('1234 5678');
    expect(spaceDigits('123456')).toBe('1234 56');
    expect(spaceDigits('1234')).toBe('1234');
  });
  it('round-trips through unspaceDigits', () => {
    const d = randomDigits(17);
    expect(d).toMatch(/^\d{17}$/);
    expect(unspaceDigits(spaceDigits(d))).toBe(d);
  });
  it('makes activation codes of the requested length without ambiguous characters', () => {
    const code = randomActivationCode(24);
    expect(code).toHaveLength(24);
    expect(code).not.toMatch(/[01OI]/);
  });
});
