import { storableText } from '../text/storable-text.ts';

/**
 * Longest reason an operator gives for a change (a list entry, a snooze, a lock-out or unlock, a
 * review), characters: kept with the change and in the audit trail.
 */
export const MAX_REASON_LENGTH = 500;

/** The reason of a change as the lists' and the snoozes' API and forms take it. */
export function changeReason() {
  return storableText().trim().min(1, 'must not be empty').max(MAX_REASON_LENGTH);
}
