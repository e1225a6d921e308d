import { createServer, request, type Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually } from '../../test/support/eventually.ts';
import { DrivenClock } from '../timing/driven-clock.ts';
import { type AcceptSockets, listenOnAcceptSockets } from './accept-sockets.ts';

const opened: { server: Server; sockets: AcceptSockets }[] = [];
const clients: Socket[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.destroy();
  for (const o of opened.splice(0)) {
    o.server.closeAllConnections();
    await o.sockets.close();
  }
});

async function start(sockets: number, maxConnections = 10_000) {
  const server = createServer((_req, res) => res.end('ok'));
  const listening = await listenOnAcceptSockets(server, {
    port: 0,
    host: '127.0.0.1',
    sockets,
    maxConnections,
  });
  opened.push({ server, sockets: listening });
  return { server, listening };
}

function connectTo(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket));
    socket.on('error', reject);
    socket.resume();
    clients.push(socket);
  });
}

/** Opens `n` connections while the loop is blocked, then counts how many are accepted per turn. */
async function acceptedPerTurn(server: Server, port: number, n: number): Promise<number[]> {
  let turn = 0;
  const perTurn: number[] = [];
  server.on('connection', () => {
    perTurn[turn] = (perTurn[turn] ?? 0) + 1;
  });
  const sockets = Array.from({ length: n }, () => connect(port, '127.0.0.1').resume());
  clients.push(...sockets);
  // The kernel completes every handshake meanwhile and queues the connections for accept().
  const until = performance.now() + 150;
  while (performance.now() < until) {
    // busy: the connections wait in the accept queues, as under load
  }
  // One increment per turn of the loop (the check phase runs once per turn).
  await new Promise<void>((resolve) => {
    const tick = () => {
      turn++;
      if (perTurn.reduce((a, b) => a + (b ?? 0), 0) >= n || turn > 10 * n) resolve();
      else setImmediate(tick);
    };
    setImmediate(tick);
  });
  return Array.from(perTurn, (x) => x ?? 0);
}

describe('listening sockets', () => {
  it('accepts one connection per turn of a busy loop with one socket (libuv), several with eight', async () => {
    const one = await start(1);
    const single = await acceptedPerTurn(one.server, one.listening.port, 32);
    expect(single.reduce((a, b) => a + b, 0)).toBe(32);
    expect(Math.max(...single)).toBe(1);

    const eight = await start(8);
    const several = await acceptedPerTurn(eight.server, eight.listening.port, 32);
    expect(several.reduce((a, b) => a + b, 0)).toBe(32);
    expect(Math.max(...several)).toBeGreaterThan(1);
    // The whole burst is in within fewer turns than connections.
    expect(several.filter((x) => x > 0).length).toBeLessThan(32);
  });

  it('serves HTTP on every socket through the one server', async () => {
    const { listening } = await start(8);
    const statuses = await Promise.all(
      Array.from(
        { length: 40 },
        () =>
          new Promise<number>((resolve, reject) => {
            // A new connection each: the kernel spreads them over the sockets.
            const req = request(
              { port: listening.port, host: '127.0.0.1', path: '/', agent: false },
              (res) => {
                res.resume();
                res.on('end', () => resolve(res.statusCode ?? 0));
              },
            );
            req.on('error', reject);
            req.end();
          }),
      ),
    );
    expect(statuses).toEqual(Array(40).fill(200));
  });

  it("sets up every socket's connections as node:http sets up its own: no Nagle delay, half-open allowed", async () => {
    /** What node:net set on a connection: TCP_NODELAY (kept under its own symbol), half-open, buffer. */
    const settingsOf = (socket: Socket) => {
      const noDelay = Object.getOwnPropertySymbols(socket).find((k) => k.description === 'kSetNoDelay');
      return {
        noDelay: noDelay === undefined ? undefined : (socket as unknown as Record<symbol, unknown>)[noDelay],
        allowHalfOpen: socket.allowHalfOpen,
        highWaterMark: socket.writableHighWaterMark,
      };
    };
    // What node:http's own listening socket gives a connection.
    const plain = createServer();
    const reference = new Promise<ReturnType<typeof settingsOf>>((resolve) =>
      plain.once('connection', (socket: Socket) => resolve(settingsOf(socket))),
    );
    await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
    await connectTo((plain.address() as { port: number }).port);
    const expected = await reference;
    plain.closeAllConnections();
    plain.close();
    expect(expected).toMatchObject({ noDelay: true, allowHalfOpen: true });

    const { server, listening } = await start(8);
    const seen: ReturnType<typeof settingsOf>[] = [];
    server.on('connection', (socket: Socket) => seen.push(settingsOf(socket)));
    // A new connection each: the kernel spreads them over the eight sockets, seven of them extra.
    await Promise.all(Array.from({ length: 40 }, () => connectTo(listening.port)));
    await eventually(() => seen.length === 40, { what: '40 connections accepted' });
    expect(seen).toEqual(Array(40).fill(expected));
  });

  it('refuses a port already in use, as a plain listen does, though its sockets share it', async () => {
    const { listening } = await start(8);
    const other = createServer();
    await expect(
      listenOnAcceptSockets(other, {
        port: listening.port,
        host: '127.0.0.1',
        sockets: 8,
        maxConnections: 10,
      }),
    ).rejects.toMatchObject({ code: 'EADDRINUSE' });
    expect(other.listening).toBe(false);
  });

  it('counts the connection limit over every socket', async () => {
    const { listening } = await start(8, 16);
    let closedByServer = 0;
    const sockets = await Promise.all(Array.from({ length: 40 }, () => connectTo(listening.port)));
    const open = new Set(sockets);
    for (const s of sockets)
      s.on('close', () => {
        closedByServer++;
        open.delete(s);
      });
    await eventually(() => closedByServer >= 24, { what: '24 connections closed by the server' });
    expect(listening.connections()).toBe(16);
    // The 16 kept are served: none of them was closed late.
    const answers = await Promise.all(
      [...open].map(
        (s) =>
          new Promise<string>((resolve) => {
            s.once('data', (chunk: Buffer) => resolve(chunk.toString().split('\r\n')[0] ?? ''));
            s.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
          }),
      ),
    );
    expect(answers).toEqual(Array(16).fill('HTTP/1.1 200 OK'));
    expect(closedByServer).toBe(24);
  });

  it('at the limit closes the longest idle connection for a new one, never one with a request in flight or arriving', async () => {
    const release: (() => void)[] = [];
    const server = createServer((_req, res) => {
      release.push(() => res.end('ok'));
    });
    const accepted: Socket[] = [];
    server.on('connection', (s: Socket) => accepted.push(s));
    const clock = new DrivenClock();
    const listening = await listenOnAcceptSockets(server, {
      port: 0,
      host: '127.0.0.1',
      maxConnections: 16,
      silentGraceMs: 200,
      clock,
    });
    opened.push({ server, sockets: listening });
    const closed = new Set<number>();
    const sockets: Socket[] = [];
    const open = async (i: number) => {
      const s = await connectTo(listening.port);
      s.on('close', () => closed.add(i));
      sockets.push(s);
      return s;
    };
    // 14 requests in flight, one connection with half a request's headers, one silent (past its grace).
    for (let i = 0; i < 14; i++) (await open(i)).write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
    (await open(14)).write('GET / HTTP/1.1\r\n');
    await open(15);
    // Every request and the half one read by the server, then the silent one past its grace.
    await eventually(() => release.length === 14 && accepted.filter((s) => s.bytesRead > 0).length === 15, {
      what: '14 requests and half of one read',
    });
    clock.tick(250);
    // The 17th takes the silent one's place; the 18th finds none idle (the 17th is within its
    // grace) and is closed itself.
    await open(16);
    await open(17);
    await eventually(() => closed.size >= 2, { what: 'two connections closed' });
    expect([...closed].sort((a, b) => a - b)).toEqual([15, 17]);
    // Answered, a request's connection is idle again, and the next new one takes its place.
    const answered = new Promise((r) => sockets[0]!.once('data', r));
    release.shift()!();
    await answered;
    // The server marks it idle when its response closes, in the turn that wrote the answer.
    await new Promise((r) => setImmediate(r));
    await open(18);
    await eventually(() => closed.size >= 3, { what: 'a third connection closed' });
    // Also no late close of another: the set is exactly these.
    expect([...closed].sort((a, b) => a - b)).toEqual([0, 15, 17]);
    for (const r of release) r();
  });

  it('closes only once every connection, on any socket, has closed', async () => {
    const { server, listening } = await start(8);
    const sockets = await Promise.all(Array.from({ length: 16 }, () => connectTo(listening.port)));
    const clientsClosed = Promise.all(sockets.map((s) => new Promise((r) => s.once('close', r))));
    let closed = false;
    const done = listening.close().then(() => {
      closed = true;
    });
    // The listening sockets are closed (a new connection is refused), yet close() waits on.
    await eventually(
      () =>
        connectTo(listening.port).then(
          (s) => {
            s.destroy();
            return false;
          },
          () => true,
        ),
      { what: 'the listening sockets closed' },
    );
    // Silent connections (no request yet) are neither idle nor ended by close().
    expect(closed).toBe(false);
    server.closeAllConnections();
    await done;
    expect(closed).toBe(true);
    await clientsClosed;
    // The server's side of each close is told a turn or two after the client's.
    await eventually(() => listening.connections() === 0, { what: "the server's side of each close" });
  });
});
