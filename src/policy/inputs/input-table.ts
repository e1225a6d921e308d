import type { CelBinding } from '../cel-environment.ts';
import { ADMIN_DEVICES_ROW, ADMIN_USER_ROW } from './admin-rows.ts';
import { HISTORY_ROW, LISTS_ROW, VELOCITY_ROW } from './feature-rows.ts';
import type { InputPolicy, InputRow, InputTable } from './input-row.ts';
import { INPUT_NAMES, type InputName } from './input-values.ts';
import { OUTCOMES_ROW } from './outcome-row.ts';
import { SIGNAL_ROWS } from './signal-rows.ts';

/**
 * The input table: every input a policy can read, one row each, in `INPUT_NAMES` order. The policy
 * engine (CEL environment, analysis, activation, evaluator), the decision service (fetch, answer,
 * "degraded") and the console's decision page loop over these rows. Adding an input is adding a
 * row here (and its name to `INPUT_NAMES`); a table with rows beyond these (`[...INPUT_ROWS, row]`)
 * can be handed to `compilePolicy` (`CompileOptions.inputs`), and everything downstream follows the
 * compiled policy's table.
 */
export const INPUT_ROWS: readonly InputRow<unknown, InputName>[] = [
  ...SIGNAL_ROWS,
  ADMIN_USER_ROW,
  ADMIN_DEVICES_ROW,
  VELOCITY_ROW,
  HISTORY_ROW,
  LISTS_ROW,
  OUTCOMES_ROW,
];

if (INPUT_ROWS.some((row, i) => row.name !== INPUT_NAMES[i]) || INPUT_ROWS.length !== INPUT_NAMES.length)
  throw new Error('the input table is out of step with INPUT_NAMES');

/** The most rows a table can hold: an unavailability mask is a 32-bit integer. */
export const MAX_INPUT_ROWS = 31;

const bindings = new WeakMap<InputTable, readonly CelBinding[]>();

/** The CEL bindings of a table's rows (one array per table: the CEL environment is cached by it). */
export function celBindings(table: InputTable): readonly CelBinding[] {
  let known = bindings.get(table);
  if (known === undefined) {
    if (table.length > MAX_INPUT_ROWS) throw new Error(`an input table holds at most ${MAX_INPUT_ROWS} rows`);
    known = table.map((r) => r.cel);
    bindings.set(table, known);
  }
  return known;
}

/** The table `policy` was compiled against. */
export function tableOf(policy: { inputs?: InputTable | undefined }): InputTable {
  return policy.inputs ?? INPUT_ROWS;
}

/**
 * The inputs the policy reads, in table order: what readiness waits for (src/lifecycle/), what
 * the answer reports and what can make it degraded. Inputs fetched for the shadow policy or for
 * subject binding alone are not among them.
 */
export function inputsNeeded(policy: InputPolicy & { inputs?: InputTable | undefined }): string[] {
  return tableOf(policy)
    .filter((row) => row.readBy(policy))
    .map((row) => row.name);
}
