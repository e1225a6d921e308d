import type { ActionOutcome } from '../actions/action-dispatcher.ts';

/**
 * The lines of the decision log: the format's version, and the line of an action's final outcome.
 * A decision's own line is the decide room's (src/decide/decision-line.ts).
 */

/**
 * The version of the line format, in every line. Raised when a field changes meaning or goes away
 * (adding one does not), so replay and log consumers can tell what they read.
 */
export const DECISION_LOG_SCHEMA_VERSION = 1;

export interface ActionLine extends ActionOutcome {
  kind: 'action';
  schemaVersion: typeof DECISION_LOG_SCHEMA_VERSION;
  at: string;
}

/** The line of a queued action's final outcome. */
export function actionLine(outcome: ActionOutcome): ActionLine {
  return {
    kind: 'action',
    schemaVersion: DECISION_LOG_SCHEMA_VERSION,
    at: new Date().toISOString(),
    ...outcome,
  };
}
