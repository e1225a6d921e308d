import { base64url } from 'jose';
import { describe, expect, it } from 'vitest';
import { signCallbackBody, verifyCallbackSignature } from './jws-signature.ts';

const KEY = 'callback-key';
const BODY = '{"result":"success","user_id":"u1"}';
const VECTOR = 'eyJhbGciOiJIUzI1NiJ9..-byvIp2o4s-yuP8z7I-e1aL2gRu9tGlDuXPCjXt8kF4';

describe('callback JWS (CONTRACT §2)', () => {
  it('signs the contract vector', () => {
    expect(signCallbackBody(BODY, KEY)).toBe(VECTOR);
  });
  it('verifies the contract vector on the raw bytes', () => {
    expect(verifyCallbackSignature(VECTOR, Buffer.from(BODY), KEY)).toEqual({ ok: true });
  });
  it('refuses a tampered body, a wrong key and a missing header', () => {
    expect(verifyCallbackSignature(VECTOR, Buffer.from(BODY.replace('u1', 'u2')), KEY)).toEqual({
      ok: false,
      reason: 'MISMATCH',
    });
    expect(verifyCallbackSignature(VECTOR, Buffer.from(BODY), 'other-key').ok).toBe(false);
    expect(verifyCallbackSignature(undefined, Buffer.from(BODY), KEY)).toEqual({
      ok: false,
      reason: 'MISSING',
    });
  });
  it('refuses alg none and any alg but HS256', () => {
    const none = `${base64url.encode('{"alg":"none"}')}..`;
    expect(verifyCallbackSignature(none, Buffer.from(BODY), KEY).ok).toBe(false);
    const hs512 = `${base64url.encode('{"alg":"HS512"}')}..${VECTOR.split('..')[1]}`;
    expect(verifyCallbackSignature(hs512, Buffer.from(BODY), KEY)).toEqual({
      ok: false,
      reason: 'UNSUPPORTED_ALG',
    });
  });
  it('refuses an attached payload', () => {
    const [h, s] = VECTOR.split('..');
    const attached = `${h}.${base64url.encode(BODY)}.${s}`;
    expect(verifyCallbackSignature(attached, Buffer.from(BODY), KEY)).toEqual({
      ok: false,
      reason: 'MALFORMED',
    });
  });
});
