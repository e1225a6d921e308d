import type { RiskgateConfig } from '../config/riskgate-config.ts';
import type { Component, MetricsRegistry } from '../lifecycle/component.ts';
import { type Clock, systemClock } from '../timing/clock.ts';
import { AdmissionControl } from './admission-control.ts';

/** Admission control (RISKGATE_MAX_IN_FLIGHT, RISKGATE_MAX_EVENT_LOOP_DELAY_MS): its event-loop delay sampler runs from start to stop. */
export function admissionComponent(
  config: Pick<RiskgateConfig, 'maxInFlight' | 'maxEventLoopDelayMs' | 'deadlineMs'>,
  clock: Clock = systemClock,
): Component<AdmissionControl, MetricsRegistry> {
  return {
    name: 'admission',
    start() {
      const admission = new AdmissionControl({
        maxInFlight: config.maxInFlight,
        maxEventLoopDelayMs: config.maxEventLoopDelayMs,
        deadlineMs: config.deadlineMs,
        clock,
      });
      admission.start();
      return {
        handle: admission,
        stop: () => admission.stop(),
        observe(metrics) {
          metrics.observeGauge(
            'riskgate_decisions_in_flight',
            'Decisions admitted and not yet answered (admission control sheds past RISKGATE_MAX_IN_FLIGHT)',
            () => admission.inFlight,
          );
        },
      };
    },
  };
}
