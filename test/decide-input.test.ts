import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_DECIDE_BODY_BYTES } from '../src/decide/decide-request.ts';
import { CALLER_KEY, type Harness, startHarness } from './decide-harness.ts';
import { PATIENT_DEADLINE_MS, patientShippedPolicy } from './support/patient-policy.ts';

/** Bad input over real HTTP: each kind gets its status and an RFC 9457 body naming the field. */

let h: Harness;
beforeAll(async () => {
  // Patient timeouts: a hostile login's verdict is compared with a quiet one's, and a signal a busy
  // machine answers late (degraded) must not be what tells them apart.
  h = await startHarness({ policy: { yaml: patientShippedPolicy() }, deadlineMs: PATIENT_DEADLINE_MS });
});
afterAll(() => h?.stop());

const VALID = { accountId: 'alice', platform: 'browser', unitId: 'alice-web' };

async function expectProblem(
  answer: Awaited<ReturnType<Harness['decide']>>,
  status: number,
  code: string,
  field?: string,
) {
  expect(answer.status).toBe(status);
  expect(answer.headers.get('content-type')).toBe('application/problem+json');
  expect(answer.body).toMatchObject({ status, code, type: expect.stringMatching(/^urn:riskgate:problem:/) });
  expect(typeof answer.body.title).toBe('string');
  expect(typeof answer.body.detail).toBe('string');
  if (field !== undefined) expect(answer.body.field).toBe(field);
}

describe('POST /decide input', () => {
  it('answers 400 naming nothing more precise than the body for invalid JSON', async () => {
    await expectProblem(await h.decide('{"accountId": "alice",'), 400, 'RG_ERR_INVALID_INPUT', '');
  });

  it('answers 400 for a body that is JSON but not an object', async () => {
    for (const body of ['null', '[]', '42', '"alice"']) {
      await expectProblem(await h.decide(body), 400, 'RG_ERR_INVALID_INPUT');
    }
  });

  it('answers 400 naming a missing required field, saying it is required', async () => {
    const answer = await h.decide({ platform: 'browser' });
    await expectProblem(answer, 400, 'RG_ERR_INVALID_INPUT', 'accountId');
    expect(answer.body.detail).toBe('The request body is invalid: accountId is required');
    expect(answer.body.errors).toEqual([{ field: 'accountId', message: 'is required' }]);
  });

  it('says what a field must be, in the caller’s terms', async () => {
    const nested = await h.decide({ ...VALID, context: { plan: { nested: true } } });
    expect(nested.body.errors).toEqual([
      { field: 'context.plan', message: 'must be a string, number or boolean' },
    ]);
    const list = await h.decide({ ...VALID, context: { tags: ['a'] } });
    expect(list.body.errors).toEqual([
      { field: 'context.tags', message: 'must be a string, number or boolean' },
    ]);
    const wrongType = await h.decide({ ...VALID, userAgent: 42 });
    expect(wrongType.body.errors).toEqual([{ field: 'userAgent', message: 'must be a string' }]);
    const notObject = await h.decide('[]');
    expect(notObject.body.detail).toBe('The request body is invalid: must be an object');
  });

  it('answers 400 with a clear message for a number beyond the double range (1e400)', async () => {
    const answer = await h.decide('{"accountId":"alice","context":{"amount":1e400}}');
    await expectProblem(answer, 400, 'RG_ERR_INVALID_INPUT', 'context.amount');
    expect(answer.body.errors).toEqual([
      {
        field: 'context.amount',
        message: 'must be a finite number (this one is beyond the double-precision range)',
      },
    ]);
  });

  it('answers 400 naming a field of the wrong type', async () => {
    await expectProblem(await h.decide({ ...VALID, platform: 7 }), 400, 'RG_ERR_INVALID_INPUT', 'platform');
    await expectProblem(
      await h.decide({ ...VALID, context: { plan: { nested: true } } }),
      400,
      'RG_ERR_INVALID_INPUT',
      'context.plan',
    );
  });

  it('answers 400 naming an identifier that breaks the Trust Signals rules', async () => {
    await expectProblem(await h.decide({ accountId: 'al ice' }), 400, 'RG_ERR_INVALID_INPUT', 'accountId');
    await expectProblem(
      await h.decide({ accountId: 'a'.repeat(51) }),
      400,
      'RG_ERR_INVALID_INPUT',
      'accountId',
    );
    await expectProblem(
      await h.decide({ ...VALID, unitId: 'alice_web' }),
      400,
      'RG_ERR_INVALID_INPUT',
      'unitId',
    );
    await expectProblem(
      await h.decide({ ...VALID, baseline: { unitId: 'x'.repeat(1001) } }),
      400,
      'RG_ERR_INVALID_INPUT',
      'baseline.unitId',
    );
    await expectProblem(
      await h.decide({ ...VALID, verificationStatus: 'trusted' }),
      400,
      'RG_ERR_INVALID_INPUT',
      'verificationStatus',
    );
    await expectProblem(await h.decide({ ...VALID, ip: '999.1.1.1' }), 400, 'RG_ERR_INVALID_INPUT', 'ip');
  });

  it('answers 400 naming the identifier given out of order', async () => {
    await expectProblem(
      await h.decide({ accountId: 'alice', interactionId: 'alice-login-1', unitId: 'alice-web' }),
      400,
      'RG_ERR_INVALID_INPUT',
      'interactionId',
    );
    await expectProblem(
      await h.decide({ ...VALID, baseline: { verificationStatus: 'verified' } }),
      400,
      'RG_ERR_INVALID_INPUT',
      'baseline.verificationStatus',
    );
  });

  it('answers 400 naming an unknown field rather than ignoring it', async () => {
    await expectProblem(
      await h.decide({ ...VALID, unitID: 'alice-web' }),
      400,
      'RG_ERR_INVALID_INPUT',
      'unitID',
    );
  });

  it('answers 413 for a body over the limit, declared or not', async () => {
    const big = JSON.stringify({ ...VALID, userAgent: 'x'.repeat(MAX_DECIDE_BODY_BYTES) });
    await expectProblem(await h.decide(big), 413, 'RG_ERR_PAYLOAD_TOO_LARGE');
    // Chunked, with no content-length to refuse it by: the limit applies while reading.
    const chunk = new TextEncoder().encode(big.slice(0, 4096));
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent++ < 8) controller.enqueue(chunk);
        else controller.close();
      },
    });
    const res = await fetch(`${h.url}/decide`, {
      method: 'POST',
      headers: { authorization: `Bearer ${CALLER_KEY}`, 'content-type': 'application/json' },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ code: 'RG_ERR_PAYLOAD_TOO_LARGE' });
  });

  it('closes the connection after refusing a body it did not read (413, 401): the next request goes on a fresh one', async () => {
    const { connect } = await import('node:net');
    const port = new URL(h.url).port;
    /** Sends raw HTTP on one socket; resolves with everything received until the server closes it. */
    const exchange = (raw: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(Number(port), '127.0.0.1', () => socket.write(raw));
        let received = '';
        socket.on('data', (d: Buffer) => {
          received += d.toString();
        });
        socket.on('end', () => resolve(received));
        socket.on('error', reject);
        setTimeout(() => {
          socket.destroy();
          resolve(`${received}\n[still open after 3 s]`);
        }, 3000);
      });
    const chunk = 'x'.repeat(8192);
    const chunked = `${[
      'POST /decide HTTP/1.1',
      'host: riskgate',
      `authorization: Bearer ${CALLER_KEY}`,
      'content-type: application/json',
      'transfer-encoding: chunked',
      '',
      '',
    ].join('\r\n')}${`${(8192).toString(16)}\r\n${chunk}\r\n`.repeat(4)}`;
    const tooLarge = await exchange(chunked);
    expect(tooLarge).toMatch(/^HTTP\/1\.1 413 /);
    expect(tooLarge.toLowerCase()).toContain('connection: close');
    expect(tooLarge).not.toContain('[still open');
    const unauthenticated = await exchange(
      'POST /decide HTTP/1.1\r\nhost: riskgate\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{"accountId":',
    );
    expect(unauthenticated).toMatch(/^HTTP\/1\.1 401 /);
    expect(unauthenticated.toLowerCase()).toContain('connection: close');
    expect(unauthenticated).not.toContain('[still open');
    // A bad body read to its end keeps the connection: that caller can send the next one.
    const answer = await h.decide('{"accountId": 7}');
    expect(answer.status).toBe(400);
    expect(answer.headers.get('connection')).not.toBe('close');
  });

  it('answers 415 for a content type other than JSON', async () => {
    const answer = await h.decide(JSON.stringify(VALID), { headers: { 'content-type': 'text/plain' } });
    await expectProblem(answer, 415, 'RG_ERR_UNSUPPORTED_MEDIA_TYPE');
  });

  it('accepts JSON with a charset parameter', async () => {
    const answer = await h.decide(VALID, { headers: { 'content-type': 'application/json; charset=utf-8' } });
    expect(answer.status).toBe(200);
  });

  it('answers 401 without a caller key, and with a wrong one', async () => {
    for (const authorization of [undefined, 'Bearer not-a-valid-key-at-all', 'Basic dXNlcjpwYXNz']) {
      const res = await fetch(`${h.url}/decide`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(authorization === undefined ? {} : { authorization }),
        },
        body: JSON.stringify(VALID),
      });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
      expect(await res.json()).toMatchObject({ code: 'RG_ERR_UNAUTHENTICATED' });
    }
  });

  it('checks the caller before reading the body: no key and an oversized body is still 401', async () => {
    const res = await fetch(`${h.url}/decide`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: 'x'.repeat(MAX_DECIDE_BODY_BYTES * 2),
    });
    expect(res.status).toBe(401);
  });

  it('answers another method on /decide with a 405 problem and Allow: POST', async () => {
    for (const method of ['GET', 'PUT', 'DELETE']) {
      const res = await fetch(`${h.url}/decide`, {
        method,
        headers: { authorization: `Bearer ${CALLER_KEY}` },
      });
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toBe('POST');
      expect(res.headers.get('content-type')).toBe('application/problem+json');
      expect(await res.json()).toMatchObject({
        status: 405,
        code: 'RG_ERR_METHOD_NOT_ALLOWED',
        type: 'urn:riskgate:problem:method-not-allowed',
        detail: `/decide takes POST, not ${method}.`,
      });
    }
    const res = await fetch(`${h.url}/healthz`, { method: 'POST' });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('GET, HEAD');
  });

  it('answers an unknown route with a 404 problem', async () => {
    const res = await fetch(`${h.url}/decisionz`, { method: 'POST' });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ code: 'RG_ERR_NOT_FOUND' });
  });

  it('logs a decision for the one valid request only: refused ones never reach the fan-out', async () => {
    expect(h.lines.filter((l) => l.kind === 'decision')).toHaveLength(1);
  });

  it('decides a user agent or context string carrying U+0000, a C1 control or a lone surrogate, never refusing it', async () => {
    // The end user's text: a 400 would hand a hostile browser a way around the gate (README, "Endpoints": text
    // riskgate keeps); it is kept escaped in the decision line (test/unstorable-input.test.ts).
    const quiet = await h.decide(VALID);
    const hostile = await h.decide({
      ...VALID,
      userAgent: 'Mozilla/5.0\u0000\u0085\ud800',
      context: { referrer: 'x\u0000y' },
    });
    expect(hostile.status).toBe(200);
    expect(hostile.body.verdict).toBe(quiet.body.verdict);
  });

  it('answers 400 naming an identifier carrying U+0000', async () => {
    await expectProblem(
      await h.decide({ ...VALID, unitId: 'alice\u0000web' }),
      400,
      'RG_ERR_INVALID_INPUT',
      'unitId',
    );
    await expectProblem(
      await h.decide({ ...VALID, userId: 'u\u0000' }),
      400,
      'RG_ERR_INVALID_INPUT',
      'userId',
    );
  });
});
