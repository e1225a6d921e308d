import type { Component, MetricsRegistry } from '../lifecycle/component.ts';
import { AdmissionControl, type AdmissionOptions } from './admission-control.ts';

/** Admission control: its event-loop delay sampler runs from start to stop. */
export function admissionComponent(options: AdmissionOptions): Component<AdmissionControl, MetricsRegistry> {
  return {
    name: 'admission',
    start() {
      const admission = new AdmissionControl(options);
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
