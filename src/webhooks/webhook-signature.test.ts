import { describe, expect, it } from 'vitest';
import { loadRecipe } from '../../test/support/webhook-receiver.ts';
import { receiverKey, webhookKey, webhookSignature } from './webhook-signature.ts';

/** The Standard Webhooks test vector (the spec's reference libraries all reproduce it). */
const VECTOR = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
};
const OTHER_SECRET = 'a-plain-secret-of-more-than-32-characters';

const headersOf = (id: string, timestamp: number, signature: string) => ({
  'webhook-id': id,
  'webhook-timestamp': String(timestamp),
  'webhook-signature': signature,
});

describe('webhook signing', () => {
  it('reproduces the Standard Webhooks test vector', () => {
    const { secret, id, timestamp, body } = VECTOR;
    expect(webhookSignature([webhookKey(secret)], id, timestamp, body)).toBe(VECTOR.signature);
  });

  it('signs with every secret while they rotate, space-separated, newest first', () => {
    const keys = [webhookKey(VECTOR.secret), webhookKey(OTHER_SECRET)];
    const header = webhookSignature(keys, VECTOR.id, VECTOR.timestamp, VECTOR.body);
    expect(header.split(' ')).toEqual([
      VECTOR.signature,
      webhookSignature([webhookKey(OTHER_SECRET)], VECTOR.id, VECTOR.timestamp, VECTOR.body),
    ]);
  });

  it('takes a plain secret as its UTF-8 bytes', () => {
    expect(webhookKey(OTHER_SECRET).toString('utf8')).toBe(OTHER_SECRET);
  });

  it('names a receiver by a hash that never contains its URL', () => {
    const url = 'https://user:hunter2-password@hooks.example.com/riskgate';
    expect(receiverKey(url)).toMatch(/^[0-9a-f]{16}$/);
    expect(receiverKey(url)).toBe(receiverKey(url));
    expect(receiverKey(url)).not.toBe(receiverKey('https://hooks.example.com/riskgate'));
  });
});

describe('the verification recipe of docs/webhooks.md', () => {
  const { id, timestamp, body } = VECTOR;
  const event = JSON.stringify({ id, type: 'lockout.created', at: '2026-11-25T00:00:00Z', data: {} });
  const signed = (secrets: string[], ts = timestamp, text = event) =>
    headersOf(id, ts, webhookSignature(secrets.map(webhookKey), id, ts, text));

  it('accepts the Standard Webhooks test vector (its body is not an event: it gets that far)', async () => {
    const verify = await loadRecipe();
    expect(() =>
      verify(
        VECTOR.secret,
        headersOf(id, timestamp, VECTOR.signature),
        Buffer.from(body),
        new Set(),
        timestamp,
      ),
    ).toThrow('the body is not the event webhook-id names');
  });

  it('accepts a delivery once, and a second one of the same webhook-id as already processed', async () => {
    const verify = await loadRecipe();
    const seen = new Set<string>();
    const headers = signed([VECTOR.secret]);
    expect(verify(VECTOR.secret, headers, Buffer.from(event), seen, timestamp)?.type).toBe('lockout.created');
    // A replay within the tolerance, or a redelivery: same id, nothing done again.
    expect(
      verify(
        VECTOR.secret,
        signed([VECTOR.secret], timestamp + 60),
        Buffer.from(event),
        seen,
        timestamp + 60,
      ),
    ).toBeNull();
  });

  it('refuses a timestamp more than 5 minutes away, either way', async () => {
    const verify = await loadRecipe();
    for (const skew of [-301, 301]) {
      expect(() =>
        verify(VECTOR.secret, signed([VECTOR.secret]), Buffer.from(event), new Set(), timestamp + skew),
      ).toThrow('not within 5 minutes');
    }
    expect(
      verify(VECTOR.secret, signed([VECTOR.secret]), Buffer.from(event), new Set(), timestamp + 300),
    ).not.toBeNull();
  });

  it('refuses a body changed by one byte, a wrong secret, a missing header', async () => {
    const verify = await loadRecipe();
    const tampered = Buffer.from(event.replace('lockout.created', 'lockout.ended!'));
    expect(() => verify(VECTOR.secret, signed([VECTOR.secret]), tampered, new Set(), timestamp)).toThrow(
      'no valid signature',
    );
    expect(() =>
      verify(OTHER_SECRET, signed([VECTOR.secret]), Buffer.from(event), new Set(), timestamp),
    ).toThrow('no valid signature');
    const { 'webhook-signature': _, ...unsigned } = signed([VECTOR.secret]);
    expect(() => verify(VECTOR.secret, unsigned, Buffer.from(event), new Set(), timestamp)).toThrow(
      'missing',
    );
  });

  it('keeps verifying with the old secret while riskgate signs with the new and the old', async () => {
    const verify = await loadRecipe();
    const headers = signed([OTHER_SECRET, VECTOR.secret]);
    expect(verify(VECTOR.secret, headers, Buffer.from(event), new Set(), timestamp)).not.toBeNull();
    expect(verify(OTHER_SECRET, headers, Buffer.from(event), new Set(), timestamp)).not.toBeNull();
  });
});
