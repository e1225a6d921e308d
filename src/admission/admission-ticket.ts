import type { IncomingMessage } from 'node:http';
import type { AdmissionControl } from './admission-control.ts';

/**
 * What admission hands a caller endpoint's handler (`POST /decide`, `POST /feedback`), instead of
 * state shared between modules. The flow:
 *
 * 1. The node:http listener (`shedBeforeApp`, shed-before-app.ts) notes when it read the request's
 *    headers and, unless the policy answers overload with a verdict (which needs the app), asks
 *    admission control; a shed request is answered 503 there. An admitted one carries its ticket
 *    on the `IncomingMessage` the listener passes on (`attachTicket`).
 * 2. In the app, `admit` (admit.ts) takes that ticket from `c.env.incoming` (a request that came
 *    another way, `app.request()` in a test, gets a new one), checks admission unless the listener
 *    did, counts the request in flight and sets the ticket as the `admission` context variable.
 * 3. The handler reads `c.get('admission')`: a decision's deadline runs from `arrivedAtMs`. Once the
 *    answer is done, `admit` releases the ticket (the in-flight count drops).
 */
export class AdmissionTicket {
  /** `performance.now()` when the listener read the request's headers (or the app first saw it). */
  readonly arrivedAtMs: number;
  /** Whether admission control let the request in: at the listener, or in the app. */
  admitted: boolean;
  #leave: AdmissionControl | undefined;
  #enteredAtMs = 0;

  constructor(arrivedAtMs: number, admitted: boolean) {
    this.arrivedAtMs = arrivedAtMs;
    this.admitted = admitted;
  }

  /** Counts the request in flight with `admission` until `release()`. */
  enter(admission: AdmissionControl): void {
    this.#enteredAtMs = admission.enter();
    this.#leave = admission;
  }

  /** Ends the request's in-flight count; a second call does nothing. */
  release(): void {
    const admission = this.#leave;
    this.#leave = undefined;
    admission?.leave(this.#enteredAtMs);
  }
}

/** The ticket's slot on the request: a symbol, so it never meets a property of Node's own. */
const TICKET = Symbol('riskgate.admissionTicket');
type Ticketed = IncomingMessage & { [TICKET]?: AdmissionTicket };

/** The listener's half: the request carries `ticket` into the app. */
export function attachTicket(req: IncomingMessage, ticket: AdmissionTicket): void {
  (req as Ticketed)[TICKET] = ticket;
}

/** The ticket the listener attached to `req`, if it went through one. */
export function ticketOf(req: IncomingMessage | undefined): AdmissionTicket | undefined {
  return (req as Ticketed | undefined)?.[TICKET];
}
