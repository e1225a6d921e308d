import { mkdtempSync, readFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { eventually } from '../../test/support/eventually.ts';
import { openDecisionLog } from './decision-log.ts';

const linesOf = (path: string) =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { n: number });

describe('a decision log file', () => {
  it('is opened anew at its path by reopen(): a rotated file is let go, nothing is lost or doubled', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'riskgate-log-'));
    const path = join(dir, 'decisions.jsonl');
    const log = openDecisionLog({ kind: 'file', path });
    for (let n = 0; n < 5; n++) log.write({ n });
    await log.flush();
    renameSync(path, `${path}.1`); // logrotate's move
    log.write({ n: 5 }); // still the old file: the process has not been told yet
    await log.flush();
    log.reopen?.();
    for (let n = 6; n < 10; n++) log.write({ n });
    await log.close();
    expect(linesOf(`${path}.1`).map((l) => l.n)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(linesOf(path).map((l) => l.n)).toEqual([6, 7, 8, 9]);
    expect(log.health?.()).toEqual({ ok: true, dropped: 0 });
  });

  it('reports a failing destination (ENOSPC) once, retries it, and counts what it lost', async () => {
    const changes: boolean[] = [];
    const errors: Error[] = [];
    const log = openDecisionLog(
      { kind: 'file', path: '/dev/full' },
      {
        onHealthChange: (ok) => changes.push(ok),
        onError: (e) => errors.push(e),
        retryMs: 20,
        redact: () => ({ redacted: true }),
      },
    );
    expect(log.health?.().ok).toBe(true);
    log.write({ n: 1 });
    await log.flush();
    expect(log.health?.()).toMatchObject({ ok: false, lastError: expect.stringMatching(/^ENOSPC/) });
    await eventually(() => errors.length === 1, { what: 'the failure told' });
    // Retried every 20 ms: a retry opens fine and fails its first write. Written until a reopened
    // stream has failed one (a record written while none is open is dropped at once).
    await eventually(
      async () => {
        log.write({ n: 2 });
        await log.flush();
        return errors.length >= 2;
      },
      { what: 'a reopened file failing its first write' },
    );
    // Never called healthy, and the failure reported once, not per retry.
    expect(log.health?.().ok).toBe(false);
    expect(changes).toEqual([false]);
    expect(log.dropped).toBeGreaterThanOrEqual(2);
    await log.close();
  });
});
