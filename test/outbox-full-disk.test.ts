import { rmSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { type Harness, startHarness } from './decide-harness.ts';
import { LOCK_EVERYONE_POLICY } from './support/lock-everyone-policy.ts';
import { CAN_MOUNT, mountSmallDisk } from './support/small-disk.ts';

/**
 * A full disk under the outbox's group commit, in a running riskgate on its embedded state (the
 * control file's script: `RiskgateDatabase.script`): a lock-out whose script meets the full disk
 * is answered failed (`queue_refused`), never `queued`; the failure is counted
 * (riskgate_action_answers_total) and logged ('outbox store failed'); nothing of it is stored; every
 * lock-out answered `queued` is in the outbox; and once space is back the next one is queued.
 *
 * The state dir is a 4 MiB tmpfs, filled up (the test runs as root, as CI does; elsewhere it says
 * why it skips). Not smaller: the decisions file is made even with the store off, and on its 16 KiB
 * pages its migrations leave ~0.7 MB of WAL; on 1 MiB the next lock-out's commit still found
 * the disk full once the filler was gone. A commit only needs new blocks when the control file's
 * WAL grows past its largest size (a WAL restarted after a checkpoint is written over), so
 * lock-outs are asked for until one meets the full disk, a bounded number of times.
 */

/** Lock-outs asked for on the full disk before the test gives up on meeting it. */
const MOST_TRIES = 400;

const lockOutOf = (body: Record<string, unknown>) =>
  (body.actions as { type: string; status: string; reason?: string }[]).find(
    (a) => a.type === 'lock_out_user',
  );

async function failedAnswers(h: Harness): Promise<number> {
  const text = await (await h.ops('/metrics')).text();
  const line = text
    .split('\n')
    .find(
      (l) =>
        l.startsWith('riskgate_action_answers_total{') &&
        l.includes('type="lock_out_user"') &&
        l.includes('status="failed"'),
    );
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('a full disk under the outbox group commit (SQLite)', () => {
  it.runIf(CAN_MOUNT)(
    'answers a lock-out whose script meets it failed, counted and logged, stores none of it, and queues the next once space is back',
    async () => {
      const disk = mountSmallDisk('riskgate-outbox-full-', '4m');
      let h: Harness | undefined;
      const scripts: unknown[] = [];
      const post = Worker.prototype.postMessage;
      try {
        h = await startHarness({
          policy: { yaml: LOCK_EVERYONE_POLICY },
          withoutLogApi: true,
          // The decision store elsewhere: the full disk is the control file's.
          env: { RISKGATE_STATE_DIR: disk.dir, RISKGATE_DECISION_STORE: 'off' },
        });
        const { mallory } = await lookUpUserIds(h.sandbox, ['mallory']);
        const lockOut = async () => {
          const res = await h!.decide(demoRequest('mallory', mallory));
          expect(res.status).toBe(200);
          return { id: `${res.body.decisionId}:lock_out_user:${mallory}`, ...lockOutOf(res.body)! };
        };
        expect(await lockOut()).toMatchObject({ status: 'queued' });
        const filler = disk.fillUp();
        Worker.prototype.postMessage = function (this: Worker, message: unknown, transfer) {
          const m = message as { type?: string; statements?: { sql: string }[] };
          if (m.type === 'script' && m.statements?.some((q) => q.sql.includes('"outbox_entry"')))
            scripts.push(m);
          return post.call(this, message, transfer);
        };

        const queued: string[] = [];
        let refused: { id: string; status: string; reason?: string } | undefined;
        for (let i = 0; i < MOST_TRIES && refused === undefined; i++) {
          const answer = await lockOut();
          if (answer.status === 'queued') queued.push(answer.id);
          else if (answer.status === 'failed') refused = answer;
        }
        expect(refused, `no lock-out met the full disk in ${MOST_TRIES}`).toMatchObject({
          reason: 'queue_refused',
        });
        expect(await failedAnswers(h)).toBe(1);
        expect(
          h.serviceLog.find((l) => l.msg === 'outbox store failed' && /full/i.test(String(l.error))),
        ).toBeDefined();
        // Nothing of its script: neither the outbox entry nor the lock-out's record beside it.
        expect(await h.riskgate.outbox.store.get(refused!.id)).toBeUndefined();
        expect((await h.ops(`/lockouts/${refused!.id.split(':')[0]}`)).status).toBe(404);
        // It was the group commit's script (one message to the control file's thread) that failed.
        expect(scripts.length).toBeGreaterThan(0);
        // Every lock-out answered queued is in the outbox: no promise without its row.
        for (const id of queued) expect(await h.riskgate.outbox.store.get(id), id).toBeDefined();

        // Space again: the next lock-out is queued, and stored.
        rmSync(filler);
        const next = await lockOut();
        expect(next).toMatchObject({ status: 'queued' });
        expect(await h.riskgate.outbox.store.get(next.id)).toBeDefined();
        expect(await failedAnswers(h)).toBe(1);
      } finally {
        Worker.prototype.postMessage = post;
        await h?.stop();
        disk.remove();
      }
    },
    120_000,
  );
});
