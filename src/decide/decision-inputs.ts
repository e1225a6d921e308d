import type { InputContext, InputDraft, InputRow, InputTable } from '../policy/inputs/input-row.ts';
import { tableOf } from '../policy/inputs/input-table.ts';
import { SHADOW_SIGNAL_ROWS } from '../policy/inputs/signal-rows.ts';
import type { CompiledPolicy, PolicyInput, PolicySignalName } from '../policy/policy-types.ts';
import { type CallTiming, type Gathered, type GatherOptions, gather, type InputSource } from './gather.ts';

/**
 * What a decision reads: the rows of the active policy's input table (src/policy/inputs/: each
 * signal, the Admin user and devices, velocity, history, the lists, and any row added), plus a
 * fetch-only row for each signal only the shadow policy reads. `startInputs` fetches every row
 * the decision needs at once through `gather`, under the decision's one deadline; each row lands
 * its outcome in the policy's input.
 */

export type { InputContext, InputPorts } from '../policy/inputs/input-row.ts';

/** Signals only the shadow policy reads: fetched beside the others, kept out of the active decision. */
export function shadowOnlySignals(policy: CompiledPolicy, shadow: CompiledPolicy | undefined) {
  if (shadow === undefined) return [];
  return [...shadow.requirements.signals].filter((s) => !policy.requirements.signals.has(s));
}

const SHADOW_ROWS = new Map(SHADOW_SIGNAL_ROWS.map((r) => [r.name, r]));

/**
 * The rows of one decision, in the order they start: the signals the active policy reads, those
 * only the shadow reads, then the other inputs either reads (or subject binding needs).
 */
function decisionRows(
  table: InputTable,
  ctx: InputContext,
  shadowOnly: readonly PolicySignalName[],
): InputRow<unknown, string>[] {
  const rows: InputRow<unknown, string>[] = [];
  let signalsEnd = 0;
  for (const r of table) {
    if (!r.needed(ctx)) continue;
    if (r.cel.variable === 'signals') rows.splice(signalsEnd++, 0, r);
    else rows.push(r);
  }
  for (const name of shadowOnly) rows.splice(signalsEnd++, 0, SHADOW_ROWS.get(name)!);
  return rows;
}

/**
 * A row to fetch, as `gather` takes it. A class, not an object literal with a `fetch` closure: one
 * is made per row of every decision, and tsx's `keepNames` wraps each such closure in a
 * `defineProperty` call (issue 32).
 */
class RowSource implements InputSource {
  readonly name: string;
  readonly timeoutMs: number;
  readonly #row: InputRow<unknown, string>;
  readonly #ctx: InputContext;

  constructor(row: InputRow<unknown, string>, ctx: InputContext) {
    this.name = row.callName;
    this.timeoutMs = row.timeoutMs(ctx);
    this.#row = row;
    this.#ctx = ctx;
  }

  fetch(call: Parameters<InputSource['fetch']>[0]) {
    const ctx = this.#ctx;
    return this.#row.fetch(
      ctx,
      ctx.traceparent === undefined ? call : { ...call, traceparent: ctx.traceparent },
    );
  }
}

/** The inputs being fetched: the draft so far, the rows fetched and their `gather`. */
export interface StartedInputs {
  draft: InputDraft;
  fetched: readonly InputRow<unknown, string>[];
  gathering: Promise<Gathered>;
}

/**
 * Starts fetching every input the decision needs, all at once under the deadline (`gather`); an
 * input that cannot be fetched for this login is unavailable at once, with its reason, and costs
 * no call. The caller awaits `gathering` and hands it to `landInputs`: one async layer for the
 * decision's inputs, not two (issue 32).
 */
export function startInputs(
  ctx: InputContext & { policy: CompiledPolicy },
  shadowOnly: readonly PolicySignalName[],
  options: GatherOptions,
): StartedInputs {
  // The policy input's fixed fields first, in one order: every decision's input has one shape.
  const draft: InputDraft = { values: { signals: {}, user: undefined, devices: [] }, shadowSignals: {} };
  const fetched: InputRow<unknown, string>[] = [];
  const sources: InputSource[] = [];
  for (const r of decisionRows(tableOf(ctx.policy), ctx, shadowOnly)) {
    const applies = r.applies(ctx);
    if (applies !== 'ok') {
      r.land(draft, { status: 'unavailable', reason: applies });
      continue;
    }
    fetched.push(r);
    sources.push(new RowSource(r, ctx));
  }
  return { draft, fetched, gathering: gather(sources, options) };
}

/** Each fetched row's outcome landed in the draft. */
export function landInputs(
  started: StartedInputs,
  { outcomes, calls }: Gathered,
): { draft: InputDraft; calls: CallTiming[] } {
  const { draft, fetched } = started;
  for (let i = 0; i < fetched.length; i++) fetched[i]!.land(draft, outcomes[i]!);
  return { draft, calls };
}

/** The policy's input from what was gathered (the shadow-only signals left out). */
export function policyInputOf(draft: InputDraft, request: PolicyInput['request'], now: Date): PolicyInput {
  const input = draft.values as PolicyInput;
  input.request = request;
  input.now = now;
  return input;
}
