import { describe, expect, it } from 'vitest';
import { eventually } from '../../test/support/eventually.ts';
import { ErrorCode, UpstreamError } from '../errors/riskgate-error.ts';
import { DrivenClock } from '../timing/driven-clock.ts';
import { createMemoryCheckpointStore } from './log-checkpoint.ts';
import type { LogClient, LogWindow } from './log-client.ts';
import type { LogEvent } from './log-event.ts';
import { createLogPoller } from './log-poller.ts';

const H = 3_600_000;
const T0 = Date.parse('2024-05-01T12:00:00Z');

/** A Log API stand-in over a fixed event list: answers [start, end) like the real one. */
function source(events: LogEvent[]) {
  const requests: LogWindow[] = [];
  const client: Pick<LogClient, 'readWindow'> = {
    async readWindow(_scope, w, onEvent) {
      requests.push(w);
      let n = 0;
      for (const e of events) {
        const at = Date.parse(e.created_at);
        if (at >= w.start && at < w.end) {
          onEvent(e);
          n++;
        }
      }
      return { ok: true, value: { events: n }, durationMs: 0 };
    },
  };
  return { client, requests };
}

const ev = (id: string, at: number): LogEvent => ({
  event_id: id,
  type: 't',
  created_at: new Date(at).toISOString(),
});

describe('log poller windows', () => {
  it('tiles exactly, requests at most an hour with the overlap, and stays 2 minutes behind now', async () => {
    const { client, requests } = source([]);
    const clock = new DrivenClock({ nowMs: T0 });
    const p = createLogPoller({
      client,
      checkpointStore: createMemoryCheckpointStore(),
      onEvents: () => {},
      startAt: T0 - 3 * H,
      overlapMs: 60_000,
      clock,
    });
    for (let i = 0; i < 10; i++) {
      if ((await p.pollOnce()).kind === 'idle') break;
    }
    const tiles = requests.map((r, i) => ({ start: i === 0 ? r.start : r.start + 60_000, end: r.end }));
    for (let i = 1; i < tiles.length; i++) expect(tiles[i]!.start).toBe(tiles[i - 1]!.end);
    expect(tiles[0]!.start).toBe(T0 - 3 * H);
    expect(tiles.at(-1)!.end).toBe(T0 - 120_000);
    for (const r of requests) expect(r.end - r.start).toBeLessThanOrEqual(H);
    expect(requests[0]!.end - requests[0]!.start).toBe(H - 60_000); // no overlap before a fresh start
    expect(requests[1]!.end - requests[1]!.start).toBe(H);
  });

  it('delivers each event once, sorted, including a late one found in the overlap', async () => {
    const clock = new DrivenClock({ nowMs: T0 });
    const events = [ev('b', T0 - 50 * 60_000), ev('a', T0 - 55 * 60_000), ev('c', T0 - 3 * 60_000)];
    const { client } = source(events);
    const got: string[][] = [];
    const store = createMemoryCheckpointStore();
    const p = createLogPoller({
      client,
      checkpointStore: store,
      onEvents: (es) => {
        got.push(es.map((e) => e.event_id));
      },
      startAt: T0 - H,
      clock,
    });
    while ((await p.pollOnce()).kind !== 'idle') {}
    expect(got).toEqual([['a', 'b', 'c']]);
    const cursor = p.cursor()!;
    events.push(ev('late', cursor - 10_000)); // ingested late, behind the cursor
    events.push(ev('d', cursor + 40_000)); // inside the next overlap: remembered
    clock.tick(60_000);
    while ((await p.pollOnce()).kind !== 'idle') {}
    expect(got).toEqual([
      ['a', 'b', 'c'],
      ['late', 'd'],
    ]);
    expect(store.current()!.seen.map(([id]) => id)).toEqual(['d']);
  });

  it('does not move the checkpoint past a failed window or a failed delivery', async () => {
    let fail = 2;
    const inner = source([ev('x', T0 - 30 * 60_000)]);
    const client: Pick<LogClient, 'readWindow'> = {
      readWindow: (s, w, on, o) =>
        fail-- > 0
          ? Promise.resolve({
              ok: false,
              error: new UpstreamError(ErrorCode.UPSTREAM_SERVER_ERROR, 'cut', { upstream: 'logs' }),
              durationMs: 0,
            })
          : inner.client.readWindow(s, w, on, o),
    };
    let refuse = true;
    const got: string[] = [];
    const store = createMemoryCheckpointStore();
    const p = createLogPoller({
      client,
      checkpointStore: store,
      onEvents: (es) => {
        if (refuse) {
          refuse = false;
          throw new Error('consumer down');
        }
        got.push(...es.map((e) => e.event_id));
      },
      startAt: T0 - H,
      clock: new DrivenClock({ nowMs: T0 }),
    });
    expect((await p.pollOnce()).kind).toBe('failed');
    expect((await p.pollOnce()).kind).toBe('failed');
    expect(store.current()).toBeUndefined();
    expect((await p.pollOnce()).kind).toBe('failed'); // the consumer threw
    expect(store.current()).toBeUndefined();
    expect((await p.pollOnce()).kind).toBe('delivered');
    expect(got).toEqual(['x']);
    expect(store.current()!.cursorMs).toBe(T0 - 120_000);
  });
});

describe('log poller under a lease (mayPoll)', () => {
  it('reads the checkpoint again once it may poll, after another replica moved it', async () => {
    const { client, requests } = source([]);
    const store = createMemoryCheckpointStore();
    let may = false;
    const asked: boolean[] = [];
    const clock = new DrivenClock({ nowMs: T0 });
    const p = createLogPoller({
      client,
      checkpointStore: store,
      onEvents: () => {},
      startAt: T0 - 3 * H,
      clock,
      pollIntervalMs: 1_000,
      mayPoll: async () => {
        asked.push(may);
        return may;
      },
    });
    await p.start();
    // Each pause between asks ends as the driven clock passes it.
    const advancedThen = (check: () => boolean) => async () => {
      await clock.advance(1_000);
      return check();
    };
    await eventually(
      advancedThen(() => asked.length >= 2),
      { intervalMs: 1 },
    );
    // Meanwhile the replica holding the lease read up to ten minutes ago.
    await store.save({ version: 1, cursorMs: T0 - 600_000, seen: [] });
    may = true;
    await eventually(
      advancedThen(() => requests.length > 0),
      { intervalMs: 1 },
    );
    await p.stop();
    // From its checkpoint (less the overlap), not from where this replica stood when it started.
    expect(requests[0]!.start).toBe(T0 - 600_000 - 30_000);
  });
});
