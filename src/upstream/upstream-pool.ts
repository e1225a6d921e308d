import { Pool } from 'undici';

/** Connection settings of one upstream origin. All times in milliseconds. */
export interface UpstreamPoolOptions {
  /** Upper bound on open connections to the origin. Default 16. */
  connections?: number;
  /** TCP (and TLS) connect timeout. Default 1000. */
  connectTimeoutMs?: number;
  /**
   * Backstop for the wait on response headers (undici's default is 300 s). Calls carry their own,
   * tighter timeout; this only bounds what nothing else does. Default 10000.
   */
  headersTimeoutMs?: number;
  /** Backstop for the gap between two body chunks. Default 10000. */
  bodyTimeoutMs?: number;
  /** Idle keep-alive before the client closes a socket; keep it under the server's. Default 4000. */
  keepAliveTimeoutMs?: number;
  /**
   * After a call times out (or its decision deadline passes) the caller is released at once, but
   * the late answer is still read and discarded so its keep-alive socket goes back to the pool;
   * only an answer not complete after this grace destroys the socket. Under load, destroying a
   * socket per timeout means a new TCP connection per timeout and more timeouts. 0 destroys the
   * socket at once (the old behaviour). Default 5000.
   */
  lateAnswerGraceMs?: number;
}

/**
 * An undici `Pool` for one upstream origin: keep-alive, no pipelining (`pipelining: 1`, so one slow
 * answer never holds others behind it on a socket), a bounded number of connections and explicit
 * timeouts everywhere undici would otherwise wait 300 s.
 */
export function createUpstreamPool(origin: string, opts: UpstreamPoolOptions = {}): Pool {
  return new Pool(origin, {
    connections: opts.connections ?? 16,
    pipelining: 1,
    connect: { timeout: opts.connectTimeoutMs ?? 1000 },
    headersTimeout: opts.headersTimeoutMs ?? 10_000,
    bodyTimeout: opts.bodyTimeoutMs ?? 10_000,
    keepAliveTimeout: opts.keepAliveTimeoutMs ?? 4000,
    keepAliveMaxTimeout: Math.max(opts.keepAliveTimeoutMs ?? 4000, 4000),
  });
}

/** The origin (`scheme://host[:port]`) and the path prefix of a base URL such as `http://h:1/api/v1`. */
export function splitBaseUrl(baseUrl: string): {
  origin: string;
  pathPrefix: string;
  host: string;
  protocol: string;
} {
  const url = new URL(baseUrl);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new TypeError(`unsupported URL scheme in ${url.origin}`);
  }
  return {
    origin: url.origin,
    pathPrefix: url.pathname.replace(/\/+$/, ''),
    host: url.host,
    protocol: url.protocol,
  };
}
