import { z } from 'zod';
import { rfc3339Schema } from '../timing/rfc3339.ts';
import { verificationStatusSchema } from './identifiers.ts';

/**
 * Response shapes of the Trust Signals API (docs/vendor-api.md#signal-envelope). The client parses every
 * answer with these; the policy engine derives its CEL types from the `result` objects; the sandbox's
 * tests check its answers against them. One definition, three users.
 */

export const FAILURE_REASONS = [
  'insufficient_observations',
  'unsupported_platform',
  'no_user_baseline',
  'forbidden',
  'internalError',
] as const;
export const failureReasonSchema = z.enum(FAILURE_REASONS);
export type FailureReason = z.infer<typeof failureReasonSchema>;

export const SUPPORTING_SIGNAL_TYPES = [
  'reportedIpOverlap',
  'wifiNetworkOverlap',
  'connectedWifiNetworkOverlap',
  'connectedNetworkDeviceOverlap',
  'connectedBleDeviceOverlap',
  'scannedBleDeviceOverlap',
  'nearbyDeviceOverlap',
  'locationOverlap',
  'ingressIpOverlap',
  'ingressIpCityOverlap',
  'ingressIpRegionOverlap',
  'ingressIpCountryOverlap',
  'ingressIpContinentOverlap',
] as const;
export type SupportingSignalType = (typeof SUPPORTING_SIGNAL_TYPES)[number];
export const INGRESS_SUPPORTING_SIGNAL_TYPES: readonly SupportingSignalType[] = [
  'ingressIpOverlap',
  'ingressIpCityOverlap',
  'ingressIpRegionOverlap',
  'ingressIpCountryOverlap',
  'ingressIpContinentOverlap',
];

export const supportingSignalSchema = z.object({
  type: z.enum(SUPPORTING_SIGNAL_TYPES),
  details: z.object({ matched: z.boolean(), matchCount: z.number().int().nullable() }),
});

export const proximityMatchSchema = z.object({
  proximityConfidence: z.number().min(0).max(1),
  supportingSignals: z.array(supportingSignalSchema),
});

export const observationTimesByUnitSchema = z.object({
  baselineUnitId: rfc3339Schema.optional(),
  subjectUnitId: rfc3339Schema.optional(),
});

const datapointCommon = {
  name: z.string(),
  observationTime: rfc3339Schema,
  unitId: z.string(),
  verificationStatus: z.string(),
  interactionId: z.string(),
};
export const datapointSchema = z.discriminatedUnion('valueType', [
  z.object({ ...datapointCommon, valueType: z.literal('number'), value: z.number() }),
  z.object({ ...datapointCommon, valueType: z.literal('string'), value: z.string() }),
  z.object({ ...datapointCommon, valueType: z.literal('boolean'), value: z.boolean() }),
  z.object({ ...datapointCommon, valueType: z.literal('geo'), lat: z.number(), lon: z.number() }),
  z.object({ ...datapointCommon, valueType: z.literal('device'), deviceName: z.string(), mac: z.string() }),
]);

export const fastestPairSchema = z.object({
  fromObservationTime: rfc3339Schema,
  toObservationTime: rfc3339Schema,
  fromUnitId: z.string(),
  fromVerificationStatus: z.string(),
  fromInteractionId: z.string(),
  toUnitId: z.string(),
  toVerificationStatus: z.string(),
  toInteractionId: z.string(),
  distanceKm: z.number(),
  elapsedSeconds: z.number().int(),
  speedKmh: z.number(),
});

export const geovelocitySourceSchema = z.object({
  locationSource: z.string(),
  evaluated: z.boolean(),
  anomaly: z.boolean(),
  maxSpeedKmh: z.number().nullable(),
  thresholdKmh: z.number().nullable(),
  evaluatedPairCount: z.number().int(),
  fastestPair: fastestPairSchema.nullable(),
});

/** `result` objects, per signal. */
export const geolocationResultSchema = z.object({ datapoints: z.array(datapointSchema) });
export const geovelocityResultSchema = z.object({
  anomaly: z.boolean(),
  maxSpeedKmh: z.number().nullable(),
  sources: z.array(geovelocitySourceSchema),
});
export const activeCallResultSchema = z.object({ onCall: z.boolean() });
export const latestProximityResultSchema = proximityMatchSchema;
export const historicalProximityResultSchema = z.object({
  bestMatch: proximityMatchSchema.nullable(),
  bestIngressMatch: proximityMatchSchema.nullable(),
});
export const newBrowserResultSchema = z.object({ known: z.boolean() });
export const remoteAccessToolResultSchema = z.object({
  anomaly: z.boolean(),
  anomalyConfidence: z.number().min(0).max(1),
});

const envelopeBase = {
  signalType: z.string(),
  success: z.boolean(),
  reason: failureReasonSchema.optional(),
  observationTime: rfc3339Schema.optional(),
};

/** Builds the envelope schema of one signal; `extra` are its additional top-level fields. */
function envelope<R extends z.ZodType, E extends z.ZodRawShape>(result: R, extra: E) {
  return z.object({ ...envelopeBase, result: result.optional(), ...extra });
}

const echoedIds = {
  unitId: z.string().optional(),
  verificationStatus: verificationStatusSchema.optional(),
  interactionId: z.string().optional(),
};

export const geolocationResponseSchema = envelope(geolocationResultSchema, {});
export const geovelocityResponseSchema = envelope(geovelocityResultSchema, {});
export const activeCallResponseSchema = envelope(activeCallResultSchema, echoedIds);
export const latestProximityResponseSchema = envelope(latestProximityResultSchema, {
  observationTimesByUnit: observationTimesByUnitSchema.optional(),
});
export const historicalProximityResponseSchema = envelope(historicalProximityResultSchema, {
  observationTimesByUnit: observationTimesByUnitSchema.optional(),
});
export const newBrowserResponseSchema = envelope(newBrowserResultSchema, {
  ...echoedIds,
  mismatchedFields: z.array(z.string()).optional(),
});
export const remoteAccessToolResponseSchema = envelope(remoteAccessToolResultSchema, echoedIds);

export const remoteAccessToolBatchItemSchema = z.object({
  accountId: z.string(),
  unitId: z.string(),
  verificationStatus: z.string(),
  interactionId: z.string(),
  success: z.boolean(),
  reason: failureReasonSchema.optional(),
  result: remoteAccessToolResultSchema.optional(),
  observationTime: rfc3339Schema.optional(),
});
export const remoteAccessToolBatchResponseSchema = z.object({
  signalType: z.literal('remote_access_tool'),
  results: z.array(remoteAccessToolBatchItemSchema),
});

/** Error body for 400/401/403 (docs/vendor-api.md#signal-errors). */
export const signalsErrorBodySchema = z.object({ error: z.string(), message: z.string() });

export type GeolocationResponse = z.infer<typeof geolocationResponseSchema>;
export type GeovelocityResponse = z.infer<typeof geovelocityResponseSchema>;
export type ActiveCallResponse = z.infer<typeof activeCallResponseSchema>;
export type LatestProximityResponse = z.infer<typeof latestProximityResponseSchema>;
export type HistoricalProximityResponse = z.infer<typeof historicalProximityResponseSchema>;
export type NewBrowserResponse = z.infer<typeof newBrowserResponseSchema>;
export type RemoteAccessToolResponse = z.infer<typeof remoteAccessToolResponseSchema>;
export type RemoteAccessToolBatchItem = z.infer<typeof remoteAccessToolBatchItemSchema>;
export type RemoteAccessToolBatchResponse = z.infer<typeof remoteAccessToolBatchResponseSchema>;

/** The `signalType` string of each endpoint, and riskgate's name for each signal. */
export const SIGNAL_TYPES = {
  geolocation: 'geolocation',
  geovelocity: 'geovelocity',
  activeCall: 'active_call',
  latestProximity: 'latest_proximity',
  historicalProximity: 'historical_proximity',
  newBrowser: 'new_browser',
  remoteAccessTool: 'remote_access_tool',
} as const;
export type SignalName = keyof typeof SIGNAL_TYPES;
