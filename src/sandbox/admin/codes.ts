import { randomInt } from 'node:crypto';

/** Codes the Admin API hands out: one-time codes, backup codes, activation codes. */

/**
 * Groups digits by 4 from the left, separated by spaces (docs/vendor-api.md#admin-resources): `1234 5678 90`.
 */
export function spaceDigits(digits: string): string {
  return digits.replace(/(\d{4})(?=\d)/g, '$1 ');
}

/** Removes the spaces a user may or may not type. */
export function unspaceDigits(code: string): string {
  return code.replace(/\s+/g, '');
}

/** `length` random decimal digits (leading zeros allowed). */
export function randomDigits(length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += String(randomInt(0, 10));
  return out;
}

const ACTIVATION_ALPHABET = 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789';

/** An activation code from an unambiguous alphabet (no 0/O, 1/I). */
export function randomActivationCode(length = 20): string {
  let out = '';
  for (let i = 0; i < length; i++) out += ACTIVATION_ALPHABET[randomInt(0, ACTIVATION_ALPHABET.length)];
  return out;
}
