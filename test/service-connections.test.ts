import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { type Harness, startHarness } from './decide-harness.ts';
import { eventually } from './support/eventually.ts';

/**
 * Connection exhaustion (issue 15, item 3), scaled down: idle unauthenticated connections that
 * never send a byte used to stay open for over a minute each, until 20,000 of them filled the
 * file-descriptor table (EMFILE) and new clients, /healthz and a policy reload all failed. Now past
 * RISKGATE_MAX_CONNECTIONS new connections are refused at once, and a connection that has not sent
 * its headers within RISKGATE_HEADERS_TIMEOUT_MS is closed: a new client is served again soon.
 * Issue 22, item 11: a client holding every connection as an idle keep-alive (requests answered,
 * sockets kept) reset every new client; now the longest idle one makes room.
 */

let h: Harness;
beforeAll(async () => {
  h = await startHarness({
    env: {
      RISKGATE_MAX_CONNECTIONS: '64',
      RISKGATE_HEADERS_TIMEOUT_MS: '500',
      RISKGATE_REQUEST_TIMEOUT_MS: '1000',
    },
  });
});
afterAll(() => h.stop());

describe('idle connections', () => {
  it('cannot take every connection: the idle ones are closed and a new client is served', async () => {
    const port = Number(new URL(h.url).port);
    const sockets: Socket[] = [];
    let closedByServer = 0;
    await Promise.all(
      Array.from(
        { length: 200 },
        () =>
          new Promise<void>((resolve) => {
            const s = connect(port, '127.0.0.1', () => resolve());
            // Flowing, so the server's FIN is read and the socket closes: a paused socket that is
            // never read never sees its end (the test then counted only the refused ones, at times).
            s.resume();
            s.on('close', () => {
              closedByServer++;
            });
            s.on('error', () => resolve());
            sockets.push(s);
          }),
      ),
    );
    try {
      // Within the headers timeout plus one check interval, every idle connection is gone...
      await eventually(() => closedByServer === 200, {
        timeoutMs: 4000,
        what: 'every idle connection closed',
      });
      // ...and a new client gets its decision, and the probes answer.
      const { status } = await h.decide(demoRequest('alice', undefined));
      expect(status).toBe(200);
      expect((await fetch(`${h.url}/healthz`)).status).toBe(200);
    } finally {
      for (const s of sockets) s.destroy();
    }
  });
});

/** Opens a keep-alive connection and has `GET /healthz` answered on it; the connection stays open. */
function idleKeepAlive(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => s.write('GET /healthz HTTP/1.1\r\nHost: riskgate\r\n\r\n'));
    let answer = '';
    s.on('data', (chunk) => {
      answer += chunk.toString('latin1');
      // The body is short and comes in the same write as the headers, or right after.
      if (/\r\n\r\n[\s\S]+/.test(answer)) resolve(s);
    });
    s.on('error', reject);
    s.on('close', () => reject(new Error('closed before its answer')));
  });
}

describe('idle keep-alive connections of one client at the connection limit', () => {
  it('make room for a new client, the longest idle first, instead of resetting it', async () => {
    const port = Number(new URL(h.url).port);
    const held: Socket[] = [];
    try {
      // Every connection the limit allows (64), one after another so that all are accepted.
      for (let i = 0; i < 64; i++) held.push(await idleKeepAlive(port));
      const closed: number[] = [];
      for (const [i, s] of held.entries()) s.on('close', () => closed.push(i));
      // A new client on a connection of its own (no pooled one) is answered...
      const status = await new Promise<number>((resolve, reject) => {
        const req = request({ port, host: '127.0.0.1', path: '/healthz', agent: false }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        });
        req.on('error', reject);
        req.end();
      });
      expect(status).toBe(200);
      // ...and the connection that made room was the longest idle of the first client's.
      await eventually(() => closed.length > 0, { what: 'a connection closed to make room' });
      expect(closed[0]).toBe(0);
    } finally {
      for (const s of held) s.destroy();
    }
  });
});
