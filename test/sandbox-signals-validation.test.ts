import { beforeAll, describe, expect, it } from 'vitest';
import { DAY, getSignal, getToken } from './sandbox-helpers.ts';
import { sandboxForFile } from './support/test-sandbox.ts';

const sb = sandboxForFile({ scenario: 'empty' });
let token: string;
beforeAll(async () => {
  token = await getToken(sb);
});

async function expect400(res: Response, param: string) {
  expect(res.status).toBe(400);
  const body = (await res.json()) as { error: string; message: string };
  expect(body.error).toBe('invalid_request');
  expect(body.message.startsWith(`${param}:`)).toBe(true);
}

const SINGLE = ['geolocation', 'geovelocity', 'active-call'];
const PAIRED = ['latest-proximity', 'historical-proximity', 'new-browser'];
const RAT = { accountId: 'a', unitId: 'u', verificationStatus: 'verified', interactionId: 'i' };

describe('identifiers', () => {
  it.each([...SINGLE, 'remote-access-tool'])(
    '%s: serviceId and accountId are required and checked',
    async (s) => {
      const base = s === 'remote-access-tool' ? RAT : { accountId: 'a' };
      await expect400(await getSignal(sb, s, { ...base, serviceId: null }, token), 'serviceId');
      await expect400(await getSignal(sb, s, { ...base, serviceId: 'not-a-uuid' }, token), 'serviceId');
      await expect400(await getSignal(sb, s, { ...base, accountId: null }, token), 'accountId');
      await expect400(await getSignal(sb, s, { ...base, accountId: 'has space' }, token), 'accountId');
      await expect400(await getSignal(sb, s, { ...base, accountId: 'x'.repeat(51) }, token), 'accountId');
      expect((await getSignal(sb, s, { ...base, accountId: 'x'.repeat(50) }, token)).status).toBe(200);
    },
  );

  it.each(SINGLE)('%s: unitId, interactionId, sdkVersionId patterns and lengths', async (s) => {
    const ok = { accountId: 'a', unitId: 'u-1', verificationStatus: 'unverified' };
    await expect400(await getSignal(sb, s, { ...ok, unitId: 'u_1' }, token), 'unitId');
    await expect400(await getSignal(sb, s, { ...ok, unitId: 'u'.repeat(1001) }, token), 'unitId');
    expect((await getSignal(sb, s, { ...ok, unitId: 'u'.repeat(1000) }, token)).status).toBe(200);
    await expect400(
      await getSignal(sb, s, { ...ok, verificationStatus: 'trusted' }, token),
      'verificationStatus',
    );
    await expect400(await getSignal(sb, s, { ...ok, interactionId: 'i.1' }, token), 'interactionId');
    await expect400(
      await getSignal(sb, s, { ...ok, interactionId: 'i'.repeat(1001) }, token),
      'interactionId',
    );
    await expect400(await getSignal(sb, s, { ...ok, sdkVersionId: 'v 1' }, token), 'sdkVersionId');
    await expect400(await getSignal(sb, s, { ...ok, sdkVersionId: 'v'.repeat(51) }, token), 'sdkVersionId');
    expect((await getSignal(sb, s, { ...ok, sdkVersionId: 'web/2.1.0-rc.1' }, token)).status).toBe(200);
  });

  it.each(SINGLE)(
    '%s: verificationStatus requires unitId; interactionId requires verificationStatus',
    async (s) => {
      await expect400(
        await getSignal(sb, s, { accountId: 'a', verificationStatus: 'verified' }, token),
        'verificationStatus',
      );
      await expect400(
        await getSignal(sb, s, { accountId: 'a', unitId: 'u', interactionId: 'i' }, token),
        'interactionId',
      );
      expect((await getSignal(sb, s, { accountId: 'a', unitId: 'u' }, token)).status).toBe(200);
      expect((await getSignal(sb, s, { accountId: 'a', sdkVersionId: 'v1' }, token)).status).toBe(200);
    },
  );

  it.each(PAIRED)('%s: the ordering rule holds per side', async (s) => {
    const base = { subjectAccountId: 'a', baselineAccountId: 'b' };
    await expect400(
      await getSignal(sb, s, { ...base, subjectVerificationStatus: 'verified' }, token),
      'subjectVerificationStatus',
    );
    await expect400(
      await getSignal(sb, s, { ...base, subjectUnitId: 'u', subjectInteractionId: 'i' }, token),
      'subjectInteractionId',
    );
    await expect400(
      await getSignal(sb, s, { ...base, baselineVerificationStatus: 'verified' }, token),
      'baselineVerificationStatus',
    );
    await expect400(
      await getSignal(sb, s, { ...base, baselineUnitId: 'u', baselineInteractionId: 'i' }, token),
      'baselineInteractionId',
    );
    await expect400(await getSignal(sb, s, { subjectAccountId: null }, token), 'subjectAccountId');
    await expect400(
      await getSignal(sb, s, { ...base, baselineAccountId: 'no good' }, token),
      'baselineAccountId',
    );
    await expect400(await getSignal(sb, s, { ...base, subjectUnitId: 'bad_unit' }, token), 'subjectUnitId');
    // One side complete, the other side unconstrained: fine.
    const fine = {
      ...base,
      subjectUnitId: 'u',
      subjectVerificationStatus: 'fraud',
      subjectInteractionId: 'i',
    };
    expect((await getSignal(sb, s, fine, token)).status).toBe(200);
  });

  it.each(['latest-proximity', 'historical-proximity'])(
    '%s: baseline* identifiers are checked even without baselineAccountId',
    async (s) => {
      await expect400(
        await getSignal(sb, s, { subjectAccountId: 'a', baselineVerificationStatus: 'verified' }, token),
        'baselineVerificationStatus',
      );
    },
  );

  it('new-browser ignores baseline* without baselineAccountId', async () => {
    const res = await getSignal(
      sb,
      'new-browser',
      { subjectAccountId: 'a', baselineVerificationStatus: 'verified', baselineInteractionId: 'x' },
      token,
    );
    expect(res.status).toBe(200);
  });

  it('remote-access-tool requires unitId, verificationStatus and interactionId', async () => {
    for (const p of ['unitId', 'verificationStatus', 'interactionId'] as const) {
      await expect400(await getSignal(sb, 'remote-access-tool', { ...RAT, [p]: null }, token), p);
    }
    await expect400(
      await getSignal(sb, 'remote-access-tool', { ...RAT, baselineScope: 'all' }, token),
      'baselineScope',
    );
    expect(
      (await getSignal(sb, 'remote-access-tool', { ...RAT, baselineScope: 'full_history' }, token)).status,
    ).toBe(200);
  });
});

describe('repeated parameters', () => {
  const get = (signal: string, query: string) =>
    fetch(`${sb.url}/api/v1/signals/${signal}?serviceId=${sb.config.credentials.serviceId}&${query}`, {
      headers: { authorization: `Bearer ${token}` },
    });

  it.each([...SINGLE, 'remote-access-tool'])('%s: a repeated accountId is a 400 naming it', async (s) => {
    const rest = s === 'remote-access-tool' ? '&unitId=u&verificationStatus=verified&interactionId=i' : '';
    const res = await get(s, `accountId=alice&accountId=bob${rest}`);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: 'invalid_request', message: 'accountId: must be given once' });
  });

  it('names any repeated parameter, the same value twice included', async () => {
    await expect400(await get('new-browser', 'subjectAccountId=a&windowEnd=x&windowEnd=x'), 'windowEnd');
    await expect400(
      await get(
        'latest-proximity',
        'subjectAccountId=a&supportingSignal=reportedIpOverlap&supportingSignal=reportedIpOverlap',
      ),
      'supportingSignal',
    );
    await expect400(await get('geolocation', 'serviceId=x&accountId=a'), 'serviceId');
    expect((await get('geolocation', 'accountId=a')).status).toBe(200);
  });
});

describe('windows', () => {
  const iso = (ms: number) => new Date(ms).toISOString();
  it.each([...SINGLE, ...PAIRED])('%s: accepts 31 days, refuses more, refuses start after end', async (s) => {
    const acct: Record<string, string> = PAIRED.includes(s) ? { subjectAccountId: 'a' } : { accountId: 'a' };
    const end = Date.parse('2024-03-01T00:00:00Z');
    expect(
      (await getSignal(sb, s, { ...acct, windowStart: iso(end - 31 * DAY), windowEnd: iso(end) }, token))
        .status,
    ).toBe(200);
    await expect400(
      await getSignal(
        sb,
        s,
        { ...acct, windowStart: iso(end - 31 * DAY - 1000), windowEnd: iso(end) },
        token,
      ),
      'windowStart',
    );
    await expect400(
      await getSignal(sb, s, { ...acct, windowStart: iso(end + 1000), windowEnd: iso(end) }, token),
      'windowStart',
    );
    // windowEnd alone: start = end - 31 days, always valid.
    expect((await getSignal(sb, s, { ...acct, windowEnd: iso(end) }, token)).status).toBe(200);
    // windowStart alone: end = now, so a start 32 days ago is too long.
    await expect400(
      await getSignal(sb, s, { ...acct, windowStart: iso(Date.now() - 32 * DAY) }, token),
      'windowStart',
    );
  });

  it.each([
    ['not a date', 'yesterday'],
    ['a date without time', '2024-01-02'],
    ['an offset instead of UTC', '2024-01-02T10:00:00+01:00'],
    ['February 30th', '2024-02-30T00:00:00Z'],
    ['February 29th of a common year', '2023-02-29T00:00:00Z'],
    ['April 31st', '2024-04-31T00:00:00Z'],
    ['hour 24', '2024-01-01T24:00:00Z'],
  ])('refuses %s', async (_n, value) => {
    await expect400(
      await getSignal(sb, 'geolocation', { accountId: 'a', windowEnd: value }, token),
      'windowEnd',
    );
    const end = '2024-03-01T00:00:00Z';
    await expect400(
      await getSignal(
        sb,
        'new-browser',
        { subjectAccountId: 'a', windowStart: value, windowEnd: end },
        token,
      ),
      'windowStart',
    );
  });

  it('accepts the leap day of a leap year', async () => {
    const res = await getSignal(
      sb,
      'geolocation',
      { accountId: 'a', windowEnd: '2024-02-29T00:00:00Z' },
      token,
    );
    expect(res.status).toBe(200);
  });
});

describe('signal-specific parameters', () => {
  it('new-browser: matchScope and cooldownSeconds', async () => {
    const p = { subjectAccountId: 'a' };
    await expect400(await getSignal(sb, 'new-browser', { ...p, matchScope: 'exact' }, token), 'matchScope');
    await expect400(
      await getSignal(sb, 'new-browser', { ...p, cooldownSeconds: '-1' }, token),
      'cooldownSeconds',
    );
    await expect400(
      await getSignal(sb, 'new-browser', { ...p, cooldownSeconds: '1.5' }, token),
      'cooldownSeconds',
    );
    expect(
      (
        await getSignal(
          sb,
          'new-browser',
          { ...p, cooldownSeconds: '0', matchScope: 'full_fingerprint' },
          token,
        )
      ).status,
    ).toBe(200);
  });

  it.each(['latest-proximity', 'historical-proximity'])(
    '%s: supportingSignal must be one type',
    async (s) => {
      await expect400(
        await getSignal(sb, s, { subjectAccountId: 'a', supportingSignal: 'gps' }, token),
        'supportingSignal',
      );
      expect(
        (await getSignal(sb, s, { subjectAccountId: 'a', supportingSignal: 'wifiNetworkOverlap' }, token))
          .status,
      ).toBe(200);
    },
  );
});

describe('batch remote access tool body', () => {
  const item = {
    serviceId: '',
    accountId: 'a',
    unitId: 'u',
    verificationStatus: 'verified',
    interactionId: 'i',
  };
  const post = (body: string, contentType = 'application/json') =>
    fetch(`${sb.url}/api/v1/signals/remote-access-tool`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': contentType },
      body,
    });
  const items = (n: number) =>
    JSON.stringify(
      Array.from({ length: n }, () => ({ ...item, serviceId: sb.config.credentials.serviceId })),
    );

  it.each([
    ['an empty array', 0, 'application/json'],
    ['101 items', 101, 'application/json'],
    ['text/plain', 1, 'text/plain'],
    ['form encoding', 1, 'application/x-www-form-urlencoded'],
  ])('answers a bare 400 (empty body) for %s', async (_n, count, contentType) => {
    const res = await post(items(count), contentType);
    expect(res.status).toBe(400);
    expect(await res.text()).toBe('');
  });

  it('accepts 1 and 100 items, and application/json with a charset', async () => {
    expect((await post(items(1))).status).toBe(200);
    const res = await post(items(100), 'application/json; charset=utf-8');
    expect(res.status).toBe(200);
    expect(((await res.json()) as { results: unknown[] }).results).toHaveLength(100);
  });

  it('answers 400 naming the item and parameter when an item breaks the single endpoint’s rules', async () => {
    const list = JSON.parse(items(3));
    list[2].interactionId = 'bad id';
    const res = await post(JSON.stringify(list));
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      error: 'invalid_request',
      message: '[2].interactionId: must contain only A-Z, a-z, 0-9 and -',
    });
    delete list[2].interactionId;
    expect(((await (await post(JSON.stringify(list))).json()) as { message: string }).message).toBe(
      '[2].interactionId: is required',
    );
  });

  it('answers 400 for a body that is not a JSON array', async () => {
    expect((await post('{"a":1}')).status).toBe(400);
    expect((await post('[{')).status).toBe(400);
  });
});
