import { createHmac } from 'node:crypto';
import { base64url } from 'jose';
import { describe, expect, it } from 'vitest';
import { signatureRespellings as respellings } from '../../test/support/signature-respellings.ts';
import { signCallbackBody, verifyCallbackSignature } from './jws-signature.ts';

const KEY = 'callback-key';
const BODY = '{"result":"success","user_id":"u1"}';
const VECTOR = 'eyJhbGciOiJIUzI1NiJ9..-byvIp2o4s-yuP8z7I-e1aL2gRu9tGlDuXPCjXt8kF4';

describe('callback JWS (docs/vendor-api.md#callbacks)', () => {
  it('signs the contract vector', () => {
    expect(signCallbackBody(BODY, KEY)).toBe(VECTOR);
  });
  it('verifies the contract vector on the raw bytes', async () => {
    expect(await verifyCallbackSignature(VECTOR, Buffer.from(BODY), KEY)).toMatchObject({ ok: true });
  });
  it('refuses a tampered body, a wrong key and a missing header', async () => {
    expect(await verifyCallbackSignature(VECTOR, Buffer.from(BODY.replace('u1', 'u2')), KEY)).toEqual({
      ok: false,
      reason: 'MISMATCH',
    });
    expect(await verifyCallbackSignature(VECTOR, Buffer.from(BODY), 'other-key')).toEqual({
      ok: false,
      reason: 'MISMATCH',
    });
    expect(await verifyCallbackSignature(undefined, Buffer.from(BODY), KEY)).toEqual({
      ok: false,
      reason: 'MISSING',
    });
  });
  it('refuses alg none and any alg but HS256', async () => {
    const none = `${base64url.encode('{"alg":"none"}')}..`;
    expect((await verifyCallbackSignature(none, Buffer.from(BODY), KEY)).ok).toBe(false);
    const noneSigned = `${base64url.encode('{"alg":"none"}')}..${VECTOR.split('..')[1]}`;
    expect(await verifyCallbackSignature(noneSigned, Buffer.from(BODY), KEY)).toEqual({
      ok: false,
      reason: 'UNSUPPORTED_ALG',
    });
    const hs512 = `${base64url.encode('{"alg":"HS512"}')}..${VECTOR.split('..')[1]}`;
    expect(await verifyCallbackSignature(hs512, Buffer.from(BODY), KEY)).toEqual({
      ok: false,
      reason: 'UNSUPPORTED_ALG',
    });
  });
  it('refuses an attached payload', async () => {
    const [h, s] = VECTOR.split('..');
    const attached = `${h}.${base64url.encode(BODY)}.${s}`;
    expect(await verifyCallbackSignature(attached, Buffer.from(BODY), KEY)).toEqual({
      ok: false,
      reason: 'MALFORMED',
    });
  });
  it('refuses a header that is not base64url JSON', async () => {
    const sig = VECTOR.split('..')[1];
    expect(await verifyCallbackSignature(`not-json..${sig}`, Buffer.from(BODY), KEY)).toEqual({
      ok: false,
      reason: 'MALFORMED',
    });
  });
  it('refuses a critical header extension it does not understand, even correctly signed (RFC 7515 §4.1.11)', async () => {
    const crit = base64url.encode('{"alg":"HS256","crit":["x-unknown"],"x-unknown":1}');
    const mac = createHmac('sha256', KEY)
      .update(`${crit}.${base64url.encode(BODY)}`)
      .digest();
    const value = `${crit}..${base64url.encode(mac)}`;
    expect(await verifyCallbackSignature(value, Buffer.from(BODY), KEY)).toEqual({
      ok: false,
      reason: 'MALFORMED',
    });
  });
  it('is asynchronous (WebCrypto through jose): the verdict is a promise', async () => {
    const pending = verifyCallbackSignature(VECTOR, Buffer.from(BODY), KEY);
    expect(pending).toBeInstanceOf(Promise);
    expect(await pending).toMatchObject({ ok: true });
  });
  it('gives the signature as bytes, the same for every spelling jose accepts, and says which spelling is canonical', async () => {
    const [header, signature] = VECTOR.split('..') as [string, string];
    const canonical = await verifyCallbackSignature(VECTOR, Buffer.from(BODY), KEY);
    expect(canonical).toMatchObject({ ok: true, canonical: true });
    for (const respelled of respellings(signature)) {
      const r = await verifyCallbackSignature(`${header}..${respelled}`, Buffer.from(BODY), KEY);
      // jose verifies them all (lenient base64url); riskgate sees one signature and a bad spelling.
      expect(r, respelled).toMatchObject({ ok: true, canonical: false });
      if (r.ok && canonical.ok) expect(Buffer.from(r.signature)).toEqual(Buffer.from(canonical.signature));
    }
  });
});
