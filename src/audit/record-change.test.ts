import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { afterEach, describe, expect, it } from 'vitest';
import { memoryAuditTrail } from '../../test/support/memory-audit-trail.ts';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import { toProblem } from '../problem/problem-details.ts';
import { changeAudit } from './record-change.ts';

/**
 * The edge's audit of a change (issue 30), over real HTTP: the intent written before the route
 * makes it, its outcome read from the answer after: done (2xx, a form's 303), refused with the
 * code (4xx after the intent: the change was no longer possible), failed with the code (5xx, a
 * throw). An outcome that cannot be written never fails the answer: the entry reads unknown.
 */

const servers: { close(): void }[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

async function setUp() {
  const audit = memoryAuditTrail();
  const log: Record<string, unknown>[] = [];
  const changes = changeAudit({ audit, clientAddress: () => '192.0.2.1', log: (l) => log.push(l) });
  const app = new Hono();
  app.onError((error, c) => c.json(toProblem(error), toProblem(error).status as 400));
  app.use(async (c, next) => {
    c.set('principal', {
      keyId: 'key-0123456789ab',
      role: 'operator',
      operator: { name: 'adam', role: 'admin', keyId: 'key-0123456789ab' },
    });
    await next();
  });
  app.use(changes.settleChanges);
  const change = (target: string) => ({ action: 'list.add' as const, target });
  app.post('/made', async (c) => {
    await changes.recordChange(c, change('made'));
    return c.redirect('/done', 303);
  });
  app.post('/gone', async (c) => {
    await changes.recordChange(c, change('gone'));
    throw new RiskgateError(ErrorCode.NOT_FOUND, 'No entry "x" (removed meanwhile).');
  });
  app.post('/failed', async (c) => {
    await changes.recordChange(c, change('failed'));
    throw new RiskgateError(ErrorCode.DATABASE_UNAVAILABLE, 'The lists database did not answer.');
  });
  app.post('/bug', async (c) => {
    await changes.recordChange(c, change('bug'));
    throw new Error('a bug');
  });
  app.post('/reload-failed', async (c) => {
    await changes.recordChange(c, change('reload-failed'));
    // Answered 200, as a failed policy reload is: the route says what became of it.
    changes.changeOutcome(c, { status: 'failed', code: ErrorCode.INVALID_POLICY });
    return c.json({ ok: false });
  });
  app.post('/read', (c) => c.text('nothing recorded'));
  const port = await new Promise<number>((resolve) => {
    servers.push(serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => resolve(info.port)));
  });
  const post = (path: string) =>
    fetch(`http://127.0.0.1:${port}${path}`, { method: 'POST', redirect: 'manual' });
  const outcomeOf = (target: string) => audit.entries.find((e) => e.target === target)?.outcome;
  return { audit, log, post, outcomeOf };
}

describe('the audit of a change', () => {
  it('writes the outcome after the answer: done, refused and failed with their codes, or as the route says', async () => {
    const { post, outcomeOf, audit } = await setUp();
    expect((await post('/made')).status).toBe(303);
    expect(outcomeOf('made')).toMatchObject({ status: 'done' });
    expect((await post('/gone')).status).toBe(404);
    expect(outcomeOf('gone')).toMatchObject({ status: 'refused', code: ErrorCode.NOT_FOUND });
    expect((await post('/failed')).status).toBe(503);
    expect(outcomeOf('failed')).toMatchObject({ status: 'failed', code: ErrorCode.DATABASE_UNAVAILABLE });
    expect((await post('/bug')).status).toBe(500);
    expect(outcomeOf('bug')).toMatchObject({ status: 'failed', code: ErrorCode.INTERNAL });
    expect((await post('/reload-failed')).status).toBe(200);
    expect(outcomeOf('reload-failed')).toMatchObject({ status: 'failed', code: ErrorCode.INVALID_POLICY });
    // A request that recorded nothing settles nothing.
    expect((await post('/read')).status).toBe(200);
    expect(audit.entries).toHaveLength(5);
  });

  it('answers the change even when its outcome cannot be written: the entry reads unknown, and it is logged', async () => {
    const { post, audit, log } = await setUp();
    const settle = audit.settle;
    audit.settle = async () => {
      throw new Error('the database went away');
    };
    expect((await post('/made')).status).toBe(303);
    audit.settle = settle;
    expect((await audit.list({})).entries[0]!.outcome).toEqual({ status: 'unknown' });
    expect(log).toContainEqual(
      expect.objectContaining({ level: 'error', msg: 'audit outcome write failed: the entry reads unknown' }),
    );
  });
});
