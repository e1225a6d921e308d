import { type ActiveCallResponse, SIGNAL_TYPES } from '../../signals/signal-schemas.ts';
import { formatObservationTime, type Observation } from './observation.ts';

/**
 * Active call: `onCall` of the most recent mobile observation that reports call state. Nothing
 * selected → insufficient_observations; only browser observations → unsupported_platform; mobile
 * observations without call state → insufficient_observations.
 */
export function computeActiveCall(selected: readonly Observation[]): ActiveCallResponse {
  const signalType = SIGNAL_TYPES.activeCall;
  if (selected.length === 0) return { signalType, success: false, reason: 'insufficient_observations' };
  let sawMobile = false;
  for (let i = selected.length - 1; i >= 0; i--) {
    const o = selected[i]!;
    if (o.platform !== 'mobile') continue;
    sawMobile = true;
    if (o.onCall === undefined) continue;
    return {
      signalType,
      success: true,
      result: { onCall: o.onCall },
      unitId: o.unitId,
      verificationStatus: o.verificationStatus,
      interactionId: o.interactionId,
      observationTime: formatObservationTime(o.timeMs),
    };
  }
  return {
    signalType,
    success: false,
    reason: sawMobile ? 'insufficient_observations' : 'unsupported_platform',
  };
}
