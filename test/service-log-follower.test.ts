import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdminClient } from '../src/admin/admin-client.ts';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds, sandboxUpstream } from '../src/dev/embedded-sandbox.ts';
import { SteppedClock } from '../src/timing/driven-clock.ts';
import { type Harness, startHarness } from './decide-harness.ts';
import { eventually } from './support/eventually.ts';
import { PATIENT_DEADLINE_MS, patientShippedPolicy } from './support/patient-policy.ts';

/**
 * The Log API follower, over real HTTP against the sandbox: a lock-out made elsewhere (another
 * Admin API client, as the help desk's tools would) reaches riskgate through the Log API and drops
 * its cached Admin read, so the next decision sees it without waiting for the cache to expire.
 * The Log API serves events two minutes old: the sandbox clock and the follower's move together,
 * two minutes in a moment, so the cached read is still fresh when the event arrives (in real time
 * the cache would have expired by then; docs/operations.md, "The Log API follower").
 */

/** riskgate's clock, stepped with the sandbox's. */
const clock = new SteppedClock();

let h: Harness;
let alice: string;
beforeAll(async () => {
  // A user read that stays fresh for the whole file: the stale answer below is then a fact, not a
  // race against the 2 s default on a loaded machine; patient timeouts, so alice's allow is not a
  // degraded challenge there either.
  h = await startHarness({
    policy: { yaml: patientShippedPolicy() },
    deadlineMs: PATIENT_DEADLINE_MS,
    riskgate: { clock, logs: { pollIntervalMs: 50 }, adminCache: { user: { ttlMs: 600_000 } } },
  });
  alice = (await lookUpUserIds(h.sandbox, ['alice'])).alice!;
  // The scenario's admin-dashboard history ends two minutes before the sandbox started, so the
  // follower's first window (about a second after start) may carry an event for alice that drops
  // her cached read. Let that window pass first, or it races the stale read below.
  const startCursor = h.riskgate.logs!.cursor()!;
  await eventually(async () => (h.riskgate.logs!.cursor()! > startCursor ? true : undefined));
});
afterAll(() => h?.stop());

async function metrics(): Promise<string> {
  return (await h.ops('/metrics')).text();
}

describe('the Log API follower', () => {
  it('makes a lock-out done elsewhere visible to the next decision, before the cached read expires', async () => {
    const first = await h.decide(demoRequest('alice', alice));
    expect(first.body).toMatchObject({
      verdict: 'allow',
      signals: { adminUser: { result: { status: 'enabled' } } },
    });

    // The help desk locks alice out with its own Admin API client.
    const elsewhere = createAdminClient({
      baseUrl: h.sandbox.url,
      serviceId: sandboxUpstream(h.sandbox).serviceId,
      apiKey: sandboxUpstream(h.sandbox).adminApiKey,
    });
    const locked = await elsewhere.updateUser(alice, { status: 'locked_out' }, { timeoutMs: 2000 });
    await elsewhere.close();
    expect(locked.ok).toBe(true);
    // riskgate's cached read still says enabled (this is what the follower fixes).
    const stale = await h.decide(demoRequest('alice', alice));
    expect(stale.body).toMatchObject({
      verdict: 'allow',
      signals: { adminUser: { result: { status: 'enabled' } } },
    });

    // Two minutes later the event is readable: the follower reads it and drops alice's cached read.
    await h.control('POST', '/sandbox/clock', { advanceSeconds: 130 });
    clock.step(130_000);
    await eventually(async () =>
      /^riskgate_log_events_total\{type="user\.updated"\} [1-9]/m.test(await metrics()) ? true : undefined,
    );

    // Without the follower, a read younger than the cache's stale window would still say enabled.
    const fresh = await h.decide(demoRequest('alice', alice));
    expect(fresh.body.verdict).toBe('deny');
    expect((fresh.body.reasons as { id: string }[]).map((r) => r.id)).toContain('account-locked');
    expect(fresh.body.signals).toMatchObject({ adminUser: { result: { status: 'locked_out' } } });
  });

  it('keeps its checkpoint under RISKGATE_STATE_DIR, past the events it delivered', async () => {
    const file = join(h.stateDir, 'log-checkpoint-service.json');
    // The checkpoint is saved after the window's events were delivered (and counted): wait for it.
    const checkpoint = await eventually(async () => {
      if (!existsSync(file)) return undefined;
      const saved = JSON.parse(readFileSync(file, 'utf8')) as { cursorMs: number };
      return saved.cursorMs === h.riskgate.logs!.cursor() ? saved : undefined;
    });
    // Past the lock-out event, which the follower read only once its clock was two minutes on.
    expect(checkpoint.cursorMs).toBeGreaterThan(Date.now());
  });

  it('exports how far behind now it reads', async () => {
    const m = /^riskgate_log_follower_lag_seconds (\d+(\.\d+)?)/m.exec(await metrics());
    expect(m).not.toBeNull();
    // At least the 2-minute ingestion delay, and not much more once caught up.
    expect(Number(m![1])).toBeGreaterThanOrEqual(120);
    expect(Number(m![1])).toBeLessThan(125);
  });
});
