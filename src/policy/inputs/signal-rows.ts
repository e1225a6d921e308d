import type { Activation } from '../cel-environment.ts';
import { SIGNAL_VIEW_TYPES } from '../cel-environment.ts';
import { SIGNAL_FILLS } from '../policy-activation.ts';
import {
  type InputContext,
  type InputReport,
  type InputRow,
  type InputValues,
  inputRow,
  leafFacts,
  unavailableReport,
} from './input-row.ts';
import {
  POLICY_SIGNAL_NAMES,
  type PolicySignalName,
  type SignalOutcome,
  type SignalResponses,
} from './input-values.ts';
import { applicability, buildSignalQuery } from './signal-queries.ts';
import { MISSING } from './unavailable-reason.ts';

/**
 * The Trust Signals rows: one per signal a policy reads (`signals.<name>` in CEL), each fetched
 * from the vendor with the query `signal-queries.ts` builds, and a fetch-only twin for a signal
 * only the shadow policy reads (kept out of the active decision).
 */

type SupportingSignals = readonly { type: string; details: { matched: boolean } }[] | undefined;

/** The supporting signals that matched, by type: what a policy reads (`matchedSignals`). */
function matchedSignals(list: SupportingSignals): string[] {
  const out: string[] = [];
  if (list !== undefined) for (const s of list) if (s.details.matched) out.push(s.type);
  return out;
}

function proximityMatch(
  m: { proximityConfidence: number; supportingSignals?: SupportingSignals } | null | undefined,
) {
  if (m === null || m === undefined) return null;
  return { proximityConfidence: m.proximityConfidence, matchedSignals: matchedSignals(m.supportingSignals) };
}

/**
 * The part of a signal's `result` a policy can read, small: the hot path serialises it on every
 * answer, and the decision log keeps the vendor's whole answer for replay.
 */
function compactResult(
  name: PolicySignalName,
  response: SignalResponses[PolicySignalName],
): object | undefined {
  const result = response.result;
  if (result === undefined) return undefined;
  switch (name) {
    case 'latestProximity':
      return proximityMatch(result as SignalResponses['latestProximity']['result']) ?? undefined;
    case 'historicalProximity': {
      const r = result as NonNullable<SignalResponses['historicalProximity']['result']>;
      return { bestMatch: proximityMatch(r.bestMatch), bestIngressMatch: proximityMatch(r.bestIngressMatch) };
    }
    case 'geovelocity': {
      const r = result as NonNullable<SignalResponses['geovelocity']['result']>;
      const out: Record<string, unknown> = { anomaly: r.anomaly, maxSpeedKmh: r.maxSpeedKmh };
      let fastest = -1;
      for (const source of r.sources) {
        if (source.thresholdKmh !== null && out.thresholdKmh === undefined)
          out.thresholdKmh = source.thresholdKmh;
        const pair = source.fastestPair;
        if (pair !== null && pair.speedKmh > fastest) {
          fastest = pair.speedKmh;
          out.distanceKm = pair.distanceKm;
          out.elapsedSeconds = pair.elapsedSeconds;
          if (source.thresholdKmh !== null) out.thresholdKmh = source.thresholdKmh;
        }
      }
      return out;
    }
    case 'geolocation': {
      const r = result as NonNullable<SignalResponses['geolocation']['result']>;
      const out: Record<string, unknown> = {};
      for (const d of r.datapoints) {
        if (d.valueType === 'geo') out[d.name === 'geo' ? 'gps' : d.name] = { lat: d.lat, lon: d.lon };
        else if (d.valueType === 'string' && d.name.startsWith('ingress_ip_')) out[d.name] = d.value;
      }
      return out;
    }
    default:
      // remoteAccessTool, newBrowser, activeCall: a few scalars already.
      return result;
  }
}

/** A signal's report in the answer: the vendor's verdict, compacted. */
function signalReport(
  name: PolicySignalName,
  outcome: SignalOutcome,
  treatment: string | undefined,
): InputReport {
  if (outcome.status === 'unavailable') return unavailableReport(outcome.reason, treatment);
  const response = outcome.response;
  const report: InputReport & { status: 'ok' } = { status: 'ok', success: response.success };
  if (response.reason !== undefined) report.reason = response.reason;
  const observationTime =
    'observationTimesByUnit' in response
      ? (response.observationTimesByUnit?.subjectUnitId ?? response.observationTime)
      : response.observationTime;
  if (observationTime !== undefined) report.observationTime = observationTime;
  const result = compactResult(name, response);
  if (result !== undefined) report.result = result as Record<string, unknown>;
  if ('mismatchedFields' in response && response.mismatchedFields !== undefined) {
    report.mismatchedFields = response.mismatchedFields;
  }
  return report;
}

/** A signal's row: the active policy's (`signals-<name>`), or the shadow's alone (`shadow-signals-<name>`). */
function signalRow(name: PolicySignalName, reader: 'active' | 'shadow'): InputRow<unknown, PolicySignalName> {
  const settingsOf = (ctx: InputContext) =>
    (reader === 'active' ? ctx.policy : ctx.shadow)?.signalSettings[name];
  const outcomeOf = (values: InputValues) => values.signals[name] as SignalOutcome | undefined;
  const view = SIGNAL_VIEW_TYPES[name];
  const fill = SIGNAL_FILLS[name] as (view: unknown, outcome: SignalOutcome | undefined) => void;
  return inputRow<SignalResponses[PolicySignalName], PolicySignalName>({
    name,
    callName: reader === 'active' ? `signals-${name}` : `shadow-signals-${name}`,
    cel: {
      variable: 'signals',
      field: name,
      type: view.typeName,
      types: [{ name: view.typeName, ctor: view.ctor, fields: view.fields }],
      description: `The ${name} signal.`,
      availability: true,
    },
    readBy: (policy) => policy.requirements.signals.has(name),
    needed: (ctx) =>
      reader === 'active'
        ? ctx.policy.requirements.signals.has(name)
        : ctx.shadow?.requirements.signals.has(name) === true && !ctx.policy.requirements.signals.has(name),
    applies: (ctx) => applicability(name, ctx.request),
    timeoutMs: (ctx) => settingsOf(ctx)?.timeoutMs ?? ctx.budgetMs,
    fetch: (ctx, call) =>
      ctx.ports.signals(name, buildSignalQuery(name, ctx.request, settingsOf(ctx)?.params), call),
    land: (draft, outcome) => {
      const into = reader === 'active' ? draft.values.signals : draft.shadowSignals;
      (into as Record<PolicySignalName, SignalOutcome>)[name] =
        outcome.status === 'ok' ? ({ status: 'ok', response: outcome.value } as SignalOutcome) : outcome;
    },
    reason: (values) => {
      const o = outcomeOf(values);
      return o === undefined ? MISSING : o.status === 'unavailable' ? o.reason : undefined;
    },
    fill: (act: Activation, input) => {
      const v = act.signals[name];
      fill(v, input.signals[name] as SignalOutcome | undefined);
      return v.available;
    },
    report: (values, treatment) => {
      const o = outcomeOf(values);
      return o === undefined ? undefined : signalReport(name, o, treatment);
    },
    describe: (values) => {
      const o = outcomeOf(values);
      if (o === undefined) return undefined;
      return o.status === 'ok'
        ? { label: name, facts: leafFacts(o.response) }
        : { label: name, unavailable: o.reason };
    },
  });
}

/** The active policy's signal rows, in `POLICY_SIGNAL_NAMES` order. */
export const SIGNAL_ROWS: readonly InputRow<unknown, PolicySignalName>[] = POLICY_SIGNAL_NAMES.map((n) =>
  signalRow(n, 'active'),
);

/** The fetch-only twins of the signal rows, for a signal only the shadow policy reads. */
export const SHADOW_SIGNAL_ROWS: readonly InputRow<unknown, PolicySignalName>[] = POLICY_SIGNAL_NAMES.map(
  (n) => signalRow(n, 'shadow'),
);
