import { withTimeout } from '../timing/with-timeout.ts';

/**
 * The one request/reply channel between a node:cluster worker and its primary: a worker's request
 * carries an `id`, the primary answers with an `IpcReply` of the same `id`, and the worker matches
 * replies to requests here, with a timeout, whatever the request (the embedded feature store, the
 * recent decisions `POST /feedback` checks). Messages a request does not wait for (a decision to
 * remember) are sent as they are.
 */

/** The `type` of every reply from the primary. */
export const IPC_REPLY = 'riskgate:reply';

/** The primary's answer to the request `id`: its result, or the error it threw (a message). */
export interface IpcReply {
  type: typeof IPC_REPLY;
  id: number;
  result?: unknown;
  error?: string;
}

/** A request as sent: its own `type` and fields, and the `id` its reply carries. */
export type IpcRequest<M extends { type: string }> = M & { id: number };

/** In the primary: the reply to `request`, from what `answer` returns or throws. */
export function replyTo(request: { id: number }, answer: () => unknown): IpcReply {
  try {
    return { type: IPC_REPLY, id: request.id, result: answer() };
  } catch (error) {
    return { type: IPC_REPLY, id: request.id, error: String(error) };
  }
}

export interface IpcRequestsOptions {
  /** Sends to the primary (`process.send`); false or a throw when the channel is closed. */
  send: (message: unknown) => boolean;
  /** Longest wait for a reply, milliseconds. Default 1000. */
  timeoutMs?: number;
}

/** In a worker: sends requests to the primary and matches its replies (fed in by `receive`). */
export class IpcRequests {
  readonly #send: IpcRequestsOptions['send'];
  readonly #timeoutMs: number;
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  #nextId = 1;

  constructor(options: IpcRequestsOptions) {
    this.#send = options.send;
    this.#timeoutMs = options.timeoutMs ?? 1000;
  }

  /** A message from the primary; true when it was a reply to one of these requests. */
  receive(message: unknown): boolean {
    const m = message as Partial<IpcReply> | null;
    if (m?.type !== IPC_REPLY || typeof m.id !== 'number') return false;
    const waiter = this.#pending.get(m.id);
    this.#pending.delete(m.id);
    if (m.error !== undefined) waiter?.reject(new Error(m.error));
    else waiter?.resolve(m.result);
    return true;
  }

  /**
   * Sends `message` as a request and resolves with the primary's result. Rejects with
   * `unavailable(why)` when the channel is closed or no reply came within the timeout (a reply
   * after that is dropped), and with the primary's error otherwise.
   */
  request<T, M extends { type: string }>(message: M, unavailable: (why: string) => Error): Promise<T> {
    const id = this.#nextId++;
    const reply = new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: (v) => resolve(v as T), reject });
      let sent = false;
      try {
        sent = this.#send({ ...message, id } satisfies IpcRequest<M>);
      } catch {
        sent = false;
      }
      if (!sent) {
        this.#pending.delete(id);
        reject(unavailable('the IPC channel to the primary is closed'));
      }
    });
    return withTimeout(reply, {
      timeoutMs: this.#timeoutMs,
      onTimeout: () => {
        this.#pending.delete(id);
        return unavailable(`the primary did not answer within ${this.#timeoutMs} ms`);
      },
      ref: false,
    });
  }

  /** Rejects every request still waiting with `error` (the store using the channel closed). */
  close(error: Error): void {
    for (const [, w] of this.#pending) w.reject(error);
    this.#pending.clear();
  }
}
