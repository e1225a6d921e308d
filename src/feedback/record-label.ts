import { type DecisionLog, DISCARD_DECISION_LOG } from '../decision-log/decision-log.ts';
import { DECISION_LOG_SCHEMA_VERSION } from '../decision-log/decision-record.ts';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import type { Label } from '../replay/replay-labels.ts';
import type { DecisionMemory, LabelEvent } from './decision-memory.ts';

/**
 * Recording a label, wherever it comes from (`POST /feedback`, the console's label form): the
 * recent decisions say whether this key may label the decision and what it replaces, and the
 * decision log keeps it for good as a `feedback` line (`riskgate replay --labels`, the decision
 * store).
 */

export interface LabelInput {
  decisionId: string;
  label: Label;
  note?: string | undefined;
  /** The id of the key that gives it (never the key). */
  keyId: string;
  /** `operator` may label any decision; a `caller` only the ones its key was answered. */
  as: 'caller' | 'operator';
  /** The operator's name, when a named operator gives it (the console). */
  operatorName?: string | undefined;
}

export interface RecordedLabel {
  decisionId: string;
  label: Label;
  recordedAt: string;
  labelledBy: string;
  /** The decision's labels as this riskgate remembers them, oldest first. */
  history: readonly LabelEvent[];
}

/** Refuses (`RG_ERR_DECISION_LOG_UNAVAILABLE`) while labels would be lost: the decision log is off. */
export function assertLabelsKept(decisionLog: DecisionLog): void {
  if (decisionLog === DISCARD_DECISION_LOG) {
    throw new RiskgateError(
      ErrorCode.DECISION_LOG_UNAVAILABLE,
      'Feedback is kept in the decision log, and RISKGATE_DECISION_LOG is off: it would be lost.',
    );
  }
}

/**
 * Records `input` in `o.decisions` and the decision log. Rejects with `RG_ERR_DECISION_LOG_UNAVAILABLE`
 * when the decision log is off (the label would be lost) and `RG_ERR_NOT_FOUND` when a caller
 * labels a decision its key was not answered.
 */
export async function recordLabel(
  o: { decisions: DecisionMemory; decisionLog: DecisionLog },
  input: LabelInput,
): Promise<RecordedLabel> {
  assertLabelsKept(o.decisionLog);
  const recordedAt = new Date().toISOString();
  const event = { label: input.label, labelledBy: input.keyId, at: recordedAt };
  // A caller labels only what its own key was answered. An operator labels any decision, also one
  // riskgate does not know (older than its memory, another replica's).
  const outcome = await o.decisions.label(input.decisionId, event, input.as === 'operator');
  if (!outcome.labelled) {
    throw new RiskgateError(
      ErrorCode.NOT_FOUND,
      `No recent decision ${input.decisionId} made with this key (feedback takes the key that asked for the decision, or an operator key).`,
    );
  }
  const { previous } = outcome;
  o.decisionLog.write({
    kind: 'feedback',
    schemaVersion: DECISION_LOG_SCHEMA_VERSION,
    at: recordedAt,
    decisionId: input.decisionId,
    label: input.label,
    labelledBy: input.keyId,
    labelledAs: input.as,
    ...(input.operatorName !== undefined && { operator: input.operatorName }),
    ...(previous !== undefined && { previousLabel: previous.label }),
    ...(!outcome.known && { decisionKnown: false }),
    ...(input.note !== undefined && { note: input.note }),
  });
  return {
    decisionId: input.decisionId,
    label: input.label,
    recordedAt,
    labelledBy: input.keyId,
    history: outcome.history,
  };
}
