import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { ErrorCode } from '../src/errors/riskgate-error.ts';
import { createLogClient, type LogClient } from '../src/logs/log-client.ts';
import { createdAtNs, type LogEvent } from '../src/logs/log-event.ts';
import { createLogPoller, type LogPoller } from '../src/logs/log-poller.ts';
import { SteppedClock } from '../src/timing/driven-clock.ts';
import { type ClientSandbox, startClientSandbox } from './clients-sandbox.ts';

const ROUTE = 'GET /logs/v1/service/:id';
const H = 3_600_000;

let env: ClientSandbox;
let dir: string;
const clock = new SteppedClock();
let logs: LogClient;

beforeAll(async () => {
  env = await startClientSandbox();
  dir = await mkdtemp(join(tmpdir(), 'riskgate-logs-'));
  const c = env.sb.config.credentials;
  logs = createLogClient({
    baseUrl: env.url,
    service: { id: c.serviceId, apiKey: c.serviceLogApiKey },
    organization: { id: c.organizationId, apiKey: c.organizationLogApiKey },
    clock,
  });
});
afterAll(async () => {
  await logs.close();
  await env.stop();
  await rm(dir, { recursive: true, force: true });
});
beforeEach(async () => {
  await env.clearFaults();
});

async function inject(scope: 'service' | 'organization', createdAt: string, id: string) {
  const res = await fetch(`${env.url}/sandbox/logs/events`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      scope,
      type: 'user.updated',
      created_at: createdAt,
      event_id: id,
      fields: { user_id: id },
    }),
  });
  expect(res.status).toBe(200);
}

/** What the sandbox holds for the service in [startMs, endMs): the ground truth. */
async function truth(startMs: number, endMs: number): Promise<string[]> {
  const res = await fetch(`${env.url}/sandbox/logs/events?scope=service`);
  const { events } = (await res.json()) as { events: LogEvent[] };
  const lo = BigInt(startMs) * 1_000_000n;
  const hi = BigInt(endMs) * 1_000_000n;
  return events
    .filter((e) => {
      const ns = createdAtNs(e.created_at)!;
      return ns >= lo && ns < hi;
    })
    .map((e) => e.event_id)
    .sort();
}

/** A created_at `ms` ago-ish: nanosecond precision for even `i`, whole seconds for odd. */
function createdAt(ms: number, i: number): string {
  const iso = new Date(ms).toISOString();
  return i % 2 === 0
    ? `${iso.slice(0, 19)}.${String(ms % 1000).padStart(3, '0')}${String(i).padStart(6, '0')}Z`
    : `${iso.slice(0, 19)}Z`;
}

function isSorted(batch: LogEvent[]): boolean {
  for (let i = 1; i < batch.length; i++)
    if (createdAtNs(batch[i - 1]!.created_at)! > createdAtNs(batch[i]!.created_at)!) return false;
  return true;
}

async function drain(p: LogPoller): Promise<void> {
  for (let i = 0; i < 20; i++) {
    const o = await p.pollOnce();
    if (o.kind === 'idle' || (o.kind === 'delivered' && o.caughtUp)) return;
  }
  throw new Error('poller did not catch up');
}

describe('Log client against the sandbox (signed with Date)', () => {
  it('streams a window of both scopes', async () => {
    const t = clock.nowMs();
    await inject('service', createdAt(t - 10 * 60_000, 0), 'svc-one');
    await inject('organization', createdAt(t - 10 * 60_000, 1), 'org-one');
    const got: string[] = [];
    const w = { start: t - 20 * 60_000, end: t - 5 * 60_000 };
    const a = await logs.readWindow('service', w, (e) => got.push(e.event_id));
    const b = await logs.readWindow('organization', w, (e) => got.push(e.event_id));
    expect(a.ok && b.ok).toBe(true);
    expect(got).toContain('svc-one');
    expect(got).toContain('org-one');
  });

  it('a cut stream (final Error line) is a typed failure of that window', async () => {
    const t = clock.nowMs();
    await inject('service', createdAt(t - 9 * 60_000, 2), 'cut-a');
    await inject('service', createdAt(t - 9 * 60_000 + 1, 3), 'cut-b');
    await env.faults([{ route: ROUTE, cutStream: { afterLines: 1 } }]);
    const r = await logs.readWindow('service', { start: t - 20 * 60_000, end: t - 5 * 60_000 }, () => {});
    expect(r.ok ? 'ok' : r.error.code).toBe(ErrorCode.UPSTREAM_SERVER_ERROR);
    expect(r.ok ? '' : r.error.upstreamMessage).toContain('Error');
  });

  it('a wrong key is UPSTREAM_UNAUTHORIZED and the key appears nowhere', async () => {
    const key = 'wrong-log-key-123';
    const bad = createLogClient({
      baseUrl: env.url,
      service: { id: env.sb.config.credentials.serviceId, apiKey: key },
      clock,
    });
    const t = clock.nowMs();
    const r = await bad.readWindow('service', { start: t - 20 * 60_000, end: t - 5 * 60_000 }, () => {});
    await bad.close();
    expect(r.ok ? 'ok' : r.error.code).toBe(ErrorCode.UPSTREAM_UNAUTHORIZED);
    expect(JSON.stringify(r)).not.toContain(key);
  });
});

describe('Log poller against the sandbox', () => {
  it('delivers every event exactly once, sorted, across a cut stream, a restart and a late event', async () => {
    const file = join(dir, 'service.checkpoint.json');
    const t0 = clock.nowMs();
    const startAt = Math.floor((t0 - 3 * H) / 1000) * 1000;
    for (let i = 0; i < 40; i++) {
      const at = startAt + 1000 + Math.floor(((3 * H - 5 * 60_000) * i) / 40);
      await inject('service', createdAt(at, i), `ev-${i}`);
    }
    // Two events in the same second, ns apart, inserted out of order.
    await inject('service', createdAt(startAt + 7 * 60_000 + 5, 8).replace(/\d{6}Z$/, '000002Z'), 'tie-2');
    await inject('service', createdAt(startAt + 7 * 60_000 + 5, 8).replace(/\d{6}Z$/, '000001Z'), 'tie-1');

    const batches: LogEvent[][] = [];
    const onEvents = (es: LogEvent[]) => {
      batches.push(es);
    };
    const errors: Error[] = [];
    const make = () =>
      createLogPoller({
        client: logs,
        checkpointFile: file,
        onEvents,
        startAt,
        clock,
        onError: (e) => errors.push(e),
      });

    await env.faults([{ route: ROUTE, cutStream: { afterLines: 2 }, times: 1 }]);
    const a = make();
    const first = await a.pollOnce();
    expect(first.kind).toBe('failed');
    expect(batches).toHaveLength(0); // nothing of a failed window is delivered
    expect(await a.pollOnce()).toMatchObject({ kind: 'delivered' });
    const persisted = JSON.parse(await readFile(file, 'utf8'));
    expect(persisted.cursorMs).toBe(a.cursor());

    // "Crash" and restart from the file.
    const b = make();
    await drain(b);
    let delivered = batches.flat().map((e) => e.event_id);
    expect(delivered.length).toBe(new Set(delivered).size);
    expect([...delivered].sort()).toEqual(await truth(startAt, b.cursor()!));
    expect(delivered).toContain('ev-0');
    expect(delivered).toContain('ev-39');
    expect(batches.every(isSorted)).toBe(true);
    const ties = delivered.filter((id) => id.startsWith('tie-'));
    expect(ties).toEqual(['tie-1', 'tie-2']);

    // Late ingestion behind the cursor, plus one new event; a minute passes on both clocks.
    const cursor = b.cursor()!;
    await inject('service', createdAt(cursor - 10_000, 50), 'late');
    await inject('service', createdAt(cursor + 20_000, 51), 'new');
    await env.advanceClock(60);
    clock.step(60_000);
    const c = make();
    await drain(c);
    delivered = batches.flat().map((e) => e.event_id);
    expect(delivered.filter((id) => id === 'late' || id === 'new')).toEqual(['late', 'new']);
    expect(delivered.length).toBe(new Set(delivered).size);
    expect(errors.map((e) => (e as { code?: string }).code)).toEqual([ErrorCode.UPSTREAM_SERVER_ERROR]);
  });

  it('runs in the background until stopped', async () => {
    const file = join(dir, 'background.checkpoint.json');
    const t = clock.nowMs();
    await inject('service', createdAt(t - 30 * 60_000, 60), 'bg-1');
    const got: string[] = [];
    const p = createLogPoller({
      client: logs,
      checkpointFile: file,
      startAt: t - H,
      pollIntervalMs: 50,
      clock,
      onEvents: (es) => {
        got.push(...es.map((e) => e.event_id));
      },
    });
    await p.start();
    await vi.waitFor(() => expect(got).toContain('bg-1'), { timeout: 5000, interval: 20 });
    await p.stop();
    const cursor = p.cursor()!;
    expect(cursor).toBeGreaterThan(t - 3 * 60_000);
    expect(cursor).toBeLessThanOrEqual(clock.nowMs() - 120_000);
  });
});
