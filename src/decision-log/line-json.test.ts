import { describe, expect, it } from 'vitest';
import { lineJson } from './line-json.ts';
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

  it('is byte for byte JSON.stringify, for the record and for its redacted copy', () => {
    const raw = record();
    const redacted = createRedactor(
      [
        { path: ['inputs', 'user', 'display_name'], mode: 'drop' },
        { path: ['inputs', 'devices', 'display_name'], mode: 'drop' },
      ],
      undefined,
    )(raw);
    expect(redacted).not.toBe(raw);
    // The redacted line first (the log's), then the raw one reusing its members (the store's).
    expect(lineJson(redacted)).toBe(JSON.stringify(redacted));
    expect(lineJson(raw)).toBe(JSON.stringify(raw));
    expect(lineJson(raw)).toBe(JSON.stringify(raw));
    expect(lineJson(redacted)).not.toContain('Alice');
    expect(lineJson(raw)).toContain('Alice');
  });

  it('throws where JSON.stringify throws (a bigint), so the log still writes its unserializable line', () => {
    expect(() => lineJson({ inputs: { n: 1n } })).toThrow();
  });
});
