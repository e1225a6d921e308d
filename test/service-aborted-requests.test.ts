import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { CALLER_KEY, type Harness, startHarness } from './decide-harness.ts';

/**
 * Issue 22, item 11: a client that sent a /decide request's headers and part of its body, then
 * reset the connection, was logged as an unhandled error (with the error's text, as a bug would
 * be). A caller hanging up is the caller's business: at most an info line, no error, and riskgate
 * goes on answering.
 */

let h: Harness;
let stopped = false;
const rejections: unknown[] = [];
const onRejection = (reason: unknown) => rejections.push(reason);
beforeAll(async () => {
  process.on('unhandledRejection', onRejection);
  h = await startHarness();
});
afterAll(async () => {
  process.off('unhandledRejection', onRejection);
  if (!stopped) await h?.stop();
});

/** Sends the headers and `sent` bytes of a `length`-byte body, then resets the connection. */
function abortMidBody(path: string, length: number, sent: number): Promise<void> {
  const port = Number(new URL(h.url).port);
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1', () => {
      s.write(
        `POST ${path} HTTP/1.1\r\nHost: riskgate\r\nAuthorization: Bearer ${CALLER_KEY}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${length}\r\n\r\n${'{"accountId":"'.padEnd(sent, 'a')}`,
        // Reset (RST), after the server has had a moment to start reading the body.
        () => setTimeout(() => s.resetAndDestroy(), 50),
      );
    });
    s.on('error', () => {});
    s.on('close', () => resolve());
  });
}

describe('a client that resets mid-body', () => {
  it('is not logged as an error, and riskgate answers the next caller', async () => {
    for (let i = 0; i < 5; i++) await abortMidBody('/decide', 4000, 200);
    // Chunked too: the body is read through hono's counting reader then.
    const port = Number(new URL(h.url).port);
    await new Promise<void>((resolve) => {
      const s = connect(port, '127.0.0.1', () => {
        s.write(
          `POST /decide HTTP/1.1\r\nHost: riskgate\r\nAuthorization: Bearer ${CALLER_KEY}\r\n` +
            'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{"accountId":"aa\r\n',
          () => setTimeout(() => s.resetAndDestroy(), 50),
        );
      });
      s.on('error', () => {});
      s.on('close', () => resolve());
    });
    // The server sees the reset on its next turns; an answer to a later caller comes after them.
    const { status } = await h.decide(demoRequest('alice', undefined));
    expect(status).toBe(200);
    // The drain: a stop closes every connection and runs what the resets left behind, so a late
    // error line or rejection is in by the time it resolves.
    stopped = true;
    await h.stop();
    const errors = h.serviceLog.filter((l) => l.level === 'error');
    expect(errors).toEqual([]);
    expect(rejections).toEqual([]);
  });
});
