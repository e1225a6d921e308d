import type { Label } from '../replay/replay-labels.ts';

/**
 * What `POST /feedback` needs of the recent decisions, whoever keeps them: this process
 * (`RecentDecisions`, RISKGATE_WORKERS=1) or the cluster's primary over IPC (`IpcRecentDecisions`).
 */

/** One label given to a decision: what, by which key (its id, never the key), when. */
export interface LabelEvent {
  label: Label;
  labelledBy: string;
  at: string;
}

/** What became of a label: refused (unknown, or another key's decision, to a caller), or kept. */
export type LabelOutcome =
  | { labelled: false }
  | {
      labelled: true;
      /** Whether the decision was remembered (an operator may label one that is not). */
      known: boolean;
      /** The label this one replaces, if any. */
      previous?: LabelEvent | undefined;
      /** The decision's labels, oldest first, this one last. */
      history: readonly LabelEvent[];
    };

export interface DecisionMemory {
  /** Records that the key `keyId` was answered `decisionId`. Never waits: /decide calls it before answering. */
  remember(decisionId: string, keyId: string): void;
  /**
   * Adds `event` to `decisionId`'s labels when its key (`event.labelledBy`) asked for the
   * decision, or whatever the decision when `operator`. Rejects with `RG_ERR_FEEDBACK_UNAVAILABLE`
   * when the keeper of the decisions does not answer in time.
   */
  label(decisionId: string, event: LabelEvent, operator: boolean): Promise<LabelOutcome>;
  /**
   * Whether the key `keyId` was answered `decisionId` (an outcome of it may be reported with that
   * key: src/outcomes/). Rejects like `label` when the keeper does not answer in time.
   */
  answered(decisionId: string, keyId: string): Promise<boolean>;
}
