import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/**
 * Closes connections that have not sent a single byte within `silentMs`. Node's headers timeout
 * starts with the first byte of a request, and a socket's own timeout is not applied to HTTP
 * server sockets, so a client that opens connections and sends nothing holds each one (and its
 * file descriptor) indefinitely: 20,000 of them made every new client, /healthz and a policy reload
 * fail with EMFILE. A sweep every `silentMs / 2` (at least 100 ms) ends them. Returns `stop`.
 */
export function closeSilentConnections(server: Server, silentMs: number): { stop(): void } {
  const silent = new Map<Socket, number>();
  const onConnection = (socket: Socket) => {
    silent.set(socket, performance.now());
    socket.once('close', () => silent.delete(socket));
  };
  server.on('connection', onConnection);
  const sweep = setInterval(
    () => {
      const now = performance.now();
      for (const [socket, openedAt] of silent) {
        if (socket.bytesRead > 0) silent.delete(socket);
        else if (now - openedAt >= silentMs) {
          silent.delete(socket);
          socket.destroy();
        }
      }
    },
    Math.max(100, silentMs / 2),
  );
  sweep.unref();
  return {
    stop() {
      clearInterval(sweep);
      server.off('connection', onConnection);
    },
  };
}
