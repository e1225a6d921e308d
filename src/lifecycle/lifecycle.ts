import {
  type Component,
  holdsBack,
  type InputWarmth,
  type LifecycleLog,
  type RouteMount,
  type StartedComponent,
  type StopReason,
} from './component.ts';

/**
 * Starts components in order and stops them in reverse, with one teardown for both a stop and a
 * start that failed half-way: whatever started is stopped, whatever did not is never touched.
 */
export interface LifecycleOptions<R> {
  /** The metrics registry each started component's `observe` is given (read once it started). */
  registry: () => R;
  log: LifecycleLog;
  /**
   * Called before each component starts, with its name; a throw fails that start (tests inject a
   * failing component this way). Default none.
   */
  beforeStart?: ((name: string) => void | Promise<void>) | undefined;
}

/** Which inputs' warmth `readiness` checks, and how long one may fall behind once warm. */
export interface ReadinessInputs {
  /** Whether the active policy reads the input (`token`, `history`, `lists`). */
  reads(input: string): boolean;
  /** How long an input that was warm may be behind before the process is not ready, milliseconds. */
  graceMs: number;
}

/** An input's warmth as `GET /readyz` reports it. */
export interface InputReport {
  state: InputWarmth['state'];
  reason?: string;
  behindSeconds?: number;
}

/** What `GET /readyz` answers: the checks, and the warmth of the inputs the active policy reads. */
export interface Readiness {
  ready: boolean;
  checks: Record<string, boolean>;
  inputs?: Record<string, InputReport>;
}

function reportOf(w: InputWarmth): InputReport {
  const report: InputReport = { state: w.state };
  if (w.state === 'warm') return report;
  if (w.reason !== undefined) report.reason = w.reason;
  if (w.behindSeconds !== undefined) report.behindSeconds = Math.round(w.behindSeconds);
  return report;
}

export class Lifecycle<R> {
  readonly #options: LifecycleOptions<R>;
  readonly #started: { name: string; component: StartedComponent<unknown, R> }[] = [];
  #stopping: Promise<void> | undefined;
  #inputs: ReadinessInputs | undefined;

  constructor(options: LifecycleOptions<R>) {
    this.#options = options;
  }

  /** Starts `component` after the ones already started; its handle. Refused once stopping. */
  async start<H>(component: Component<H, R>): Promise<H> {
    if (this.#stopping !== undefined) throw new Error(`${component.name}: not started, shutting down`);
    await this.#options.beforeStart?.(component.name);
    const started = await component.start();
    this.#started.push({ name: component.name, component: started });
    started.observe?.(this.#options.registry());
    return started.handle;
  }

  /** The started components' names, in start order. */
  names(): string[] {
    return this.#started.map((s) => s.name);
  }

  /** `GET /healthz` details: every started component's, merged in start order. */
  health(): Record<string, unknown> {
    return Object.assign({}, ...this.#started.map((s) => s.component.health?.() ?? {}));
  }

  /**
   * From now on `readiness` counts the warmth of the inputs `inputs.reads` names (the active
   * policy's, once it is loaded); before, none.
   */
  checkInputs(inputs: ReadinessInputs): void {
    this.#inputs = inputs;
  }

  /**
   * `GET /readyz`: every started component's checks; ready while all pass. An input's warmth
   * counts only when `inputs.reads` (default: what `checkInputs` set) says the active policy reads
   * it, and fails only while it holds the process back (`holdsBack`, with `inputs.graceMs`).
   */
  readiness(inputs = this.#inputs): Readiness {
    const checks: Record<string, boolean> = {};
    const warmth: Record<string, InputReport> = {};
    const nowMs = Date.now();
    for (const s of this.#started) {
      for (const [name, check] of Object.entries(s.component.ready?.() ?? {})) {
        if (typeof check === 'boolean') {
          checks[name] = check;
          continue;
        }
        if (inputs === undefined || !inputs.reads(name)) continue;
        checks[name] = !holdsBack(check, nowMs, inputs.graceMs);
        warmth[name] = reportOf(check);
      }
    }
    const ready = Object.values(checks).every(Boolean);
    return Object.keys(warmth).length === 0 ? { ready, checks } : { ready, checks, inputs: warmth };
  }

  /** The routes of every started component, in start order. */
  routes(): RouteMount[] {
    return this.#started.flatMap((s) => s.component.routes ?? []);
  }

  /**
   * Stops every started component in reverse start order, each awaited before the next. A stop
   * that throws is logged and the rest still stop; the first such error is thrown at the end.
   * Idempotent: a second call returns the first one's promise, whatever its reason (a fatal
   * error during a graceful stop leaves that stop to finish, bounded by the caller's backstop).
   */
  stop(deadlineAtMs: number, reason: StopReason = 'graceful'): Promise<void> {
    this.#stopping ??= this.#teardown(deadlineAtMs, reason);
    return this.#stopping;
  }

  /** Whether `stop` was called. */
  get stopping(): boolean {
    return this.#stopping !== undefined;
  }

  async #teardown(deadlineAtMs: number, reason: StopReason): Promise<void> {
    const errors: unknown[] = [];
    for (const { name, component } of this.#started.toReversed()) {
      try {
        await component.stop?.(deadlineAtMs, reason);
      } catch (error) {
        errors.push(error);
        this.#options.log({
          level: 'error',
          msg: 'component did not stop cleanly',
          component: name,
          error: String(error),
        });
      }
    }
    if (errors.length > 0) throw errors[0];
  }
}

/**
 * Starts components through `start`; when it throws, stops what it started (bounded by
 * `teardownMs` from then) and rethrows the start's error (a stop's error is only logged).
 */
export async function startOrTearDown<R, T>(
  lifecycle: Lifecycle<R>,
  teardownMs: number,
  start: (lifecycle: Lifecycle<R>) => Promise<T>,
): Promise<T> {
  try {
    return await start(lifecycle);
  } catch (error) {
    await lifecycle.stop(Date.now() + teardownMs).catch(() => {});
    throw error;
  }
}
