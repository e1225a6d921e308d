import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { eventually } from '../../../test/support/eventually.ts';
import { FaultInjector } from './fault-injector.ts';

/** A small app behind the fault middleware: one NDJSON route (as the Log API streams) and one JSON route. */
function appWith(faults: FaultInjector) {
  const app = new Hono();
  app.use(
    '*',
    faults.middleware({
      routeKey: (c) => `${c.req.method} ${c.req.path}`,
      onHang: () => {},
    }),
  );
  app.get('/logs/v1/service/:id', (c) =>
    c.body('{"n":1}\n{"n":2}\n{"n":3}\n', 200, { 'Content-Type': 'application/x-ndjson' }),
  );
  app.get('/api/v1/x', (c) => c.json({ signalType: 'x', success: true }));
  return { app };
}

describe('FaultInjector', () => {
  it('cuts an NDJSON stream after N lines with a non-JSON Error line', async () => {
    const faults = new FaultInjector([{ route: 'GET /logs/v1/*', cutStream: { afterLines: 2 } }]);
    const res = await appWith(faults).app.request('/logs/v1/service/abc');
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('{"n":1}\n{"n":2}\nError: stream interrupted\n');
  });

  it('leaves non-NDJSON answers alone under cutStream', async () => {
    const faults = new FaultInjector([{ route: '*', cutStream: { afterLines: 0 } }]);
    const res = await appWith(faults).app.request('/api/v1/x');
    expect(await res.json()).toEqual({ signalType: 'x', success: true });
  });

  it('truncates JSON into something that does not parse', async () => {
    const faults = new FaultInjector([{ route: '*', malformedJson: true }]);
    const res = await appWith(faults).app.request('/api/v1/x');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    const text = await res.text();
    expect(text.length).toBeGreaterThan(0);
    expect(() => JSON.parse(text)).toThrow();
  });

  it('fires a rate-based fault for about that share of requests', async () => {
    let i = 0;
    // Alternating draws: 0.25, 0.75, ... → an errorRate of 0.5 fires on every other request.
    const faults = new FaultInjector([{ route: '*', errorRate: 0.5 }], () => (i++ % 2 === 0 ? 0.25 : 0.75));
    const { app } = appWith(faults);
    const statuses = [];
    for (let n = 0; n < 6; n++) statuses.push((await app.request('/api/v1/x')).status);
    expect(statuses).toEqual([500, 200, 500, 200, 500, 200]);
  });

  it('expires a rule after `times` matching requests and reports what is left', async () => {
    const faults = new FaultInjector();
    faults.add({ route: 'GET /api/v1/x', errorRate: 1, errorStatus: 503, times: 2 });
    const { app } = appWith(faults);
    expect((await app.request('/api/v1/x')).status).toBe(503);
    expect(faults.list()).toEqual([{ route: 'GET /api/v1/x', errorRate: 1, errorStatus: 503, times: 1 }]);
    expect((await app.request('/api/v1/x')).status).toBe(503);
    expect((await app.request('/api/v1/x')).status).toBe(200);
    expect(faults.list()).toEqual([]);
  });

  it('ends a hang when the sandbox shuts down', async () => {
    const faults = new FaultInjector([{ route: '*', hang: true }]);
    const { app } = appWith(faults);
    let settled = false;
    const pending = Promise.resolve(app.request('/api/v1/x')).then(() => {
      settled = true;
    });
    // Hanging: waiting on the fault, and unsettled.
    await eventually(() => faults.pendingWaits() === 1, { what: 'the request hanging' });
    expect(settled).toBe(false);
    faults.stop();
    await pending;
    expect(settled).toBe(true);
  });
});
