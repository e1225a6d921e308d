import { describe, expect, it } from 'vitest';
import { lineJson, takeLineJson } from './line-json.ts';
import { createRedactor } from './log-redaction.ts';

describe('lineJson', () => {
  const record = () => ({
    kind: 'decision',
    decisionId: 'd-1',
    at: '2026-11-28T19:00:00.000Z',
    request: { accountId: 'acme', ip: '203.0.113.7', context: { 'odd "key"\n': 1, skip: undefined } },
    inputs: {
      signals: { rat: { value: true, nested: { deep: [1, 'two', null, { x: 3 }] } } },
      user: { id: 'u1', display_name: 'Alice' },
      devices: [{ id: 'dev', display_name: 'Phone' }],
      when: new Date(0),
      gone: () => 1,
    },
    outcome: { verdict: 'deny', score: 90.5, matchedRules: [{ id: 'rat' }] },
    nothing: null,
    empty: {},
    degraded: false,
  });

  it('is JSON.stringify of the record; the store takes the log’s string when redaction left the record whole', () => {
    const raw = record();
    const same = createRedactor([{ path: ['inputs', 'nowhere'], mode: 'drop' }], undefined)(raw);
    expect(same).toBe(raw);
    const logged = lineJson(same);
    expect(logged).toBe(JSON.stringify(raw));
    expect(takeLineJson(raw)).toBe(logged);
  });

  it('gives the store the log’s redacted line, not the record before redaction', () => {
    const raw = record();
    const redacted = createRedactor(
      [{ path: ['inputs', 'user', 'display_name'], mode: 'drop' }],
      undefined,
    )(raw);
    expect(redacted).not.toBe(raw);
    const logged = lineJson(raw, redacted);
    expect(logged).toBe(JSON.stringify(redacted));
    expect(takeLineJson(raw)).toBe(logged);
    expect(logged).not.toContain('Alice');
  });

  it('keeps the line only until the store takes it: taken again, it is serialised anew', () => {
    const raw = record();
    const redact = createRedactor([{ path: ['inputs', 'user', 'display_name'], mode: 'drop' }], undefined);
    const logged = lineJson(raw, redact(raw));
    expect(takeLineJson(raw)).toBe(logged);
    // Not the memo's line: that would be the redacted one. Held past its reader, a line whose record
    // had been promoted was promoted with it, and kept until a mark-compact.
    expect(takeLineJson(raw)).toContain('Alice');
  });

  it('redacts the record itself for the store when the log wrote no line for it', () => {
    const raw = record();
    const redact = createRedactor([{ path: ['inputs', 'user', 'display_name'], mode: 'drop' }], undefined);
    expect(takeLineJson(raw, redact)).toBe(JSON.stringify(redact(raw)));
    expect(takeLineJson(raw, redact)).not.toContain('Alice');
    expect(takeLineJson(raw)).toContain('Alice');
  });

  it('throws where JSON.stringify throws (a bigint), so the log still writes its unserializable line', () => {
    expect(() => lineJson({ inputs: { n: 1n } })).toThrow();
  });
});
