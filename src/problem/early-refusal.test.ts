import { describe, expect, it } from 'vitest';
import { MAX_DECIDE_BODY_BYTES } from '../decide/decide-request.ts';
import { refusalClosesConnection, SMALL_REFUSED_BODY_BYTES } from './early-refusal.ts';

describe('refusalClosesConnection', () => {
  it('keeps a shed decision’s connection whatever its body, up to the largest /decide body', () => {
    expect(SMALL_REFUSED_BODY_BYTES).toBe(MAX_DECIDE_BODY_BYTES);
    expect(refusalClosesConnection(503, String(MAX_DECIDE_BODY_BYTES), undefined)).toBe(false);
    expect(refusalClosesConnection(503, String(MAX_DECIDE_BODY_BYTES + 1), undefined)).toBe(true);
  });

  it('closes a refused connection whose body is unread (chunked, or any early refusal but 503)', () => {
    expect(refusalClosesConnection(503, undefined, 'chunked')).toBe(true);
    expect(refusalClosesConnection(401, '10', undefined)).toBe(true);
    expect(refusalClosesConnection(401, undefined, undefined)).toBe(false);
    expect(refusalClosesConnection(200, '10', undefined)).toBe(false);
  });

  it('never closes below 400 (the app skips reading the request headers for those answers)', () => {
    for (let status = 100; status < 400; status++) {
      expect(refusalClosesConnection(status, '10', 'chunked')).toBe(false);
    }
  });
});
