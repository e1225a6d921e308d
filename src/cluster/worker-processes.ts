import cluster, { type Worker } from 'node:cluster';
import type { ResourceMetrics } from '@opentelemetry/sdk-metrics';
import {
  answerFeaturesRequest,
  FEATURES_REQUEST,
  type FeaturesRequest,
} from '../features/ipc-feature-store.ts';
import type { MemoryFeatureStore } from '../features/memory-feature-store.ts';
import {
  FEEDBACK_ANSWERED,
  FEEDBACK_LABEL,
  FEEDBACK_REMEMBER,
  type FeedbackMessage,
  type PrimaryRecentDecisions,
} from '../feedback/ipc-recent-decisions.ts';
import { mergeWorkerMetrics, plainMetrics } from './merge-metrics.ts';

/**
 * Several riskgate processes on one port (node:cluster): the primary forks `count` workers, each a
 * whole riskgate (its own caches, batcher, connections, admission control and listening sockets:
 * each binds the port itself with SO_REUSEPORT, so the kernel spreads connections over the workers
 * and each sheds its own overload), and never serves a request or accepts a connection itself.
 * What must happen once per host happens in the primary or in worker 1: the primary starts the
 * embedded sandbox and the development key (main.ts passes them to the workers as environment),
 * worker 1 alone follows the Log API. `/metrics` on any worker gathers every worker's metrics
 * through the primary, labelled `worker="<n>"`. A shutdown reaches every worker whoever gets the
 * signal: SIGTERM or SIGINT to the primary alone is passed on as a message (`WORKER_STOP`), and a
 * signal to the whole process group (Ctrl-C, systemd's control-group kill) reaches each worker
 * itself; either way each worker drains its decisions, log and actions once (the message is never
 * taken for a second signal, which would exit at once), and the primary exits once they all have. A worker that dies is replaced,
 * at most `maxRestartsPerMinute` times a minute; past that the primary stops (the orchestrator
 * restarts the whole).
 */

/** The environment variable that tells a worker its number (1-based); set by the primary only. */
export const WORKER_INDEX_VARIABLE = 'RISKGATE_WORKER_INDEX';

/** The primary's message asking a worker to drain and exit (a message, so never counted as a signal). */
export const WORKER_STOP = 'riskgate:stop';

export interface PrimaryOptions {
  count: number;
  /** Extra environment for every worker (the sandbox's settings, the development key). */
  env: Record<string, string>;
  /** Longest wait for the workers to drain after SIGTERM, milliseconds. */
  drainTimeoutMs: number;
  maxRestartsPerMinute?: number;
  log: (line: Record<string, unknown>) => void;
  /** Called once every worker listens, with the port they share. */
  onListening?: (port: number) => void;
  /**
   * Called when the workers keep dying (past `maxRestartsPerMinute`): the process stops the
   * primary through its one teardown, as for a signal.
   */
  onGiveUp: (why: string) => void;
  /** The embedded feature store the workers share (RISKGATE_FEATURE_STORE=memory). */
  features?: MemoryFeatureStore;
  /** The recent decisions `POST /feedback` checks, remembered and labelled for every worker. */
  recentDecisions?: PrimaryRecentDecisions;
  /**
   * The port is 0 (any free one): worker 1 starts alone and picks it, then every other worker (and
   * any worker restarted later) is given it as RISKGATE_PORT, since each worker binds the port
   * itself (src/http/accept-sockets.ts). Default false: all workers start at once.
   */
  firstWorkerPicksPort?: boolean;
}

/**
 * The metrics messages, both ways: a worker asks for every worker's (`metrics-request`), the primary
 * asks each worker (`metrics-collect`), each answers with its own as collected
 * (`metrics-collected`), and the primary answers the one that asked with them merged (`metrics`).
 * Plain data (OpenTelemetry's `ResourceMetrics`), never Prometheus text.
 */
type MetricsMessage =
  | { type: 'riskgate:metrics-request'; id: number }
  | { type: 'riskgate:metrics-collect'; id: number }
  | { type: 'riskgate:metrics-collected'; id: number; metrics: ResourceMetrics }
  | { type: 'riskgate:metrics'; id: number; metrics: ResourceMetrics };

type WorkerMessage =
  | FeaturesRequest
  | FeedbackMessage
  | { type: 'riskgate:listening'; port: number }
  | Extract<MetricsMessage, { type: 'riskgate:metrics-request' | 'riskgate:metrics-collected' }>;

/** Sends one metrics message (typed, so both ends agree on its shape). */
const sendMetrics = (to: { send(m: MetricsMessage): unknown }, m: MetricsMessage): void => {
  to.send(m);
};

/** The running primary: what the process's teardown stops. */
export interface ClusterPrimary {
  /**
   * Asks every worker to drain and exit; resolves once the last one has. A worker stuck past
   * `drainTimeoutMs` + 5 s is killed and the promise rejects (the orchestrator's grace period is
   * finite).
   */
  stop(why: string): Promise<void>;
}

/**
 * Starts the primary: forks the workers (they start on their own) and forwards SIGHUP to them.
 * Signals that stop the process are the process's (src/riskgate-process.ts), which calls `stop`.
 */
export function startPrimary(options: PrimaryOptions): ClusterPrimary {
  const maxRestarts = options.maxRestartsPerMinute ?? 10;
  const restarts: number[] = [];
  const workers = new Map<number, Worker>();
  let stopping: Promise<void> | undefined;
  let allExited = (): void => {};
  let listening = 0;
  /** RISKGATE_PORT once worker 1 picked it (`firstWorkerPicksPort`). */
  let picked: Record<string, string> = {};

  const fork = (index: number): void => {
    const worker = cluster.fork({ ...options.env, ...picked, [WORKER_INDEX_VARIABLE]: String(index) });
    workers.set(index, worker);
    worker.on('message', (m: WorkerMessage) => onMessage(worker, m));
    worker.on('exit', (code, signal) => {
      if (workers.get(index) === worker) workers.delete(index);
      if (stopping !== undefined) {
        if (workers.size === 0) allExited();
        return;
      }
      const now = Date.now();
      while (restarts.length > 0 && restarts[0]! < now - 60_000) restarts.shift();
      options.log({ level: 'error', msg: 'worker exited', worker: index, code, signal });
      if (restarts.length >= maxRestarts) {
        options.log({
          level: 'fatal',
          msg: 'workers keep dying: stopping',
          restartsLastMinute: restarts.length,
        });
        options.onGiveUp('restart limit');
        return;
      }
      restarts.push(now);
      fork(index);
    });
  };

  // Metrics gathering: ask every live worker for its text, answer the one that asked.
  let nextGather = 1;
  const gathers = new Map<
    number,
    { from: Worker; id: number; collected: { worker: number; metrics: ResourceMetrics }[]; waiting: number }
  >();
  const onMessage = (from: Worker, m: WorkerMessage): void => {
    if (m.type === FEATURES_REQUEST) {
      if (options.features !== undefined && from.isConnected())
        from.send(answerFeaturesRequest(options.features, m));
    } else if (m.type === FEEDBACK_REMEMBER || m.type === FEEDBACK_LABEL || m.type === FEEDBACK_ANSWERED) {
      options.recentDecisions?.receive(m, (answer) => {
        if (from.isConnected()) from.send(answer);
      });
    } else if (m.type === 'riskgate:listening') {
      listening++;
      if (options.firstWorkerPicksPort === true && picked.RISKGATE_PORT === undefined) {
        picked = { RISKGATE_PORT: String(m.port) };
        for (let i = 2; i <= options.count; i++) fork(i);
      }
      if (listening === options.count) options.onListening?.(m.port);
    } else if (m.type === 'riskgate:metrics-request') {
      const gather = nextGather++;
      const live = [...workers];
      gathers.set(gather, { from, id: m.id, collected: [], waiting: live.length });
      for (const [, w] of live) sendMetrics(w, { type: 'riskgate:metrics-collect', id: gather });
      // A worker that does not answer in time is left out rather than holding the scrape.
      setTimeout(() => finishGather(gather), 2000).unref();
    } else if (m.type === 'riskgate:metrics-collected') {
      const g = gathers.get(m.id);
      if (g === undefined) return;
      const index = [...workers].find(([, w]) => w === from)?.[0] ?? 0;
      g.collected.push({ worker: index, metrics: m.metrics });
      if (--g.waiting === 0) finishGather(m.id);
    }
  };
  const finishGather = (gather: number): void => {
    const g = gathers.get(gather);
    if (g === undefined) return;
    gathers.delete(gather);
    if (g.from.isConnected())
      sendMetrics(g.from, { type: 'riskgate:metrics', id: g.id, metrics: mergeWorkerMetrics(g.collected) });
  };

  const stop = (why: string): Promise<void> => {
    stopping ??= new Promise<void>((resolve, reject) => {
      options.log({ level: 'info', msg: 'shutting down workers', why, workers: workers.size });
      // A worker stuck past its own drain is killed: the orchestrator's grace period is finite.
      const backstop = setTimeout(() => {
        for (const w of workers.values()) w.process.kill('SIGKILL');
        reject(new Error(`workers did not drain within ${options.drainTimeoutMs + 5000} ms: killed`));
      }, options.drainTimeoutMs + 5000);
      backstop.unref();
      allExited = () => {
        clearTimeout(backstop);
        resolve();
      };
      for (const w of workers.values()) askToStop(w, why);
      if (workers.size === 0) allExited();
    });
    return stopping;
  };
  // logrotate signals the process it knows (the primary): each worker reopens its decision log.
  process.on('SIGHUP', () => {
    for (const w of workers.values()) w.process.kill('SIGHUP');
  });

  const first = options.firstWorkerPicksPort === true ? 1 : options.count;
  for (let i = 1; i <= first; i++) fork(i);
  return { stop };
}

/** Asks a worker to drain (the message), or signals it when its channel is gone. */
function askToStop(worker: Worker, why: string): void {
  try {
    if (worker.isConnected()) {
      worker.send({ type: WORKER_STOP, why });
      return;
    }
  } catch {
    // the channel closed meanwhile
  }
  worker.process.kill('SIGTERM');
}

/** In a worker: calls `stop` with the primary's reason when the primary asks this worker to stop. */
export function onPrimaryStop(stop: (why: string) => void): void {
  process.on('message', (m: { type?: unknown; why?: unknown }) => {
    if (m?.type === WORKER_STOP) stop(String(m.why));
  });
}

/**
 * In a worker: tells the primary it listens, and serves the primary's metrics collection with
 * `collect` (this worker's own). Returns the function /metrics and the console use to gather every
 * worker's metrics, merged.
 */
export function joinPrimary(
  port: number,
  collect: () => Promise<ResourceMetrics>,
): () => Promise<ResourceMetrics> {
  const pending = new Map<number, (metrics: ResourceMetrics) => void>();
  let nextId = 1;
  const toPrimary = {
    send: (m: MetricsMessage) => (process.connected ? process.send?.(m) : undefined),
  };
  process.on('message', (m: MetricsMessage) => {
    if (m.type === 'riskgate:metrics-collect') {
      void collect().then((metrics) =>
        sendMetrics(toPrimary, {
          type: 'riskgate:metrics-collected',
          id: m.id,
          metrics: plainMetrics(metrics),
        }),
      );
    } else if (m.type === 'riskgate:metrics') {
      pending.get(m.id)?.(m.metrics);
      pending.delete(m.id);
    }
  });
  process.send?.({ type: 'riskgate:listening', port });
  return () =>
    new Promise<ResourceMetrics>((resolve) => {
      const id = nextId++;
      pending.set(id, resolve);
      sendMetrics(toPrimary, { type: 'riskgate:metrics-request', id });
      // The primary answers within its own 2 s bound; this one is a backstop.
      setTimeout(() => {
        if (pending.delete(id)) void collect().then(resolve);
      }, 3000).unref();
    });
}
