import { beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import type { StatsSnapshot } from '../src/sandbox/stats/request-stats.ts';
import {
  activeCallResponseSchema,
  geolocationResponseSchema,
  geovelocityResponseSchema,
  historicalProximityResponseSchema,
  latestProximityResponseSchema,
  newBrowserResponseSchema,
  remoteAccessToolBatchResponseSchema,
  remoteAccessToolResponseSchema,
} from '../src/signals/signal-schemas.ts';
import { collect, DAY, getSignal, getToken, HOUR, isoAgo, MINUTE } from './sandbox-helpers.ts';
import { sandboxForFile, withSandbox } from './support/test-sandbox.ts';

const sb = sandboxForFile({ scenario: 'empty' });
let token: string;
let writer: string;
/** Observation times are relative to this instant (the sandbox clock at start). */
let base: number;
beforeAll(async () => {
  base = sb.sandbox.clock.now();
  token = await getToken(sb, 'retrieval');
  writer = await getToken(sb, 'collection');
});

const PARIS = { lat: 48.8566, lon: 2.3522 };
const NEW_YORK = { lat: 40.7128, lon: -74.006 };
const at = (msAgo: number) => isoAgo(base, msAgo);

let seq = 0;
/** A fresh account per test, so tests never see each other's observations. */
const account = (name: string) => `${name}-${++seq}`;

async function seed(observations: Record<string, unknown>[]) {
  const res = await collect(sb, writer, observations);
  expect(res.status).toBe(200);
  expect(await res.json()).toEqual({ accepted: observations.length });
}

const SCHEMAS = {
  geolocation: geolocationResponseSchema,
  geovelocity: geovelocityResponseSchema,
  'active-call': activeCallResponseSchema,
  'latest-proximity': latestProximityResponseSchema,
  'historical-proximity': historicalProximityResponseSchema,
  'new-browser': newBrowserResponseSchema,
  'remote-access-tool': remoteAccessToolResponseSchema,
} as const;
type Signal = keyof typeof SCHEMAS;

/** GETs a signal, expects 200 and checks the body against the shared response schema. */
async function signal<K extends Signal>(
  name: K,
  params: Record<string, string>,
): Promise<z.infer<(typeof SCHEMAS)[K]>> {
  const res = await getSignal(sb, name, params, token);
  expect(res.status).toBe(200);
  const body = await res.json();
  // Parse to validate the shape, but return the raw body so exact-equality checks see every key.
  SCHEMAS[name].parse(body);
  return body as z.infer<(typeof SCHEMAS)[K]>;
}

const mobile = (accountId: string, msAgo: number, extra: Record<string, unknown> = {}) => ({
  accountId,
  unitId: `${accountId}-app`,
  verificationStatus: 'verified',
  interactionId: `i-${msAgo}`,
  platform: 'mobile',
  observedAt: at(msAgo),
  ...extra,
});
const browser = (accountId: string, msAgo: number, extra: Record<string, unknown> = {}) => ({
  ...mobile(accountId, msAgo, extra),
  unitId: `${accountId}-web`,
  platform: 'browser',
});

describe('geovelocity', () => {
  it('Paris to New York in one hour is 5837.2 km and 5837.2 km/h, an anomaly over 1000 km/h', async () => {
    const a = account('traveler');
    await seed([mobile(a, 2 * HOUR, { gps: PARIS }), mobile(a, HOUR, { gps: NEW_YORK })]);
    const body = await signal('geovelocity', { accountId: a });
    expect(body.success).toBe(true);
    expect(body.result!.anomaly).toBe(true);
    expect(body.result!.maxSpeedKmh).toBe(5837.2);
    const source = body.result!.sources[0]!;
    expect(source).toMatchObject({
      locationSource: 'gps',
      evaluated: true,
      anomaly: true,
      maxSpeedKmh: 5837.2,
      thresholdKmh: 1000,
      evaluatedPairCount: 1,
    });
    expect(source.fastestPair).toEqual({
      fromObservationTime: at(2 * HOUR),
      toObservationTime: at(HOUR),
      fromUnitId: `${a}-app`,
      fromVerificationStatus: 'verified',
      fromInteractionId: `i-${2 * HOUR}`,
      toUnitId: `${a}-app`,
      toVerificationStatus: 'verified',
      toInteractionId: `i-${HOUR}`,
      distanceKm: 5837.2,
      elapsedSeconds: 3600,
      speedKmh: 5837.2,
    });
    expect(body.observationTime).toBe(at(HOUR));
  });

  it('uses the fastest of consecutive pairs and counts every scored pair', async () => {
    const a = account('commuter');
    // Paris → New York in 1 h, then 0.1° of latitude (11.1 km) north in 30 min = 22.2 km/h.
    await seed([
      mobile(a, 5 * HOUR, { gps: PARIS }),
      mobile(a, 4 * HOUR, { gps: NEW_YORK }),
      mobile(a, 3.5 * HOUR, { gps: { lat: NEW_YORK.lat + 0.1, lon: NEW_YORK.lon } }),
    ]);
    const body = await signal('geovelocity', { accountId: a });
    const source = body.result!.sources[0]!;
    expect(source.evaluatedPairCount).toBe(2);
    expect(source.fastestPair).toMatchObject({ distanceKm: 5837.2, elapsedSeconds: 3600, speedKmh: 5837.2 });
    expect(body.observationTime).toBe(at(3.5 * HOUR));
    const slow = await signal('geovelocity', { accountId: a, windowStart: at(4 * HOUR) });
    expect(slow.result!.sources[0]!.fastestPair).toMatchObject({
      distanceKm: 11.1,
      elapsedSeconds: 1800,
      speedKmh: 22.2,
    });
    expect(slow.result!.anomaly).toBe(false);
  });

  it('is not an anomaly at exactly the threshold (strict >)', async () => {
    await withSandbox(
      {
        scenario: 'empty',
        thresholds: { geovelocityThresholdKmh: 5837.2 },
      },
      async (strict) => {
        const w = await getToken(strict, 'collection');
        const t = await getToken(strict, 'retrieval');
        const at = strict.sandbox.clock.now();
        const base = {
          accountId: 'x',
          unitId: 'x-app',
          verificationStatus: 'verified',
          interactionId: 'i',
          platform: 'mobile',
        };
        await collect(strict, w, [
          { ...base, gps: PARIS, observedAt: isoAgo(at, 2 * HOUR) },
          { ...base, gps: NEW_YORK, observedAt: isoAgo(at, HOUR) },
        ]);
        const body = geovelocityResponseSchema.parse(
          await (await getSignal(strict, 'geovelocity', { accountId: 'x' }, t)).json(),
        );
        expect(body.result!.maxSpeedKmh).toBe(5837.2);
        expect(body.result!.sources[0]!.thresholdKmh).toBe(5837.2);
        expect(body.result!.anomaly).toBe(false);
      },
    );
  });

  it('refuses browser-only selections, needs two fixes, and marks unscorable pairs evaluated: false', async () => {
    const a = account('geo-edge');
    await seed([browser(a, HOUR, { gps: PARIS }), browser(a, 2 * HOUR, { gps: NEW_YORK })]);
    expect(await signal('geovelocity', { accountId: a, unitId: `${a}-web` })).toEqual({
      signalType: 'geovelocity',
      success: false,
      reason: 'unsupported_platform',
    });
    await seed([mobile(a, HOUR, { gps: PARIS })]);
    expect(await signal('geovelocity', { accountId: a, unitId: `${a}-app` })).toMatchObject({
      success: false,
      reason: 'insufficient_observations',
    });
    // A second fix 200 ms later: elapsedSeconds rounds to 0, the pair cannot be scored.
    await seed([mobile(a, HOUR - 200, { gps: NEW_YORK })]);
    const body = await signal('geovelocity', { accountId: a, unitId: `${a}-app` });
    expect(body.success).toBe(true);
    expect(body.result).toEqual({
      anomaly: false,
      maxSpeedKmh: null,
      sources: [
        {
          locationSource: 'gps',
          evaluated: false,
          anomaly: false,
          maxSpeedKmh: null,
          thresholdKmh: null,
          evaluatedPairCount: 0,
          fastestPair: null,
        },
      ],
    });
  });

  it('only counts fixes inside the window', async () => {
    const a = account('windowed');
    await seed([
      mobile(a, 3 * HOUR, { gps: PARIS }),
      mobile(a, HOUR, { gps: NEW_YORK }),
      mobile(a, 30 * MINUTE, { gps: NEW_YORK }),
    ]);
    const body = await signal('geovelocity', { accountId: a, windowStart: at(2 * HOUR) });
    expect(body.result!.anomaly).toBe(false);
    expect(body.result!.maxSpeedKmh).toBe(0);
  });
});

describe('geolocation', () => {
  it('returns the latest value of each datapoint; GPS only from mobile units', async () => {
    const a = account('where');
    await seed([
      mobile(a, 3 * HOUR, {
        gps: NEW_YORK,
        ingress: { ip: '198.51.100.1', city: 'New York', country: 'US' },
      }),
      mobile(a, 2 * HOUR, { gps: PARIS }),
      browser(a, HOUR, {
        gps: { lat: 0, lon: 0 },
        ingress: {
          ip: '203.0.113.9',
          city: 'Paris',
          region: 'IDF',
          country: 'FR',
          continent: 'EU',
          lat: 48.85,
          lon: 2.35,
        },
      }),
    ]);
    const body = await signal('geolocation', { accountId: a });
    expect(body.success).toBe(true);
    const byName = Object.fromEntries(body.result!.datapoints.map((d) => [d.name, d]));
    expect(Object.keys(byName)).toEqual([
      'geo',
      'ingress_ip_geo',
      'ingress_ip_lat',
      'ingress_ip_lon',
      'ingress_ip_city',
      'ingress_ip_region',
      'ingress_ip_country',
      'ingress_ip_continent',
    ]);
    expect(byName.geo).toMatchObject({
      valueType: 'geo',
      lat: PARIS.lat,
      lon: PARIS.lon,
      unitId: `${a}-app`,
    });
    expect(byName.geo!.observationTime).toBe(at(2 * HOUR));
    expect(byName.ingress_ip_geo).toMatchObject({
      valueType: 'geo',
      lat: 48.85,
      lon: 2.35,
      unitId: `${a}-web`,
    });
    expect(byName.ingress_ip_lat).toMatchObject({ valueType: 'string', value: '48.85' });
    expect(byName.ingress_ip_country).toMatchObject({
      valueType: 'string',
      value: 'FR',
      interactionId: `i-${HOUR}`,
    });
    expect(body.observationTime).toBe(at(HOUR));
  });

  it('is insufficient_observations with nothing to report', async () => {
    const a = account('nowhere');
    await seed([browser(a, HOUR)]);
    expect(await signal('geolocation', { accountId: a })).toEqual({
      signalType: 'geolocation',
      success: false,
      reason: 'insufficient_observations',
    });
  });
});

describe('active call', () => {
  it('reads onCall of the latest mobile observation and echoes its identifiers', async () => {
    const a = account('caller');
    await seed([
      mobile(a, 2 * HOUR, { onCall: false, interactionId: 'login-1' }),
      mobile(a, HOUR, { onCall: true, interactionId: 'login-2' }),
      browser(a, 30 * MINUTE),
    ]);
    const body = await signal('active-call', { accountId: a });
    expect(body).toMatchObject({
      signalType: 'active_call',
      success: true,
      result: { onCall: true },
      unitId: `${a}-app`,
      verificationStatus: 'verified',
      interactionId: 'login-2',
    });
    // interactionId matches as a prefix: "login-1" selects only the first.
    const first = await signal('active-call', {
      accountId: a,
      unitId: `${a}-app`,
      verificationStatus: 'verified',
      interactionId: 'login-1',
    });
    expect(first.result!.onCall).toBe(false);
    const prefix = await signal('active-call', {
      accountId: a,
      unitId: `${a}-app`,
      verificationStatus: 'verified',
      interactionId: 'login',
    });
    expect(prefix.interactionId).toBe('login-2');
    expect(await signal('active-call', { accountId: a, unitId: `${a}-web` })).toMatchObject({
      success: false,
      reason: 'unsupported_platform',
    });
  });
});

describe('latest proximity', () => {
  it('scores the latest observation of each side from supporting-signal overlaps', async () => {
    const a = account('near');
    await seed([
      // An older baseline observation that would match everything: not the latest, so unused.
      mobile(a, 3 * HOUR, {
        wifiNetworks: ['w1', 'w2', 'w3'],
        connectedWifi: 'home',
        reportedIp: '192.0.2.1',
      }),
      mobile(a, 2 * HOUR, {
        wifiNetworks: ['w1', 'w2', 'w9'],
        connectedWifi: 'home',
        reportedIp: '192.0.2.7',
      }),
      browser(a, HOUR, { wifiNetworks: ['w1', 'w2', 'w3'], connectedWifi: 'home', reportedIp: '192.0.2.1' }),
    ]);
    const params = { subjectAccountId: a, subjectUnitId: `${a}-web`, baselineUnitId: `${a}-app` };
    const body = await signal('latest-proximity', params);
    // wifi: 2 shared → 0.7 × (1 − 0.5²) = 0.525; connected wifi 0.6; IP differs → × (1 − 0.35/2).
    // (1 − 0.475 × 0.4) × 0.825 = 0.66825
    expect(body.result!.proximityConfidence).toBe(0.668);
    expect(body.result!.supportingSignals).toEqual([
      { type: 'reportedIpOverlap', details: { matched: false, matchCount: null } },
      { type: 'wifiNetworkOverlap', details: { matched: true, matchCount: 2 } },
      { type: 'connectedWifiNetworkOverlap', details: { matched: true, matchCount: null } },
    ]);
    expect(body.observationTimesByUnit).toEqual({ baselineUnitId: at(2 * HOUR), subjectUnitId: at(HOUR) });
    expect(body.observationTime).toBeUndefined();

    const only = await signal('latest-proximity', { ...params, supportingSignal: 'wifiNetworkOverlap' });
    expect(only.result).toEqual({
      proximityConfidence: 0.525,
      supportingSignals: [{ type: 'wifiNetworkOverlap', details: { matched: true, matchCount: 2 } }],
    });
  });

  it('compares across accounts with baselineAccountId and fails without comparable data', async () => {
    const a = account('pa');
    const b = account('pb');
    await seed([
      browser(a, HOUR, { gps: PARIS, scannedBleDevices: ['b1'] }),
      mobile(b, HOUR, { gps: { lat: PARIS.lat + 0.001, lon: PARIS.lon }, scannedBleDevices: ['b1', 'b2'] }),
    ]);
    const body = await signal('latest-proximity', { subjectAccountId: a, baselineAccountId: b });
    // location within 200 m: 0.6; one scanned BLE device: 0.6 × 0.5 = 0.3 → 1 − 0.4 × 0.7 = 0.72
    expect(body.result!.proximityConfidence).toBe(0.72);
    expect(
      await signal('latest-proximity', {
        subjectAccountId: a,
        baselineAccountId: b,
        supportingSignal: 'nearbyDeviceOverlap',
      }),
    ).toEqual({ signalType: 'latest_proximity', success: false, reason: 'insufficient_observations' });
    expect(
      await signal('latest-proximity', { subjectAccountId: a, baselineAccountId: account('nobody') }),
    ).toMatchObject({
      success: false,
      reason: 'insufficient_observations',
    });
  });
});

describe('historical proximity', () => {
  it('finds the best pair and the best ingress pair separately', async () => {
    const a = account('hist');
    const ingress = { ip: '203.0.113.5', city: 'Lyon', region: 'ARA', country: 'FR', continent: 'EU' };
    await seed([
      mobile(a, 5 * DAY, { connectedBleDevices: ['car'], ingress }),
      mobile(a, 1 * DAY, { connectedBleDevices: ['other'] }),
      browser(a, 5 * DAY - HOUR, { connectedBleDevices: ['car', 'watch'] }),
      browser(a, HOUR, { ingress }),
    ]);
    const body = await signal('historical-proximity', {
      subjectAccountId: a,
      subjectUnitId: `${a}-web`,
      baselineUnitId: `${a}-app`,
    });
    // Best non-ingress: 1 shared connected BLE device: 0.85 × 0.5 = 0.425.
    expect(body.result!.bestMatch).toEqual({
      proximityConfidence: 0.425,
      supportingSignals: [{ type: 'connectedBleDeviceOverlap', details: { matched: true, matchCount: 1 } }],
    });
    // Ingress: all five match: 1 − 0.65 × 0.85 × 0.92 × 0.96 × 0.98 = 0.5218
    expect(body.result!.bestIngressMatch!.proximityConfidence).toBe(0.522);
    expect(body.result!.bestIngressMatch!.supportingSignals.map((s) => s.type)).toEqual([
      'ingressIpOverlap',
      'ingressIpCityOverlap',
      'ingressIpRegionOverlap',
      'ingressIpCountryOverlap',
      'ingressIpContinentOverlap',
    ]);
    // observationTimesByUnit names the bestMatch pair.
    expect(body.observationTimesByUnit).toEqual({
      baselineUnitId: at(5 * DAY),
      subjectUnitId: at(5 * DAY - HOUR),
    });
  });

  it('gives null matches when a kind of signal was never comparable', async () => {
    const a = account('hist-null');
    await seed([mobile(a, DAY, { wifiNetworks: ['x'] }), browser(a, HOUR, { wifiNetworks: ['y'] })]);
    const body = await signal('historical-proximity', {
      subjectAccountId: a,
      subjectUnitId: `${a}-web`,
      baselineUnitId: `${a}-app`,
    });
    expect(body.result!.bestIngressMatch).toBeNull();
    expect(body.result!.bestMatch).toEqual({
      proximityConfidence: 0,
      supportingSignals: [{ type: 'wifiNetworkOverlap', details: { matched: false, matchCount: 0 } }],
    });
  });
});

describe('new browser', () => {
  const chrome = {
    browser_name: 'Chrome',
    browser_os: 'macOS',
    browser_version: '126',
    browser_language: 'en-US',
    browser_timezone: 'Europe/Paris',
    browser_screen: '1440x900',
    browser_user_agent: 'Mozilla/5.0 (Macintosh) Chrome/126',
  };

  it('is known when the latest fingerprint matches an earlier one older than the cooldown', async () => {
    const a = account('nb-known');
    await seed([
      browser(a, 3 * DAY, { browser: chrome }),
      browser(a, MINUTE, { browser: chrome, interactionId: 'login-1' }),
    ]);
    const body = await signal('new-browser', { subjectAccountId: a });
    expect(body).toEqual({
      signalType: 'new_browser',
      success: true,
      result: { known: true },
      unitId: `${a}-web`,
      verificationStatus: 'verified',
      interactionId: 'login-1',
      observationTime: at(MINUTE),
    });
  });

  it('ignores matches newer than the cooldown cutoff, unless cooldownSeconds=0', async () => {
    const a = account('nb-cool');
    await seed([browser(a, 30 * MINUTE, { browser: chrome }), browser(a, MINUTE, { browser: chrome })]);
    const body = await signal('new-browser', { subjectAccountId: a });
    expect(body.result!.known).toBe(false);
    expect(body.mismatchedFields).toBeUndefined();
    expect((await signal('new-browser', { subjectAccountId: a, cooldownSeconds: '0' })).result!.known).toBe(
      true,
    );
    expect(
      (await signal('new-browser', { subjectAccountId: a, cooldownSeconds: '1200' })).result!.known,
    ).toBe(true);
  });

  it('names the fields that differ from the closest earlier fingerprint', async () => {
    const a = account('nb-new');
    await seed([
      browser(a, 4 * DAY, { browser: { ...chrome, browser_name: 'Firefox', browser_version: '115' } }),
      browser(a, 3 * DAY, { browser: { ...chrome, browser_version: '125' } }),
      browser(a, MINUTE, { browser: chrome }),
    ]);
    const body = await signal('new-browser', { subjectAccountId: a });
    expect(body.result!.known).toBe(false);
    expect(body.mismatchedFields).toEqual(['browser_version']);
  });

  it('full_fingerprint also compares language, timezone, screen and user agent', async () => {
    const a = account('nb-full');
    await seed([
      browser(a, 3 * DAY, {
        browser: { ...chrome, browser_timezone: 'America/New_York', browser_screen: '1920x1080' },
      }),
      browser(a, MINUTE, { browser: chrome }),
    ]);
    expect((await signal('new-browser', { subjectAccountId: a })).result!.known).toBe(true);
    const full = await signal('new-browser', { subjectAccountId: a, matchScope: 'full_fingerprint' });
    expect(full.result!.known).toBe(false);
    expect(full.mismatchedFields).toEqual(['browser_timezone', 'browser_screen']);
  });

  it('compares a placeholder subject account against a baseline account', async () => {
    const user = account('nb-user');
    const temp = account('tmp');
    await seed([browser(user, 2 * DAY, { browser: chrome }), browser(temp, MINUTE, { browser: chrome })]);
    expect((await signal('new-browser', { subjectAccountId: temp })).result!.known).toBe(false);
    const body = await signal('new-browser', { subjectAccountId: temp, baselineAccountId: user });
    expect(body.result!.known).toBe(true);
    expect(body.unitId).toBe(`${temp}-web`);
    // The baseline side's identifiers restrict it: no fraud-labelled history → unknown.
    const fraudOnly = await signal('new-browser', {
      subjectAccountId: temp,
      baselineAccountId: user,
      baselineUnitId: `${user}-web`,
      baselineVerificationStatus: 'fraud',
    });
    expect(fraudOnly.result!.known).toBe(false);
  });

  it('fails without a complete subject fingerprint, and for mobile-only subjects', async () => {
    const a = account('nb-bad');
    await seed([browser(a, MINUTE, { browser: { browser_name: 'Chrome', browser_os: 'macOS' } })]);
    expect(await signal('new-browser', { subjectAccountId: a })).toEqual({
      signalType: 'new_browser',
      success: false,
      reason: 'insufficient_observations',
    });
    const m = account('nb-mobile');
    await seed([mobile(m, MINUTE, { browser: chrome })]);
    expect(await signal('new-browser', { subjectAccountId: m })).toMatchObject({
      success: false,
      reason: 'unsupported_platform',
    });
  });
});

describe('remote access tool', () => {
  const normal = (i: number) => ({
    mouseEvents: 200,
    keystrokeEvents: 40,
    mouseIntervalMs: 15 + i,
    mouseJumpRatio: 0.05,
    keyDwellMs: 90 + 10 * i,
  });
  const session = (
    a: string,
    id: string,
    msAgo: number,
    input: Record<string, unknown>,
    extra: Record<string, unknown> = {},
  ) =>
    browser(a, msAgo, {
      verificationStatus: 'unverified',
      interactionId: id,
      browser: { browser_name: 'Chrome', browser_os: 'Windows', browser_version: '126' },
      session: input,
      ...extra,
    });
  const score = (a: string, id: string, extra: Record<string, string> = {}) =>
    signal('remote-access-tool', {
      accountId: a,
      unitId: `${a}-web`,
      verificationStatus: 'unverified',
      interactionId: id,
      ...extra,
    });
  /** Three prior sessions: mouseIntervalMs 15/16/17, jump 0.05, keyDwellMs 90/100/110. */
  const history = (a: string) => [0, 1, 2].map((i) => session(a, `past-${i}`, (5 - i) * DAY, normal(i)));

  it('scores a session close to the user’s baseline as no anomaly, by the documented formula', async () => {
    const a = account('rat-ok');
    await seed([
      ...history(a),
      session(a, 'now-1', MINUTE, {
        mouseEvents: 150,
        keystrokeEvents: 30,
        mouseIntervalMs: 25,
        mouseJumpRatio: 0.08,
        keyDwellMs: 80,
      }),
    ]);
    // Baseline means 16 ms, 0.05, 100 ms; stds below the floors 3, 0.03, 10.
    // z = 9/3, 0.03/0.03, 20/10 → S² = (9 + 1 + 4)/3 = 4.667; 1 − exp(−4.667/18) = 0.228
    const body = await score(a, 'now-1');
    expect(body).toMatchObject({
      signalType: 'remote_access_tool',
      success: true,
      result: { anomaly: false, anomalyConfidence: 0.228 },
      unitId: `${a}-web`,
      verificationStatus: 'unverified',
      interactionId: 'now-1',
    });
    expect(body.observationTime).toBe(at(MINUTE));
  });

  it('scores remote-desktop input (slow regular pointer, jumps, short key holds) as an anomaly', async () => {
    const a = account('rat-bad');
    await seed([
      ...history(a),
      session(a, 'now-1', MINUTE, {
        mouseEvents: 90,
        keystrokeEvents: 25,
        mouseIntervalMs: 46,
        mouseJumpRatio: 0.65,
        keyDwellMs: 30,
      }),
    ]);
    const body = await score(a, 'now-1');
    expect(body.result!.anomaly).toBe(true);
    expect(body.result!.anomalyConfidence).toBe(1);
  });

  it('applies the prerequisites in order: platform, input counts, prior sessions', async () => {
    const a = account('rat-pre');
    await seed([
      ...history(a).slice(0, 2),
      session(a, 'few-mouse', MINUTE, { ...normal(0), mouseEvents: 19 }),
      session(a, 'few-keys', MINUTE, { ...normal(0), keystrokeEvents: 9 }),
      session(a, 'enough', MINUTE, { ...normal(0), mouseEvents: 20, keystrokeEvents: 10 }),
      session(a, 'ios', MINUTE, normal(0), {
        browser: { browser_name: 'Safari', browser_os: 'iOS', browser_version: '17' },
      }),
      { ...session(a, 'app', MINUTE, normal(0)), platform: 'mobile' },
    ]);
    expect((await score(a, 'few-mouse')).reason).toBe('insufficient_observations');
    expect((await score(a, 'few-keys')).reason).toBe('insufficient_observations');
    expect((await score(a, 'ios')).reason).toBe('unsupported_platform');
    expect((await score(a, 'app')).reason).toBe('unsupported_platform');
    // Two prior sessions only (the others were recorded at the same time, not before).
    const body = await score(a, 'enough');
    expect(body).toMatchObject({ success: false, reason: 'no_user_baseline' });
    expect(body.observationTime).toBeUndefined();
  });

  it('matches interactionId exactly', async () => {
    const a = account('rat-exact');
    await seed([...history(a), session(a, 'login-10', MINUTE, normal(1))]);
    expect((await score(a, 'login-1')).reason).toBe('insufficient_observations');
    expect((await score(a, 'login-10')).success).toBe(true);
  });

  it('interaction_anchored uses only earlier sessions; full_history uses every stored one', async () => {
    const a = account('rat-scope');
    await seed([
      session(a, 'past-0', 5 * DAY, normal(0)),
      session(a, 'scored', 4 * DAY, normal(1)),
      session(a, 'later-1', 3 * DAY, normal(1)),
      session(a, 'later-2', 2 * DAY, normal(2)),
    ]);
    expect((await score(a, 'scored')).reason).toBe('no_user_baseline');
    expect((await score(a, 'scored', { baselineScope: 'full_history' })).success).toBe(true);
  });

  it('batch: same scores as the single endpoint, in request order, with a 31-day lookback', async () => {
    const a = account('rat-batch');
    const old = account('rat-old');
    await seed([
      ...history(a),
      session(a, 'now-1', MINUTE, {
        mouseEvents: 90,
        keystrokeEvents: 25,
        mouseIntervalMs: 46,
        mouseJumpRatio: 0.65,
        keyDwellMs: 30,
      }),
      ...[0, 1, 2].map((i) => session(old, `past-${i}`, (40 + i) * DAY, normal(i))),
      session(old, 'now-1', MINUTE, normal(1)),
    ]);
    await fetch(`${sb.url}/sandbox/stats/reset`, { method: 'POST' });
    const item = (acc: string, id: string) => ({
      serviceId: sb.config.credentials.serviceId,
      accountId: acc,
      unitId: `${acc}-web`,
      verificationStatus: 'unverified',
      interactionId: id,
    });
    const res = await fetch(`${sb.url}/api/v1/signals/remote-access-tool`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify([item(a, 'now-1'), item(old, 'now-1'), item(a, 'missing')]),
    });
    expect(res.status).toBe(200);
    const body = remoteAccessToolBatchResponseSchema.parse(await res.json());
    expect(body.signalType).toBe('remote_access_tool');
    const single = await score(a, 'now-1');
    expect(body.results[0]!).toEqual({
      accountId: a,
      unitId: `${a}-web`,
      verificationStatus: 'unverified',
      interactionId: 'now-1',
      success: true,
      result: single.result,
      observationTime: single.observationTime,
    });
    // History 40+ days old is outside the batch lookback, though the single GET still sees it.
    expect(body.results[1]).toMatchObject({ accountId: old, success: false, reason: 'no_user_baseline' });
    expect((await score(old, 'now-1')).success).toBe(true);
    expect(body.results[2]).toMatchObject({ success: false, reason: 'insufficient_observations' });
    const stats = (await (await fetch(`${sb.url}/sandbox/stats`)).json()) as StatsSnapshot;
    expect(stats.ratBatchSizes).toEqual([3]);
    expect(stats.routes['POST /api/v1/signals/remote-access-tool']).toEqual({ '200': 1 });
  });
});

describe('collections', () => {
  it('refuses a Retrieval token (403) and names the invalid field (400)', async () => {
    const ok = {
      accountId: 'c',
      unitId: 'u',
      verificationStatus: 'verified',
      interactionId: 'i',
      platform: 'mobile',
    };
    const forbidden = await collect(sb, token, [ok]);
    expect(forbidden.status).toBe(403);
    const bad = await collect(sb, writer, [ok, { ...ok, platform: 'tv' }]);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { message: string }).message).toMatch(/^\[1\]\.platform: /);
    const foreign = await collect(sb, writer, [{ ...ok, serviceId: '00000000-0000-4000-8000-000000000000' }]);
    expect(foreign.status).toBe(403);
    expect((await collect(sb, writer, [ok])).status).toBe(200);
  });

  it('refuses an observedAt that is no real date and time, naming it', async () => {
    const ok = { accountId: 'c', unitId: 'u', verificationStatus: 'verified', interactionId: 'i' };
    for (const observedAt of ['2024-02-30T00:00:00Z', '2024-01-01T24:00:00+01:00']) {
      const res = await collect(sb, writer, [{ ...ok, platform: 'mobile', observedAt }]);
      expect(res.status, observedAt).toBe(400);
      expect(((await res.json()) as { message: string }).message).toMatch(/^\[0\]\.observedAt: /);
    }
    const leapDay = await collect(sb, writer, [
      { ...ok, platform: 'mobile', observedAt: '2024-02-29T12:00:00+01:00' },
    ]);
    expect(leapDay.status).toBe(200);
  });
});
