import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createDecisionLog } from './decision-log.ts';

class Collector extends Writable {
  chunks: string[] = [];
  constructor(highWaterMark = 16 * 1024) {
    super({ highWaterMark });
  }
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (error?: Error | null) => void) {
    this.chunks.push(chunk.toString('utf8'));
    setImmediate(cb);
  }
  lines(): unknown[] {
    return this.chunks
      .join('')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l));
  }
}

describe('decision log', () => {
  it('writes one JSON line per record, in order, batched off the calling turn', async () => {
    const out = new Collector();
    const log = createDecisionLog(out);
    log.write({ n: 1 });
    log.write({ n: 2 });
    expect(out.chunks).toEqual([]); // nothing written synchronously
    await log.flush();
    expect(out.lines()).toEqual([{ n: 1 }, { n: 2 }]);
    expect(out.chunks).toHaveLength(1);
  });

  it('keeps records through backpressure and writes them all once the stream drains', async () => {
    const out = new Collector(8);
    const log = createDecisionLog(out);
    for (let i = 0; i < 50; i++) {
      log.write({ i, pad: 'x'.repeat(20) });
      if (i % 10 === 0) await new Promise((r) => setImmediate(r));
    }
    await log.flush();
    expect(out.lines().map((r) => (r as { i: number }).i)).toEqual([...Array(50).keys()]);
    expect(log.dropped).toBe(0);
  });

  it('counts records dropped beyond maxPending instead of growing without bound', async () => {
    const out = new Collector();
    const log = createDecisionLog(out, { maxPending: 3 });
    for (let i = 0; i < 5; i++) log.write({ i });
    expect(log.dropped).toBe(2);
    await log.flush();
    expect(out.lines()).toHaveLength(3);
  });

  it('still writes a line for a record that cannot be serialised', async () => {
    const out = new Collector();
    const log = createDecisionLog(out);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    log.write(cyclic);
    await log.flush();
    expect(out.lines()).toEqual([{ kind: 'unserializable', error: expect.any(String) }]);
  });

  it('closes an owned stream after flushing', async () => {
    const out = new Collector();
    const log = createDecisionLog(out, { ownsStream: true });
    log.write({ last: true });
    await log.close();
    expect(out.writableEnded).toBe(true);
    expect(out.lines()).toEqual([{ last: true }]);
    log.write({ after: true });
    expect(log.dropped).toBe(1);
  });
});
