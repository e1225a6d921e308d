import { z } from 'zod';
import {
  accountIdSchema,
  interactionIdSchema,
  sdkVersionIdSchema,
  serviceIdSchema,
  unitIdSchema,
  type VerificationStatus,
  verificationStatusSchema,
} from '../../signals/identifiers.ts';
import { rfc3339Schema } from '../../timing/rfc3339.ts';

/**
 * The sandbox's observation model: what a sensor SDK reports about one unit (a browser or a mobile
 * app) at one moment. Every signal is computed from these; none is canned. Observations arrive via
 * `POST /api/v1/collections` (Collection token) or a scenario file, and are indexed by
 * (serviceId, accountId), each account's list kept sorted by time.
 */

export const PLATFORMS = ['browser', 'mobile'] as const;
export type Platform = (typeof PLATFORMS)[number];

/**
 * Browser fingerprint fields (docs/vendor-api.md#signal-endpoints names them; the first three are the
 * `browser_profile`).
 */
export const BROWSER_PROFILE_FIELDS = ['browser_name', 'browser_os', 'browser_version'] as const;
export const FULL_FINGERPRINT_FIELDS = [
  ...BROWSER_PROFILE_FIELDS,
  'browser_language',
  'browser_timezone',
  'browser_screen',
  'browser_user_agent',
] as const;
export type FingerprintField = (typeof FULL_FINGERPRINT_FIELDS)[number];

const geoPointSchema = z.object({ lat: z.number().min(-90).max(90), lon: z.number().min(-180).max(180) });

export const ingressSchema = z.object({
  ip: z.string().min(1).optional(),
  city: z.string().min(1).optional(),
  region: z.string().min(1).optional(),
  country: z.string().min(1).optional(),
  continent: z.string().min(1).optional(),
  lat: z.number().min(-90).max(90).optional(),
  lon: z.number().min(-180).max(180).optional(),
});

export const browserFingerprintSchema = z.object({
  browser_name: z.string().min(1).optional(),
  browser_os: z.string().min(1).optional(),
  browser_version: z.string().min(1).optional(),
  browser_language: z.string().min(1).optional(),
  browser_timezone: z.string().min(1).optional(),
  browser_screen: z.string().min(1).optional(),
  browser_user_agent: z.string().min(1).optional(),
});

/**
 * Behavioural input of one browser session. Counts gate scoring (docs/vendor-api.md#signal-thresholds); the
 * timing features are what the remote-access-tool model compares against the user's own earlier sessions:
 * a remote desktop relays input at the remote protocol's frame rate (longer, regular pointer
 * intervals), moves the pointer in jumps rather than paths, and replays key presses with unnatural
 * hold times.
 */
export const sessionInputSchema = z.object({
  mouseEvents: z.number().int().nonnegative(),
  keystrokeEvents: z.number().int().nonnegative(),
  /** Mean milliseconds between pointer-move events. */
  mouseIntervalMs: z.number().nonnegative().optional(),
  /** Share of pointer moves that jump (no intermediate samples), 0..1. */
  mouseJumpRatio: z.number().min(0).max(1).optional(),
  /** Mean key hold (press to release) time, milliseconds. */
  keyDwellMs: z.number().nonnegative().optional(),
});

const deviceList = z.array(z.string().min(1)).max(1000);

/** The sensor payload of an observation (everything but identifiers and time). */
export const observationPayloadShape = {
  platform: z.enum(PLATFORMS),
  gps: geoPointSchema.optional(),
  ingress: ingressSchema.optional(),
  reportedIp: z.string().min(1).optional(),
  wifiNetworks: deviceList.optional(),
  connectedWifi: z.string().min(1).optional(),
  connectedNetworkDevices: deviceList.optional(),
  connectedBleDevices: deviceList.optional(),
  scannedBleDevices: deviceList.optional(),
  nearbyDevices: deviceList.optional(),
  browser: browserFingerprintSchema.optional(),
  session: sessionInputSchema.optional(),
  onCall: z.boolean().optional(),
};

/** One observation as written to `POST /api/v1/collections`. */
export const collectedObservationSchema = z.object({
  serviceId: serviceIdSchema,
  accountId: accountIdSchema,
  unitId: unitIdSchema,
  verificationStatus: verificationStatusSchema,
  interactionId: interactionIdSchema,
  sdkVersionId: sdkVersionIdSchema.optional(),
  /** RFC 3339; default the sandbox clock's now. */
  observedAt: rfc3339Schema.optional(),
  ...observationPayloadShape,
});
export type CollectedObservation = z.infer<typeof collectedObservationSchema>;

/** At most this many observations per collection request. */
export const MAX_COLLECTION_ITEMS = 1000;
export const collectionBodySchema = z.array(collectedObservationSchema).min(1).max(MAX_COLLECTION_ITEMS);

export type GeoPoint = z.infer<typeof geoPointSchema>;
export type Ingress = z.infer<typeof ingressSchema>;
export type BrowserFingerprint = z.infer<typeof browserFingerprintSchema>;
export type SessionInput = z.infer<typeof sessionInputSchema>;

/** A stored observation. `timeMs` is the observation time (sandbox clock, epoch milliseconds). */
export interface Observation {
  serviceId: string;
  accountId: string;
  unitId: string;
  verificationStatus: VerificationStatus;
  interactionId: string;
  sdkVersionId?: string | undefined;
  platform: Platform;
  timeMs: number;
  gps?: GeoPoint | undefined;
  ingress?: Ingress | undefined;
  reportedIp?: string | undefined;
  wifiNetworks?: string[] | undefined;
  connectedWifi?: string | undefined;
  connectedNetworkDevices?: string[] | undefined;
  connectedBleDevices?: string[] | undefined;
  scannedBleDevices?: string[] | undefined;
  nearbyDevices?: string[] | undefined;
  browser?: BrowserFingerprint | undefined;
  session?: SessionInput | undefined;
  onCall?: boolean | undefined;
  /** Insertion sequence: orders observations with the same time. */
  seq: number;
}

/** RFC 3339 (UTC, millisecond precision) of an observation time. */
export function formatObservationTime(timeMs: number): string {
  return new Date(timeMs).toISOString();
}
