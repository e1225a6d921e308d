import type { Hono } from 'hono';

/**
 * The `Allow` value for a request path (a GET route answers HEAD too), for 405 answers: each route
 * template (`/actions/:id/retry`) matched as a pattern, so a path with a parameter is found too.
 */
export function allowedMethods(app: Hono): (path: string) => string | undefined {
  const byTemplate = new Map<string, Set<string>>();
  for (const route of app.routes) {
    if (route.method === 'ALL') continue;
    let methods = byTemplate.get(route.path);
    if (methods === undefined) {
      methods = new Set();
      byTemplate.set(route.path, methods);
    }
    methods.add(route.method);
    if (route.method === 'GET') methods.add('HEAD');
  }
  const patterns = [...byTemplate].map(([template, methods]) => ({
    pattern: new RegExp(`^${template.split('/').map(templateSegment).join('/')}$`),
    allow: [...methods].join(', '),
  }));
  return (path) => patterns.find((p) => p.pattern.test(path))?.allow;
}

/** One segment of a route template as a pattern: `:name` is any one segment, the rest literal. */
function templateSegment(segment: string): string {
  return segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
