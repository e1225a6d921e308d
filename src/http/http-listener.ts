import {
  createServer as createHttpServer,
  type Server as HttpServer,
  type RequestListener,
  type ServerOptions,
} from 'node:http';
import { createAdaptorServer } from '@hono/node-server';
import type { Hono } from 'hono';
import { shedBeforeApp } from '../admission/shed-before-app.ts';
import type { RiskgateConfig } from '../config/riskgate-config.ts';
import { type Component, stopWaitMs } from '../lifecycle/component.ts';
import { type AcceptSockets, listenOnAcceptSockets } from './accept-sockets.ts';
import { type AppDeps, createApp } from './create-app.ts';
import { withDirectRoutes } from './direct-route.ts';
import { closeSilentConnections } from './silent-connections.ts';

/** Idle keep-alive connections are closed after this long, milliseconds (Node's default: 5000). */
const KEEP_ALIVE_TIMEOUT_MS = 5000;
/** How often a draining listener ends the connections gone idle, milliseconds. */
const DRAIN_SWEEP_MS = 20;

export interface HttpListenerOptions {
  /** `caller listener` or `ops listener`: the component's name. */
  name: string;
  app: Hono;
  port: number;
  host: string;
  /** Listening sockets accepting for the one server (src/http/accept-sockets.ts). */
  acceptSockets: number;
  /** Bound beside other processes' sockets (SO_REUSEPORT, a cluster worker). Default false. */
  shared?: boolean;
  config: Pick<RiskgateConfig, 'headersTimeoutMs' | 'requestTimeoutMs' | 'maxConnections'>;
  /** Wraps the node:http listener (admission sheds before the app). */
  wrap?: (listener: RequestListener) => RequestListener;
  /**
   * `drain` (the caller surface): on stop, in-flight requests finish (idle connections are ended
   * as they go idle, all cut past `drainTimeoutMs`); `cut`: every connection ends at once.
   */
  onStop: 'drain' | 'cut';
  /** Longest wait for in-flight requests on stop, milliseconds. */
  drainTimeoutMs: number;
  /** True once shutdown began: `/readyz` reports `draining: false`. Default: never. */
  isDraining?: () => boolean;
}

export interface HttpListener {
  app: Hono;
  server: HttpServer;
  sockets: AcceptSockets;
}

/**
 * An HTTP server for `app` listening on `port` and `host`, sized for a login path: headers within
 * seconds, a whole request within the deadline's order of magnitude, idle keep-alive short,
 * checked every second rather than Node's 30 s; past `maxConnections` a new one replaces the
 * longest idle or is refused at once (the file-descriptor table stays free for the vendor, the
 * decision log and a policy reload). `acceptSockets` listening sockets accept a burst of
 * connections under load (src/http/accept-sockets.ts).
 */
export function httpListenerComponent(o: HttpListenerOptions): Component<HttpListener> {
  return {
    name: o.name,
    async start() {
      const { config, wrap } = o;
      const server = createAdaptorServer({
        fetch: o.app.fetch,
        // The app's direct routes (src/http/direct-route.ts) before the adapter; `wrap` before both.
        createServer: ((options: ServerOptions, listener: RequestListener) => {
          const direct = withDirectRoutes(o.app, listener);
          return createHttpServer(options, wrap === undefined ? direct : wrap(direct));
        }) as unknown as typeof createHttpServer,
        serverOptions: {
          headersTimeout: config.headersTimeoutMs,
          requestTimeout: config.requestTimeoutMs,
          keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS,
          connectionsCheckingInterval: 1000,
        },
      }) as HttpServer;
      const silent = closeSilentConnections(server, config.headersTimeoutMs);
      let sockets: AcceptSockets;
      try {
        sockets = await listenOnAcceptSockets(server, {
          port: o.port,
          host: o.host,
          sockets: o.acceptSockets,
          maxConnections: config.maxConnections,
          shared: o.shared === true,
        });
      } catch (error) {
        silent.stop();
        throw error;
      }
      const isDraining = o.isDraining;
      return {
        handle: { app: o.app, server, sockets },
        stop: async (deadlineAtMs) => {
          if (o.onStop === 'cut') {
            void sockets.close();
            server.closeAllConnections();
          } else {
            await drain(server, sockets, stopWaitMs(deadlineAtMs, o.drainTimeoutMs));
          }
          silent.stop();
        },
        ...(isDraining !== undefined && {
          ready: (): Record<string, boolean> => (isDraining() ? { draining: false } : {}),
        }),
      };
    },
  };
}

/**
 * close() stops accepting and ends the connections idle at that moment; a connection busy with a
 * request goes idle once answered, and is ended by the next sweep instead of lingering for its
 * keep-alive timeout. Past `timeoutMs`, everything is cut.
 */
async function drain(server: HttpServer, sockets: AcceptSockets, timeoutMs: number): Promise<void> {
  const closed = sockets.close();
  const sweep = setInterval(() => server.closeIdleConnections(), DRAIN_SWEEP_MS);
  const forced = setTimeout(() => server.closeAllConnections(), timeoutMs);
  await closed;
  clearInterval(sweep);
  clearTimeout(forced);
  // The last answers' after-response work (log lines, action enqueues) runs on the next turn.
  await new Promise((resolve) => setImmediate(resolve));
}

/**
 * The two HTTP surfaces as listener components: the caller surface (RISKGATE_PORT; /decide and
 * the rest, admission shedding at the node:http listener, drained on stop) and, when
 * RISKGATE_OPS_PORT is set, the ops surface (health and the operator endpoints behind the operator
 * keys; cut on stop).
 */
export function httpSurfaces(o: {
  app: AppDeps;
  config: Pick<
    RiskgateConfig,
    | 'port'
    | 'acceptSockets'
    | 'opsPort'
    | 'opsHost'
    | 'headersTimeoutMs'
    | 'requestTimeoutMs'
    | 'maxConnections'
  >;
  host: string;
  /** Bound beside the other cluster workers (SO_REUSEPORT). */
  shared: boolean;
  opsKeys: readonly string[];
  /** Admission at the listener (src/admission/shed-before-app.ts). */
  shed: Parameters<typeof shedBeforeApp>[1];
  drainTimeoutMs: number;
  isDraining: () => boolean;
}): { caller: Component<HttpListener>; ops: Component<HttpListener> | undefined } {
  const { config } = o;
  const caller = httpListenerComponent({
    name: 'caller listener',
    app: createApp(o.app),
    port: config.port,
    host: o.host,
    acceptSockets: config.acceptSockets,
    shared: o.shared,
    config,
    wrap: (listener) => shedBeforeApp(listener, o.shed),
    onStop: 'drain',
    drainTimeoutMs: o.drainTimeoutMs,
    isDraining: o.isDraining,
  });
  const ops =
    config.opsPort === undefined
      ? undefined
      : httpListenerComponent({
          name: 'ops listener',
          app: createApp({ ...o.app, surface: 'ops', ops: { access: 'keys', keys: o.opsKeys } }),
          port: config.opsPort,
          host: config.opsHost,
          acceptSockets: 1,
          config,
          onStop: 'cut',
          drainTimeoutMs: o.drainTimeoutMs,
        });
  return { caller, ops };
}
