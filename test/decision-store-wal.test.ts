import { randomUUID } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, readSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../src/database/database.ts';
import { DECISIONS_PAGE_SIZE, DECISIONS_WAL_BYTES } from '../src/database/state-files.ts';
import { storeOpOf } from '../src/decision-store/decision-rows.ts';
import { sqliteThreadSink } from '../src/decision-store/sqlite-thread-sink.ts';
import { DECISION_MIGRATIONS } from '../src/service/database-migrations.ts';

/**
 * The decisions file's checkpoints (src/database/state-files.ts, DECISIONS_WAL_BYTES): the writer
 * thread lets the WAL build up to the bound before a commit checkpoints it (SQLite's default, 1,000
 * pages, checkpointed a large store after every batch), and no further: after the checkpoint the
 * WAL starts over within the bound.
 */

/** The WAL's first salt (a new one each time a checkpoint starts the WAL over) and its frames. */
function walFrames(path: string, pageBytes: number): { salt: number; frames: number } {
  const fd = openSync(path, 'r');
  try {
    const header = Buffer.alloc(32);
    if (readSync(fd, header, 0, 32, 0) < 32) return { salt: 0, frames: 0 };
    const salts = [header.readUInt32BE(16), header.readUInt32BE(20)];
    const frame = Buffer.alloc(24);
    let frames = 0;
    // A frame is its 24-byte header and its page; frames left from before the WAL started over
    // carry the old salts.
    while (readSync(fd, frame, 0, 24, 32 + frames * (24 + pageBytes)) === 24) {
      if (frame.readUInt32BE(8) !== salts[0] || frame.readUInt32BE(12) !== salts[1]) break;
      frames++;
    }
    return { salt: salts[0]!, frames };
  } finally {
    closeSync(fd);
  }
}

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A decision whose line is about 5 KB (the bench's), with a user, an IP and a rule of its own. */
const wide = (n: number) =>
  storeOpOf(
    {
      kind: 'decision',
      decisionId: randomUUID(),
      at: new Date(Date.parse('2026-03-01T00:00:00Z') + n * 1000).toISOString(),
      request: { accountId: `acct-${n}`, userId: `user-${n}`, ip: `10.0.${n % 250}.1` },
      policy: { name: 'login', revision: 'rev-a' },
      inputs: { signals: { evidence: 'e'.repeat(4800) } },
      outcome: { verdict: 'deny', score: n, matchedRules: [{ id: `rule-${n % 7}` }] },
    },
    0,
  )!;

describe("the decisions file's WAL (SQLite)", () => {
  it('is checkpointed only once it holds DECISIONS_WAL_BYTES, and starts over within them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'riskgate-decision-wal-'));
    dirs.push(dir);
    const path = join(dir, 'decisions.sqlite');
    const database = await openDatabase(
      { kind: 'sqlite', path, pageSize: DECISIONS_PAGE_SIZE },
      { migrations: DECISION_MIGRATIONS },
    );
    const sink = sqliteThreadSink(path);
    const walPages = DECISIONS_WAL_BYTES / DECISIONS_PAGE_SIZE;
    const batch = 100;
    try {
      let n = 0;
      await sink.write([wide(n++)]);
      const first = walFrames(`${path}-wal`, DECISIONS_PAGE_SIZE);
      let most = first.frames;
      let startedOver = false;
      // A fresh file takes ~2 frames a decision: the bound is reached within ~25 batches.
      for (let b = 0; b < 100 && !startedOver; b++) {
        await sink.write(Array.from({ length: batch }, () => wide(n++)));
        const wal = walFrames(`${path}-wal`, DECISIONS_PAGE_SIZE);
        startedOver = wal.salt !== first.salt;
        if (!startedOver) most = Math.max(most, wal.frames);
      }
      expect(startedOver).toBe(true);
      // SQLite's default would have started over past 1,000 frames.
      expect(most).toBeGreaterThan(walPages * 0.9);
      // Within the bound and the one batch that crossed it (frames of ~16 KiB each).
      expect(statSync(`${path}-wal`).size).toBeLessThan(
        DECISIONS_WAL_BYTES + batch * 4 * (DECISIONS_PAGE_SIZE + 24),
      );
    } finally {
      await sink.close();
      await database.close();
    }
  }, 120_000);
});
