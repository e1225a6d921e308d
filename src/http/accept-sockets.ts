import type { Server as HttpServer, IncomingMessage, ServerResponse } from 'node:http';
import {
  createServer as createNetServer,
  type Server as NetServer,
  type ServerOpts,
  type Socket,
} from 'node:net';
import { type Clock, systemClock } from '../timing/clock.ts';

/**
 * Listening sockets for one HTTP server, so that a burst of new connections is accepted while the
 * event loop is busy. libuv accepts one connection per listening socket per turn of the loop
 * (libuv#3696, in every Node since 20). Under overload a turn takes tens of milliseconds, so a
 * client pool that opens connections faster than that (a login backend whose answers slowed down,
 * or reconnecting after its own timeouts) queues them in the kernel's accept queue, where
 * admission control cannot see them, until it overflows and the kernel drops SYNs (the client's
 * retry comes 1 s, then 3 s later). Measured at 5x capacity: 200-500 connections waiting and
 * 370-980 client timeouts (2 s) per 10 s step (bench/RESULTS.md).
 *
 * With `sockets` > 1 (Linux), every socket is bound to the port with SO_REUSEPORT and the kernel
 * spreads new connections over them: up to `sockets` accepts per turn. The extra sockets hand their
 * connections to the one HTTP server (`'connection'`), so timeouts, idle tracking and
 * `closeAllConnections` see every connection alike. SO_REUSEPORT would also let a second process
 * share the port silently; a plain bind is tried first, so a port in use still fails with
 * EADDRINUSE as it did with one socket.
 *
 * In a node:cluster worker (`shared`), a plain `listen` would not bind at all: the primary accepts
 * every connection on its one socket and passes it over IPC, so a burst waits in the primary's
 * accept queue and its round robin, out of sight of every worker's admission control. A shared
 * worker binds its own sockets instead (`exclusive`, so node:cluster keeps out, and SO_REUSEPORT,
 * so the workers share the port): each worker accepts `sockets` connections per turn of its own
 * loop, and sheds what it cannot take. The port-in-use check is then the primary's, made once.
 */

export interface AcceptSocketsOptions {
  port: number;
  host: string;
  /** Listening sockets; more than 1 only where SO_REUSEPORT balances (Linux). Default 1. */
  sockets?: number;
  /**
   * Open client connections (all sockets together). Past it a new connection takes the place of
   * the one idle longest, which is closed: a keep-alive between requests (no request in flight or
   * arriving), else one that has sent nothing for `silentGraceMs`. Only when none is idle is the
   * new one closed at once.
   */
  maxConnections: number;
  /**
   * How long a new connection may stay silent before it counts as idle at the limit, ms. Default
   * 1000: a burst of new clients does not close each other's connections before their requests
   * are read.
   */
  silentGraceMs?: number;
  /** Whose monotonic time measures `silentGraceMs`. Default: the system clock. */
  clock?: Pick<Clock, 'monotonicMs'>;
  /**
   * Other processes (node:cluster workers) bind the same port: every socket is this process's own
   * (`exclusive`) with SO_REUSEPORT, and no plain bind is tried first (Linux; elsewhere the port is
   * shared through the primary as node:cluster does). Default false.
   */
  shared?: boolean;
}

export interface AcceptSockets {
  /** The port every socket listens on (the one chosen, for port 0). */
  readonly port: number;
  /** Client connections open now, whichever socket accepted them. */
  connections(): number;
  /** Stops accepting on every socket; resolves once every connection accepted has closed. */
  close(): Promise<void>;
}

/** Listens `server` on `port` and `host` with `sockets` listening sockets (see above). */
export async function listenOnAcceptSockets(
  server: HttpServer,
  options: AcceptSocketsOptions,
): Promise<AcceptSockets> {
  const linux = process.platform === 'linux';
  const count = linux ? Math.max(1, options.sockets ?? 1) : 1;
  const shared = linux && options.shared === true;
  const { host } = options;
  let open = 0;
  const graceMs = options.silentGraceMs ?? 1000;
  const clock = options.clock ?? systemClock;
  // Keep-alive connections between requests, oldest idle first, each with the bytes it had read
  // then (more read since: a request is arriving, so it is not idle); and connections that have
  // not had a request yet, oldest first, with when they were accepted.
  const idle = new Map<Socket, number>();
  const fresh = new Map<Socket, number>();
  const inFlight = new WeakMap<Socket, number>();
  const longestIdle = (): Socket | undefined => {
    for (const [socket, readWhenIdle] of idle) {
      idle.delete(socket);
      if (socket.bytesRead === readWhenIdle) return socket;
    }
    const now = clock.monotonicMs();
    for (const [socket, acceptedAt] of fresh) {
      if (now - acceptedAt < graceMs) return undefined;
      fresh.delete(socket);
      if (socket.bytesRead === 0) return socket;
    }
    return undefined;
  };
  // One limit over every socket: each server's own maxConnections would count only its share.
  server.on('connection', (socket: Socket) => {
    open++;
    socket.once('close', () => {
      open--;
      idle.delete(socket);
      fresh.delete(socket);
    });
    // At the limit the longest idle connection makes room: refusing the new one let a client
    // holding every connection idle (8,192 keep-alives) lock every other client out.
    if (open > options.maxConnections) {
      const victim = longestIdle();
      if (victim === undefined) {
        socket.destroy();
        return;
      }
      victim.destroy();
    }
    fresh.set(socket, clock.monotonicMs());
  });
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket;
    idle.delete(socket);
    fresh.delete(socket);
    inFlight.set(socket, (inFlight.get(socket) ?? 0) + 1);
    response.once('close', () => {
      const left = (inFlight.get(socket) ?? 1) - 1;
      inFlight.set(socket, left);
      if (left === 0 && !socket.destroyed) idle.set(socket, socket.bytesRead);
    });
  });
  if (shared) {
    await listen(server, { port: options.port, host, reusePort: true, exclusive: true });
  } else if (count === 1) {
    await listen(server, { port: options.port, host });
  } else {
    await assertPortFree(options.port, host);
    await listen(server, { port: options.port, host, reusePort: true });
  }
  const port = (server.address() as { port: number }).port;
  const extra: NetServer[] = [];
  try {
    for (let i = 1; i < count; i++) {
      const acceptor = createNetServer(connectionOptionsOf(server), (socket) =>
        server.emit('connection', socket),
      );
      extra.push(acceptor);
      await listen(acceptor, { port, host, reusePort: true, exclusive: shared });
    }
  } catch (error) {
    await Promise.all([server, ...extra].map(closeServer));
    throw error;
  }
  let closed: Promise<void> | undefined;
  return {
    port,
    connections: () => open,
    close: () => {
      closed ??= Promise.all([server, ...extra].map(closeServer)).then(() => undefined);
      return closed;
    },
  };
}

/**
 * Rejects with EADDRINUSE when anyone holds `port` on `host`, SO_REUSEPORT or not (a plain bind,
 * released at once). Port 0 is always free.
 */
export async function assertPortFree(port: number, host: string): Promise<void> {
  if (port !== 0) await closeServer(await listen(createNetServer(), { port, host }));
}

function listen<S extends NetServer>(
  server: S,
  options: { port: number; host: string; reusePort?: boolean; exclusive?: boolean },
): Promise<S> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}

/** Stops accepting; resolves once the connections this server accepted have closed. */
function closeServer(server: NetServer): Promise<void> {
  return new Promise((resolve) => {
    if (server.listening) server.close(() => resolve());
    else resolve();
  });
}

/** What a `net.Server` keeps of its options (node:net; `keepAliveInitialDelay` in seconds). */
interface NetServerSettings {
  allowHalfOpen: boolean;
  pauseOnConnect: boolean;
  noDelay: boolean;
  keepAlive: boolean;
  keepAliveInitialDelay: number;
  highWaterMark: number;
}

/**
 * The options `server`'s own listening socket sets on each connection it accepts (node:http passes
 * `noDelay: true` and `allowHalfOpen: true` to node:net), for an extra socket to set them alike.
 * Without them an extra socket's connections (63 of 64 as shipped) kept Nagle's algorithm on: an
 * answer written in more than one write (a streamed body's chunks after its head) waited for the
 * client's delayed ACK, ~40 ms, after its first write (bench/RESULTS.md, "the main thread's writes").
 */
function connectionOptionsOf(server: HttpServer): ServerOpts {
  const s = server as unknown as NetServerSettings;
  return {
    allowHalfOpen: s.allowHalfOpen,
    pauseOnConnect: s.pauseOnConnect,
    noDelay: s.noDelay,
    keepAlive: s.keepAlive,
    keepAliveInitialDelay: s.keepAliveInitialDelay * 1000,
    highWaterMark: s.highWaterMark,
  };
}
