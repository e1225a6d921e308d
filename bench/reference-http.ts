import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * The HTTP both reference servers (bench/floor-server.ts, bench/peer-server.ts) speak besides
 * their decisions, written once: the request body read whole, and the two routes the bench harness
 * asks every server it measures, as bench/riskgate-under-bench.ts answers them for riskgate:
 * `/bench/process` (its pid, CPU and memory) and `/bench/hello`.
 */

export function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let data = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => {
      data += c;
    });
    req.on('end', () => resolve(data));
    req.on('error', reject);
  });
}

/** Answers the harness's `GET /bench/...` routes; false (nothing sent) for any other request. */
export function answeredBenchRoute(req: IncomingMessage, res: ServerResponse): boolean {
  if (req.method !== 'GET') return false;
  if (req.url?.startsWith('/bench/process')) {
    res.setHeader('content-type', 'application/json');
    res.end(
      JSON.stringify({ pid: process.pid, cpuUsage: process.cpuUsage(), memoryUsage: process.memoryUsage() }),
    );
    return true;
  }
  if (req.url === '/bench/hello') {
    res.end('Hello, World!');
    return true;
  }
  return false;
}
