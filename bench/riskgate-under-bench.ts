/**
 * riskgate as the bench runs it: exactly `src/main.ts` (same env, same app, same server), plus two
 * bench-only routes on the same server and port, so the production app never carries them:
 *
 * - `GET /bench/hello`: a bare hono hello-world, the ceiling a /decide rate is compared with;
 * - `GET /bench/process`: `process.cpuUsage()` and `process.memoryUsage()` of this process
 *   (`?gc=1` runs a full GC first when node was started with `--expose-gc`).
 *
 * How: before main.ts loads, `http.createServer` is wrapped so the request listener it is given
 * sees every request but `/bench/*`, which a separate hono app answers through the same
 * @hono/node-server adapter main uses. Nothing in src/ is changed or imported differently.
 */
import type { IncomingMessage, RequestListener, Server, ServerOptions, ServerResponse } from 'node:http';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { getRequestListener } from '@hono/node-server';
import { Hono } from 'hono';

const bench = new Hono();
bench.get('/bench/hello', (c) => c.text('Hello, World!'));
bench.get('/bench/process', (c) => {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (c.req.query('gc') === '1' && gc) gc();
  return c.json({
    pid: process.pid,
    uptimeS: process.uptime(),
    cpuUsage: process.cpuUsage(),
    memoryUsage: process.memoryUsage(),
    gcExposed: gc !== undefined,
  });
});
const benchListener = getRequestListener(bench.fetch);

function withBenchRoutes(listener: RequestListener | undefined): RequestListener {
  return (req: IncomingMessage, res: ServerResponse) => {
    if (req.url?.startsWith('/bench/')) {
      void benchListener(req, res);
      return;
    }
    if (listener) listener(req, res);
    else {
      res.statusCode = 404;
      res.end();
    }
  };
}

// The CJS module object is the mutable one; the ESM namespace is read-only.
const http = createRequire(import.meta.url)('node:http') as typeof import('node:http');
const originalCreateServer = http.createServer;
function createServerWithBenchRoutes(
  optionsOrListener?: ServerOptions | RequestListener,
  maybeListener?: RequestListener,
): Server {
  if (typeof optionsOrListener === 'function')
    return originalCreateServer(withBenchRoutes(optionsOrListener));
  return originalCreateServer(optionsOrListener ?? {}, withBenchRoutes(maybeListener));
}
http.createServer = createServerWithBenchRoutes as typeof http.createServer;
// ESM `import { createServer } from 'node:http'` (as @hono/node-server does) sees the wrapper only after this.
syncBuiltinESMExports();

await import('../src/main.ts');
