import { createHash, createHmac } from 'node:crypto';

/**
 * Signing webhooks the Standard Webhooks way (docs/webhooks.md): each delivery carries
 * `webhook-id` (the event's id, the same on every retry), `webhook-timestamp` (the attempt's Unix
 * seconds) and `webhook-signature`, one `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`
 * per secret, space-separated, so a receiver keeps verifying while its secret is rotated.
 */

/** The HMAC key of a secret: a `whsec_<base64>` secret's decoded bytes, any other its UTF-8 bytes. */
export function webhookKey(secret: string): Buffer {
  return secret.startsWith('whsec_') ? Buffer.from(secret.slice(6), 'base64') : Buffer.from(secret, 'utf8');
}

/**
 * The `webhook-signature` header of one delivery: `v1,<signature>` for each key, in order, joined
 * by a space. `timestampSec` is Unix seconds; `body` is the exact bytes sent.
 */
export function webhookSignature(
  keys: readonly Buffer[],
  id: string,
  timestampSec: number,
  body: string,
): string {
  const signed = `${id}.${timestampSec}.${body}`;
  return keys.map((key) => `v1,${createHmac('sha256', key).update(signed).digest('base64')}`).join(' ');
}

/**
 * The name a receiver has in the outbox and in logs: a hash of its URL (which may carry
 * credentials, so the URL itself is kept out of both). Stable across restarts and replicas
 * configured alike; 16 hex characters.
 */
export function receiverKey(url: string): string {
  return createHash('sha256').update(url).digest('hex').slice(0, 16);
}
