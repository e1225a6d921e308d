const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/**
 * Other spellings of one HS256 signature (32 bytes, 43 base64url characters) that a lenient
 * decoder such as jose's reads as the same bytes: with a `=` pad, and with the last character's two
 * unused low bits set.
 */
export function signatureRespellings(signature: string): string[] {
  const last = ALPHABET.indexOf(signature.at(-1)!);
  return [`${signature}=`, ...[1, 2, 3].map((bits) => signature.slice(0, -1) + ALPHABET[last | bits])];
}
