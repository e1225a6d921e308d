import { describe, expect, it } from 'vitest';
import { activeCallResponseSchema, fastestPairSchema } from './signal-schemas.ts';

describe('signal response schemas', () => {
  const answer = { signalType: 'active_call', success: true, result: { onCall: false } };

  it('accept RFC 3339 observation times, with Z or an offset', () => {
    for (const observationTime of ['2024-01-02T10:00:00.123Z', '2024-01-02T11:00:00+01:00']) {
      expect(activeCallResponseSchema.safeParse({ ...answer, observationTime }).success).toBe(true);
    }
  });

  it('refuse an observation time that is not an RFC 3339 timestamp of a real instant', () => {
    for (const observationTime of ['yesterday', '2024-01-02 10:00:00', '2024-02-30T10:00:00Z']) {
      const r = activeCallResponseSchema.safeParse({ ...answer, observationTime });
      expect(r.success, observationTime).toBe(false);
      expect(r.error?.issues[0]?.path).toEqual(['observationTime']);
    }
    const pair = fastestPairSchema.safeParse({ fromObservationTime: 'x', toObservationTime: 'y' });
    expect(pair.error?.issues.map((i) => i.path[0])).toContain('fromObservationTime');
  });
});
