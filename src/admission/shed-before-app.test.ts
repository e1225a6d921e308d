import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMetrics } from '../observability/metrics.ts';
import { AdmissionControl } from './admission-control.ts';
import { shedBeforeApp } from './shed-before-app.ts';

/** The refusal written from the node:http listener, over a real socket. */

let server: Server;
let port: number;
let reachedApp = 0;
const metrics = createMetrics({ runtime: false });

beforeAll(async () => {
  const admission = new AdmissionControl({ maxInFlight: 1, deadlineMs: 300 });
  admission.enter(); // the one decision allowed is in flight: every new one is shed
  server = createServer(
    shedBeforeApp(
      (_req, res) => {
        reachedApp++;
        res.end('app');
      },
      { admission, metrics, hasOverloadVerdict: () => false },
    ),
  );
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as { port: number }).port;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await metrics.shutdown();
});

/** Writes `raw` on one socket and collects everything until the server closes it or `ms` pass. */
function exchange(raw: string, ms = 500): Promise<{ text: string; closedByServer: boolean }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    let closedByServer = false;
    socket.on('data', (c) => {
      text += c.toString();
    });
    socket.on('end', () => {
      closedByServer = true;
    });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ text, closedByServer });
    }, ms);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ text, closedByServer: true });
    });
    socket.write(raw);
  });
}

const body = JSON.stringify({ accountId: 'alice' });
const decide = `POST /decide HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;

describe('shedding before the app', () => {
  it('answers a shed /decide with the problem and Retry-After, and keeps the connection for the next request', async () => {
    const { text, closedByServer } = await exchange(decide + decide);
    const answers = text.split('HTTP/1.1 ').filter(Boolean);
    expect(answers).toHaveLength(2);
    for (const a of answers) {
      expect(a).toMatch(/^503 /);
      expect(a).toMatch(/retry-after: 1\r\n/i);
      expect(a).toMatch(/content-type: application\/problem\+json/i);
      expect(a).toContain('"code":"RG_ERR_OVERLOADED"');
      expect(a).not.toMatch(/connection: close/i);
    }
    expect(closedByServer).toBe(false);
    expect(reachedApp).toBe(0);
    expect(await metrics.render()).toMatch(/riskgate_decisions_shed_total\{[^}]*reason="in_flight"[^}]*\} 2/);
  });

  it('closes the connection when the unread body is chunked', async () => {
    const chunked = `POST /decide HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
    const { text } = await exchange(chunked);
    expect(text).toMatch(/^HTTP\/1.1 503 /);
    expect(text).toMatch(/connection: close/i);
  });

  it('sheds POST /feedback the same way: the other caller endpoint shares the decisions’ CPU', async () => {
    const feedback = `POST /feedback HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    const { text } = await exchange(feedback);
    expect(text).toMatch(/^HTTP\/1.1 503 /);
    expect(text).toContain('"code":"RG_ERR_OVERLOADED"');
    expect(reachedApp).toBe(0);
  });

  it('leaves every other request to the app', async () => {
    const { text } = await exchange('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(text).toMatch(/^HTTP\/1.1 200 /);
    expect(reachedApp).toBe(1);
  });
});
