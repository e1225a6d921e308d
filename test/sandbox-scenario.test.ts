import { beforeAll, describe, expect, it } from 'vitest';
import {
  activeCallResponseSchema,
  geovelocityResponseSchema,
  latestProximityResponseSchema,
  newBrowserResponseSchema,
  remoteAccessToolBatchResponseSchema,
  remoteAccessToolResponseSchema,
} from '../src/signals/signal-schemas.ts';
import { formatRfc2822, signRequest } from '../src/vendor-auth/hmac-signature.ts';
import { getSignal, getToken } from './sandbox-helpers.ts';
import { sandboxForFile } from './support/test-sandbox.ts';

const sb = sandboxForFile();
let token: string;
beforeAll(async () => {
  token = await getToken(sb);
});

const BROWSER_USERS = ['alice', 'bob', 'mallory', 'dave'];
const APP_USERS = ['trudy', 'carol'];

/** The pinned identifiers of a demo user's current login. */
function login(name: string) {
  return {
    unitId: `${name}-${BROWSER_USERS.includes(name) ? 'web' : 'app'}`,
    verificationStatus: 'unverified',
    interactionId: `${name}-login-1`,
  };
}

async function get(signal: string, params: Record<string, string>): Promise<unknown> {
  const res = await getSignal(sb, signal, params, token);
  expect(res.status).toBe(200);
  return res.json();
}

const newBrowser = async (name: string) => {
  const l = login(name);
  return newBrowserResponseSchema.parse(
    await get('new-browser', {
      subjectAccountId: name,
      subjectUnitId: l.unitId,
      subjectVerificationStatus: l.verificationStatus,
      subjectInteractionId: l.interactionId,
      baselineAccountId: name,
    }),
  );
};
const rat = async (name: string) =>
  remoteAccessToolResponseSchema.parse(await get('remote-access-tool', { accountId: name, ...login(name) }));
const geovelocity = async (name: string, params: Record<string, string> = login(name)) =>
  geovelocityResponseSchema.parse(await get('geovelocity', { accountId: name, ...params }));
const activeCall = async (name: string, params: Record<string, string> = login(name)) =>
  activeCallResponseSchema.parse(await get('active-call', { accountId: name, ...params }));
const proximity = async (name: string) => {
  const l = login(name);
  return latestProximityResponseSchema.parse(
    await get('latest-proximity', {
      subjectAccountId: name,
      subjectUnitId: l.unitId,
      subjectVerificationStatus: l.verificationStatus,
      subjectInteractionId: l.interactionId,
      baselineUnitId: `${name}-app`,
      baselineVerificationStatus: 'verified',
    }),
  );
};

describe('default scenario: each demo account’s current login gives its promised outcome', () => {
  it('alice: known browser, no remote access tool, nothing unusual', async () => {
    expect((await newBrowser('alice')).result).toEqual({ known: true });
    const r = await rat('alice');
    expect(r.success).toBe(true);
    expect(r.result!.anomaly).toBe(false);
    expect(r.result!.anomalyConfidence).toBeLessThan(0.2);
    const g = await geovelocity('alice', { unitId: 'alice-app' });
    expect(g.result!.anomaly).toBe(false);
    expect((await activeCall('alice', { unitId: 'alice-app' })).result).toEqual({ onCall: false });
  });

  it('bob: a new browser, the profile fields named', async () => {
    const nb = await newBrowser('bob');
    expect(nb.result).toEqual({ known: false });
    expect(nb.mismatchedFields).toEqual(['browser_name', 'browser_os', 'browser_version']);
    expect((await rat('bob')).result!.anomaly).toBe(false);
  });

  it('mallory: remote access tool anomaly with confidence >= 0.9, on a known browser', async () => {
    const r = await rat('mallory');
    expect(r.result!.anomaly).toBe(true);
    expect(r.result!.anomalyConfidence).toBeGreaterThanOrEqual(0.9);
    expect(r.interactionId).toBe('mallory-login-1');
    expect((await newBrowser('mallory')).result).toEqual({ known: true });
  });

  it('trudy: impossible travel within the login, whichever identifiers select it', async () => {
    const pinned = await geovelocity('trudy');
    expect(pinned.result!.anomaly).toBe(true);
    // Paris → New York (5837.2 km) in 600 s.
    expect(pinned.result!.maxSpeedKmh).toBe(35023.2);
    expect(pinned.result!.sources[0]!.fastestPair).toMatchObject({
      distanceKm: 5837.2,
      elapsedSeconds: 600,
      toInteractionId: 'trudy-login-1',
    });
    expect((await geovelocity('trudy', {})).result!.anomaly).toBe(true);
    expect((await geovelocity('trudy', { unitId: 'trudy-app' })).result!.anomaly).toBe(true);
  });

  it('carol: on a phone call during the login', async () => {
    const pinned = await activeCall('carol');
    expect(pinned.result).toEqual({ onCall: true });
    expect(pinned.interactionId).toBe('carol-login-1');
    expect((await activeCall('carol', {})).result).toEqual({ onCall: true });
  });

  it('dave: his browser is next to his enrolled phone', async () => {
    const p = await proximity('dave');
    expect(p.success).toBe(true);
    expect(p.result!.proximityConfidence).toBeGreaterThanOrEqual(0.8);
  });

  it('only the promised accounts are flagged', async () => {
    for (const name of BROWSER_USERS) {
      expect((await rat(name)).result!.anomaly, name).toBe(name === 'mallory');
      expect((await newBrowser(name)).result!.known, name).toBe(name !== 'bob');
    }
    for (const name of APP_USERS) {
      expect((await rat(name)).reason, name).toBe('unsupported_platform');
    }
    for (const name of [...BROWSER_USERS, ...APP_USERS]) {
      expect((await geovelocity(name, {})).result!.anomaly, name).toBe(name === 'trudy');
      expect((await activeCall(name, {})).result!.onCall, name).toBe(name === 'carol');
    }
  });

  it('scores the four browser logins in one batch the same way', async () => {
    const res = await fetch(`${sb.url}/api/v1/signals/remote-access-tool`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(
        BROWSER_USERS.map((name) => ({
          serviceId: sb.config.credentials.serviceId,
          accountId: name,
          ...login(name),
        })),
      ),
    });
    const body = remoteAccessToolBatchResponseSchema.parse(await res.json());
    expect(body.results.map((r) => r.result?.anomaly)).toEqual([false, false, true, false]);
  });

  it('seeds an Admin user with an enrolled phone for each demo account', async () => {
    const c = sb.config.credentials;
    for (const name of [...BROWSER_USERS, ...APP_USERS]) {
      const url = new URL(`${sb.url}/srv/admin/v1/users?username=${name}`);
      const date = formatRfc2822(new Date());
      const authorization = signRequest(
        {
          date,
          method: 'GET',
          host: url.host,
          protocol: 'http:',
          path: url.pathname,
          query: url.searchParams,
        },
        c.serviceId,
        c.adminApiKey,
      );
      const res = await fetch(url, { headers: { 'SVC-Date': date, authorization } });
      expect(res.status, name).toBe(200);
      const body = (await res.json()) as { users: { username: string; user_id: string }[] };
      expect(body.users.map((u) => u.username)).toEqual([name]);
    }
  });
});
