import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { untilReady } from './demo-requests.ts';

/** `npm start` waits on /readyz before its demo logins: a real server on port 0 answers it. */

let server: Server | undefined;
afterEach(() => new Promise<void>((r) => (server === undefined ? r() : server.close(() => r()))));

/** A /readyz that answers each status of `statuses` in turn (the last one from then on); its URL. */
async function readyz(
  statuses: number[],
): Promise<{ url: string; asked: () => number; connections: () => number }> {
  let asked = 0;
  let connections = 0;
  server = createServer((req, res) => {
    const status = statuses[Math.min(asked++, statuses.length - 1)]!;
    res.writeHead(req.url === '/readyz' ? status : 404).end();
  });
  server.on('connection', () => connections++);
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, asked: () => asked, connections: () => connections };
}

describe("npm start's wait for readiness", () => {
  it('returns once /readyz answered 200 as many times in a row as asked, each on a connection of its own', async () => {
    const r = await readyz([503, 503, 200, 503, 200, 200, 200]);
    expect(await untilReady({ url: r.url, intervalMs: 5, inARow: 3 })).toBe(true);
    // The 200 followed by a 503 started the run again.
    expect(r.asked()).toBe(7);
    expect(r.connections()).toBe(7);
  });

  it('gives up after its bound, not ready', async () => {
    const r = await readyz([503]);
    expect(await untilReady({ url: r.url, intervalMs: 5, waitMs: 100 })).toBe(false);
    expect(r.asked()).toBeGreaterThan(1);
  });

  it('is not ready while nothing listens, within its bound', async () => {
    const r = await readyz([200]);
    const url = r.url;
    await new Promise<void>((done) => server!.close(() => done()));
    server = undefined;
    expect(await untilReady({ url, intervalMs: 5, waitMs: 100 })).toBe(false);
  });
});
