import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { type IpcReply, IpcRequests, replyTo } from './ipc-requests.ts';

const unavailable = (why: string) => new Error(`unavailable: ${why}`);

describe('the request/reply channel to the primary', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('matches each reply to its request, whatever order they come back in, and ignores other messages', async () => {
    const sent: { type: string; id: number; n: number }[] = [];
    const channel = new IpcRequests({ send: (m) => sent.push(m as (typeof sent)[number]) > 0 });
    const first = channel.request<number, { type: string; n: number }>({ type: 't', n: 1 }, unavailable);
    const second = channel.request<number, { type: string; n: number }>({ type: 't', n: 2 }, unavailable);
    expect(channel.receive({ type: 'something else', id: sent[0]!.id })).toBe(false);
    // The primary answers the second first; its error reaches the first's caller.
    expect(channel.receive(replyTo(sent[1]!, () => sent[1]!.n * 10))).toBe(true);
    channel.receive(
      replyTo(sent[0]!, () => {
        throw new Error('store failed');
      }),
    );
    await expect(second).resolves.toBe(20);
    await expect(first).rejects.toThrow('store failed');
  });

  it('gives up after its timeout and drops the late reply; a closed channel fails at once', async () => {
    const sent: { id: number }[] = [];
    const channel = new IpcRequests({ send: (m) => sent.push(m as { id: number }) > 0, timeoutMs: 500 });
    const waiting = channel.request({ type: 't' }, unavailable);
    const settled = expect(waiting).rejects.toThrow('unavailable: the primary did not answer within 500 ms');
    await vi.advanceTimersByTimeAsync(500);
    await settled;
    const late: IpcReply = replyTo(sent[0]!, () => 1);
    expect(channel.receive(late)).toBe(true);
    const closed = new IpcRequests({ send: () => false });
    await expect(closed.request({ type: 't' }, unavailable)).rejects.toThrow(
      'unavailable: the IPC channel to the primary is closed',
    );
  });
});
