import { describe, expect, it } from 'vitest';
import { createdAtNs } from './log-event.ts';
import { NdjsonLines } from './ndjson-lines.ts';

describe('NDJSON line splitting', () => {
  it('yields whole lines across arbitrary chunk boundaries, multi-byte characters included', () => {
    const text = '{"a":"é"}\r\n{"b":"日本"}\n\n{"c":3}';
    const bytes = Buffer.from(text);
    for (let cut = 1; cut < bytes.length; cut++) {
      const lines: string[] = [];
      const s = new NdjsonLines(1024);
      s.push(bytes.subarray(0, cut), (l) => lines.push(l) > 0);
      s.push(bytes.subarray(cut), (l) => lines.push(l) > 0);
      const last = s.end();
      if (last !== undefined) lines.push(last);
      expect(lines).toEqual(['{"a":"é"}', '{"b":"日本"}', '{"c":3}']);
    }
  });

  it('refuses a line longer than the limit without buffering the rest', () => {
    const s = new NdjsonLines(8);
    expect(s.push(Buffer.from('{"ok":1}\n'), () => true)).toBe(true);
    expect(s.push(Buffer.from('0123456789'), () => true)).toBe(false);
  });

  it('numbers lines from 1, empty ones counted, and refuses a whole line over the limit in one chunk', () => {
    const seen: [string, number][] = [];
    const s = new NdjsonLines(8);
    expect(s.push(Buffer.from('a\n\r\nb\n'), (l, n) => seen.push([l, n]) > 0)).toBe(true);
    expect(seen).toEqual([
      ['a', 1],
      ['b', 3],
    ]);
    expect(s.push(Buffer.from('0123456789\nc\n'), () => true)).toBe(false);
    expect(s.linesEnded).toBe(3);
  });

  it('stops when the consumer says so', () => {
    const seen: string[] = [];
    const s = new NdjsonLines(100);
    const consume = (l: string): boolean => {
      seen.push(l);
      return l !== 'b';
    };
    expect(s.push(Buffer.from('a\nb\nc\n'), consume)).toBe(false);
    expect(seen).toEqual(['a', 'b']);
  });
});

describe('created_at ordering', () => {
  it('orders second and nanosecond precision exactly, offsets normalised', () => {
    const values = [
      '2024-01-02T10:00:00.000000002Z',
      '2024-01-02T10:00:00Z',
      '2024-01-02T11:00:00.5+01:00',
      '2024-01-02T10:00:00.000000001Z',
      '2024-01-02T10:00:01',
    ];
    const sorted = [...values].sort((a, b) => {
      const x = createdAtNs(a)!;
      const y = createdAtNs(b)!;
      return x < y ? -1 : x > y ? 1 : 0;
    });
    expect(sorted).toEqual([
      '2024-01-02T10:00:00Z',
      '2024-01-02T10:00:00.000000001Z',
      '2024-01-02T10:00:00.000000002Z',
      '2024-01-02T11:00:00.5+01:00',
      '2024-01-02T10:00:01',
    ]);
    expect(createdAtNs('yesterday')).toBeUndefined();
  });
});
