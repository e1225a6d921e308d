import { createServer, request as httpRequest, IncomingMessage, type Server } from 'node:http';
import { Socket } from 'node:net';
import { Hono } from 'hono';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createMetrics } from '../observability/metrics.ts';
import { AdmissionControl } from './admission-control.ts';
import { AdmissionTicket, attachTicket, ticketOf } from './admission-ticket.ts';
import { admit } from './admit.ts';
import { shedBeforeApp } from './shed-before-app.ts';

/** The admission ticket from the listener to the handler: in process, then over a real socket. */

const metrics = createMetrics({ runtime: false });
afterAll(() => metrics.shutdown());

function appWith(admission: AdmissionControl, answerShed?: Parameters<typeof admit>[0]['answerShed']) {
  const seen: { ticket: AdmissionTicket; inFlight: number }[] = [];
  const app = new Hono();
  app.post('/decide', admit({ admission, metrics, answerShed }), (c) => {
    seen.push({ ticket: c.get('admission'), inFlight: admission.inFlight });
    return c.text('decided');
  });
  app.onError((_error, c) => c.text('failed', 500));
  app.post('/fails', admit({ admission, metrics }), () => {
    throw new Error('handler failed');
  });
  return { app, seen };
}

/** An IncomingMessage as @hono/node-server hands it to the app (`c.env.incoming`). */
function incoming(ticket?: AdmissionTicket): IncomingMessage {
  const req = new IncomingMessage(new Socket());
  if (ticket !== undefined) attachTicket(req, ticket);
  return req;
}

describe('admit', () => {
  it('hands the handler the listener’s ticket, counts it in flight while it runs, and releases it', async () => {
    const admission = new AdmissionControl({ maxInFlight: 10, deadlineMs: 300 });
    const { app, seen } = appWith(admission);
    const ticket = new AdmissionTicket(1234.5, true);
    const res = await app.request('/decide', { method: 'POST' }, { incoming: incoming(ticket) });
    expect(res.status).toBe(200);
    expect(seen).toEqual([{ ticket, inFlight: 1 }]);
    expect(ticket.arrivedAtMs).toBe(1234.5);
    expect(admission.inFlight).toBe(0);
  });

  it('does not check again what the listener admitted, and checks what it did not', async () => {
    const admission = new AdmissionControl({ maxInFlight: 8, deadlineMs: 300 });
    for (let i = 0; i < 8; i++) admission.enter(); // full: a check now sheds
    const { app, seen } = appWith(admission);
    const admitted = await app.request(
      '/decide',
      { method: 'POST' },
      { incoming: incoming(new AdmissionTicket(0, true)) },
    );
    expect(admitted.status).toBe(200);
    const unchecked = await app.request(
      '/decide',
      { method: 'POST' },
      { incoming: incoming(new AdmissionTicket(0, false)) },
    );
    expect(unchecked.status).toBe(503);
    expect(unchecked.headers.get('retry-after')).toBe('1');
    expect(await unchecked.json()).toMatchObject({ code: 'RG_ERR_OVERLOADED' });
    // No listener at all (in process): a ticket is made in the app, and checked.
    expect((await app.request('/decide', { method: 'POST' })).status).toBe(503);
    expect(seen).toHaveLength(1);
    expect(admission.shed.in_flight).toBe(2);
  });

  it('answers a shed request with answerShed’s answer when it gives one, else the 503', async () => {
    const admission = new AdmissionControl({ maxInFlight: 8, deadlineMs: 300 });
    for (let i = 0; i < 8; i++) admission.enter();
    let verdict = true;
    const { app } = appWith(admission, (c, reason) =>
      verdict ? c.json({ verdict: 'challenge', reason }) : undefined,
    );
    const answered = await app.request('/decide', { method: 'POST' });
    expect(await answered.json()).toEqual({ verdict: 'challenge', reason: 'in_flight' });
    verdict = false;
    expect((await app.request('/decide', { method: 'POST' })).status).toBe(503);
  });

  it('releases the ticket when the handler fails', async () => {
    const admission = new AdmissionControl({ maxInFlight: 10, deadlineMs: 300 });
    const { app } = appWith(admission);
    const res = await app.request('/fails', { method: 'POST' });
    expect(res.status).toBe(500);
    expect(admission.inFlight).toBe(0);
  });

  it('releases a ticket once, however often it is told', () => {
    const admission = new AdmissionControl({ maxInFlight: 10, deadlineMs: 300 });
    const ticket = new AdmissionTicket(0, true);
    ticket.enter(admission);
    ticket.release();
    ticket.release();
    expect(admission.inFlight).toBe(0);
  });
});

describe('the listener’s ticket', () => {
  let server: Server | undefined;
  afterEach(async () => {
    server?.closeAllConnections();
    await new Promise((r) => server?.close(r));
  });

  async function ticketsAt(hasOverloadVerdict: boolean, path: string): Promise<AdmissionTicket | undefined> {
    const admission = new AdmissionControl({ maxInFlight: 10, deadlineMs: 300 });
    let seen: AdmissionTicket | undefined;
    server = createServer(
      shedBeforeApp(
        (req, res) => {
          seen = ticketOf(req);
          res.end('app');
        },
        { admission, metrics, hasOverloadVerdict: () => hasOverloadVerdict },
      ),
    );
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    const before = performance.now();
    await new Promise<void>((resolve, reject) => {
      const req = httpRequest({ port, host: '127.0.0.1', method: 'POST', path }, (res) => {
        res.resume();
        res.on('end', resolve);
      });
      req.on('error', reject);
      req.end('{}');
    });
    if (seen !== undefined) expect(seen.arrivedAtMs).toBeGreaterThanOrEqual(before);
    return seen;
  }

  it('carries a decision’s arrival and its admission at the listener on the request', async () => {
    expect(await ticketsAt(false, '/decide')).toMatchObject({ admitted: true });
  });

  it('leaves the check to the app when the policy answers overload with a verdict', async () => {
    expect(await ticketsAt(true, '/decide')).toMatchObject({ admitted: false });
    // Feedback has no overload verdict: admitted at the listener whatever the policy.
    expect(await ticketsAt(true, '/feedback')).toMatchObject({ admitted: true });
  });

  it('gives no ticket to a request admission does not look at', async () => {
    expect(await ticketsAt(false, '/healthz')).toBeUndefined();
  });
});
