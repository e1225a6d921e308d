import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { type FeedbackMessage, IpcRecentDecisions, PrimaryRecentDecisions } from './ipc-recent-decisions.ts';
import { RecentDecisions } from './recent-decisions.ts';

const KEY = 'key-0123456789ab';
const event = (labelledBy = KEY) => ({ label: 'fraud' as const, labelledBy, at: '2025-01-01T00:00:00.000Z' });

/** A worker wired to the primary; `hold` keeps its messages back until `release` (another worker's pipe, slower). */
function cluster(missWaitMs = 200) {
  const primary = new PrimaryRecentDecisions(new RecentDecisions(), { missWaitMs });
  const worker = (held?: FeedbackMessage[]) => {
    const w: IpcRecentDecisions = new IpcRecentDecisions({
      send: (m) => {
        if (held !== undefined) held.push(m);
        else primary.receive(m, (answer) => w.receive(answer));
        return true;
      },
    });
    return w;
  };
  return { primary, worker };
}

describe('the recent decisions in the primary', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('answers a label that overtook its decision’s remember once the remember arrives, not with a miss', async () => {
    const { primary, worker } = cluster();
    const held: FeedbackMessage[] = [];
    const deciding = worker(held);
    const labelling = worker();
    const id = crypto.randomUUID();
    deciding.remember(id, KEY);
    const labelled = labelling.label(id, event(), false);
    await vi.advanceTimersByTimeAsync(50);
    for (const m of held) primary.receive(m, () => {});
    await expect(labelled).resolves.toMatchObject({ labelled: true, known: true });
  });

  it('refuses a caller’s label of a decision never remembered after missWaitMs, and one of another key’s at once', async () => {
    const { worker } = cluster();
    const w = worker();
    const unknown = w.label(crypto.randomUUID(), event(), false);
    await vi.advanceTimersByTimeAsync(200);
    await expect(unknown).resolves.toEqual({ labelled: false });
    const id = crypto.randomUUID();
    w.remember(id, KEY);
    await expect(w.label(id, event('key-ffffffffffff'), false)).resolves.toEqual({ labelled: false });
  });

  it('says whether a key was answered a decision (an outcome’s check), waiting for a remember still on its way', async () => {
    const { primary, worker } = cluster();
    const held: FeedbackMessage[] = [];
    const deciding = worker(held);
    const reporting = worker();
    const id = crypto.randomUUID();
    deciding.remember(id, KEY);
    const answered = reporting.answered(id, KEY);
    await vi.advanceTimersByTimeAsync(50);
    for (const m of held) primary.receive(m, () => {});
    await expect(answered).resolves.toBe(true);
    await expect(reporting.answered(id, 'key-ffffffffffff')).resolves.toBe(false);
    const unknown = reporting.answered(crypto.randomUUID(), KEY);
    await vi.advanceTimersByTimeAsync(200);
    await expect(unknown).resolves.toBe(false);
  });

  it('answers 503 RG_ERR_FEEDBACK_UNAVAILABLE when the primary does not answer in time, or the channel is closed', async () => {
    const silent = new IpcRecentDecisions({ send: () => true, timeoutMs: 1000 });
    const waiting = silent.label(crypto.randomUUID(), event(), false);
    const settled = expect(waiting).rejects.toMatchObject({ code: 'RG_ERR_FEEDBACK_UNAVAILABLE' });
    await vi.advanceTimersByTimeAsync(1000);
    await settled;
    const closed = new IpcRecentDecisions({ send: () => false });
    await expect(closed.label(crypto.randomUUID(), event(), true)).rejects.toMatchObject({
      code: 'RG_ERR_FEEDBACK_UNAVAILABLE',
    });
  });
});
