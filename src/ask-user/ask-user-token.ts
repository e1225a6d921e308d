import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * The "was this you?" token (docs/ask-user.md): `<id>.<mac>`, both base64url. The id is 16 random
 * bytes (128 bits: not guessable) and says nothing: the decision, the user and the verdict are in
 * the control database's row, found by the id's SHA-256 (a copy of the table gives no live link).
 * The mac is HMAC-SHA256 of the id under RISKGATE_ASK_USER_SECRET: a changed token is refused
 * before any read of the database. Single use and expiry are the row's (src/ask-user/ask-user-store.ts).
 */

/** Random bytes of a token's id. */
export const TOKEN_ID_BYTES = 16;
const MAC_BYTES = 32;
/** Longest string that may be a token; anything longer is refused unread. */
export const MAX_TOKEN_CHARS = 128;

const ID_CHARS = Math.ceil((TOKEN_ID_BYTES * 4) / 3);
const MAC_CHARS = Math.ceil((MAC_BYTES * 4) / 3);
const TOKEN_SHAPE = new RegExp(`^[A-Za-z0-9_-]{${ID_CHARS}}\\.[A-Za-z0-9_-]{${MAC_CHARS}}$`);

/** Domain separation: a mac of this purpose is no other HMAC riskgate computes with the same key. */
const PURPOSE = 'riskgate ask-user token v1\0';

/** The signing key (`secret`'s UTF-8 bytes); kept in a closure, never logged. */
export interface TokenCodec {
  /** A new token and the key of its row (the id's SHA-256, hex). */
  issue(): { token: string; key: string };
  /** The key of `token`'s row, or undefined when it is not one this key signed (changed, truncated, foreign). */
  verify(token: string): string | undefined;
}

export function tokenCodec(secret: string): TokenCodec {
  const key = Buffer.from(secret, 'utf8');
  const macOf = (id: Buffer) => createHmac('sha256', key).update(PURPOSE).update(id).digest();
  return {
    issue() {
      const id = randomBytes(TOKEN_ID_BYTES);
      return { token: `${id.toString('base64url')}.${macOf(id).toString('base64url')}`, key: rowKey(id) };
    },
    verify(token) {
      if (token.length > MAX_TOKEN_CHARS || !TOKEN_SHAPE.test(token)) return undefined;
      const [idText, macText] = token.split('.') as [string, string];
      const id = Buffer.from(idText, 'base64url');
      const mac = Buffer.from(macText, 'base64url');
      // Canonical encodings only: a token with other trailing bits is another string, refused.
      if (id.toString('base64url') !== idText || mac.toString('base64url') !== macText) return undefined;
      if (id.length !== TOKEN_ID_BYTES || mac.length !== MAC_BYTES) return undefined;
      return timingSafeEqual(mac, macOf(id)) ? rowKey(id) : undefined;
    },
  };
}

function rowKey(id: Buffer): string {
  return createHash('sha256').update(id).digest('hex');
}
