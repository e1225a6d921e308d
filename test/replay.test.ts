import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../src/cli/main.ts';
import { DEMO_ACCOUNTS, demoRequest } from '../src/dev/demo-requests.ts';
import { lookUpUserIds } from '../src/dev/embedded-sandbox.ts';
import { loadPolicy } from '../src/policy/policy-loader.ts';
import { MAX_REPLAY_LINE_BYTES } from '../src/replay/replay-labels.ts';
import { replayDecisions } from '../src/replay/replay-run.ts';
import { ReplayStopped, replayOnThreads } from '../src/replay/replay-threads.ts';
import { type Harness, startHarness, writePolicy } from './decide-harness.ts';
import { PATIENT_DEADLINE_MS, patientShippedPolicy } from './support/patient-policy.ts';

/**
 * Issue 16: replay. A decision log written by a running riskgate (the shipped policy with patient
 * timeouts, so that no decision is degraded by a busy machine; the sandbox's demo accounts, several
 * logins each) is replayed offline.
 */

let h: Harness;
let log: string;
/** The policy file the running riskgate served: the revision in its log is this one's. */
let served: string;
const answered = new Map<string, { verdict: string; score: number }>();

beforeAll(async () => {
  log = join(mkdtempSync(join(tmpdir(), 'riskgate-replay-')), 'decisions.jsonl');
  served = writePolicy(patientShippedPolicy());
  h = await startHarness({
    policy: served,
    deadlineMs: PATIENT_DEADLINE_MS,
    env: { RISKGATE_DECISION_LOG: log },
    riskgate: { decisionLog: undefined },
  });
  const names = DEMO_ACCOUNTS.map((a) => a.username);
  const ids = await lookUpUserIds(h.sandbox, names);
  for (let round = 0; round < 3; round++) {
    for (const name of names) {
      const body = {
        ...demoRequest(name, ids[name]),
        ip: `203.0.113.${10 + round}`,
        userAgent: `Mozilla/5.0 round ${round}`,
        context: { round, vip: round === 2 },
      };
      const res = await h.decide(body);
      expect(res.status).toBe(200);
      answered.set(String(res.body.decisionId), {
        verdict: String(res.body.verdict),
        score: Number((res.body as { score?: number }).score ?? Number.NaN),
      });
    }
  }
  await h.riskgate.decisionLog.flush();
});
afterAll(() => h?.stop());

async function cli(args: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(args, { out: (l) => out.push(l), err: (l) => err.push(l) });
  return { code, out, err };
}

describe('riskgate replay', () => {
  it('reproduces every verdict and score of a real log with the revision that made it', async () => {
    const policy = await loadPolicy(served);
    const report = await replayDecisions(policy, [log], { changedLimit: Number.POSITIVE_INFINITY });
    expect(report.decisions).toBe(answered.size);
    expect(report.bad.count).toBe(0);
    expect(report.changed).toBe(0);
    expect(report.score).toEqual({ meanShift: 0, up: 0, down: 0 });
    expect(Object.keys(report.revisions)).toEqual([policy.revision]);
    // The diagonal holds every decision, by the verdicts riskgate answered.
    const byVerdict = { allow: 0, challenge: 0, deny: 0 } as Record<string, number>;
    for (const a of answered.values()) byVerdict[a.verdict]!++;
    for (const v of ['allow', 'challenge', 'deny'] as const) expect(report.matrix[v][v]).toBe(byVerdict[v]);
    for (const [id, hits] of Object.entries(report.rules)) expect(hits.after, id).toBe(hits.before);
    expect(Object.values(report.rules).some((r) => r.after > 0)).toBe(true);
    // The decision log keeps no list snapshot: the shipped policy's list rules replay as if the
    // lists were unavailable, and every decision says so (none of these matched a list).
    expect(report.missingInputs).toEqual({ lists: answered.size });
  });

  it('shows what a raised challenge threshold changes, and fails CI beyond --max-changed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'riskgate-candidate-'));
    const text = readFileSync('policies/login.yaml', 'utf8').replace(/challenge: 40\b/, 'challenge: 79');
    expect(text).toContain('challenge: 79');
    writeFileSync(join(dir, 'login.yaml'), text);
    const challenged = [...answered.values()].filter((a) => a.verdict === 'challenge').length;
    expect(challenged).toBeGreaterThan(0);

    const json = await cli(['replay', '--policy', dir, '--json', log]);
    expect(json.code).toBe(4);
    const report = JSON.parse(json.out[0]!) as {
      changed: number;
      matrix: Record<string, Record<string, number>>;
      changes: { decisionId: string; from: string; to: string }[];
    };
    // Score-decided challenges below 79 become allows; nothing else moves.
    expect(report.changed).toBeGreaterThan(0);
    expect(report.changes.every((c) => c.from === 'challenge' && c.to === 'allow')).toBe(true);
    expect(report.matrix.challenge!.allow).toBe(report.changed);
    for (const c of report.changes) expect(answered.get(c.decisionId)?.verdict).toBe('challenge');

    const tolerant = await cli(['replay', '--policy', dir, '--max-changed', String(report.changed), log]);
    expect(tolerant.code).toBe(0);
    expect(tolerant.out[0]).toMatch(/^replayed \d+ decisions with login @ [0-9a-f]+ in /);
    expect(tolerant.out.join('\n')).toContain(`${report.changed} verdicts changed`);
  });

  it('reports rule statistics over the log with --stats', async () => {
    const r = await cli(['replay', '--policy', 'policies/', '--stats', log]);
    expect(r.code).toBe(0);
    expect(r.out.join('\n')).toMatch(/rule\s+before\s+after\s+rate after/);
  });

  it('says exit 3 for an unreadable line or log, and 2 without a policy', async () => {
    const bad = join(mkdtempSync(join(tmpdir(), 'riskgate-bad-')), 'bad.jsonl');
    writeFileSync(bad, `${readFileSync(log, 'utf8').split('\n')[0]}\n{not json\n`);
    const r = await cli(['replay', '--policy', 'policies/', bad]);
    expect(r.code).toBe(3);
    expect(r.out.join('\n')).toMatch(/unreadable: .*bad\.jsonl:2: not JSON/);
    expect((await cli(['replay', '--policy', 'policies/', '/nope.jsonl'])).code).toBe(3);
    expect((await cli(['replay', log])).code).toBe(2);
  });

  it(`says exit 3 naming the line for a line over ${MAX_REPLAY_LINE_BYTES} bytes, never holding it whole`, async () => {
    // 20 MB of one line after a real one (a 1 GB line used to crash replay with a stack trace).
    const dir = mkdtempSync(join(tmpdir(), 'riskgate-long-'));
    const long = join(dir, 'long.jsonl');
    try {
      const fd = openSync(long, 'w');
      writeSync(fd, `${readFileSync(log, 'utf8').split('\n')[0]}\n{"decisionId":"`);
      const mb = Buffer.alloc(1024 * 1024, 'x');
      for (let i = 0; i < 20; i++) writeSync(fd, mb);
      writeSync(fd, '"}\n');
      closeSync(fd);
      const r = await cli(['replay', '--policy', 'policies/', long]);
      expect(r.code).toBe(3);
      expect(r.err.join('\n')).toBe(
        `riskgate: ${long}: line 2 is longer than ${MAX_REPLAY_LINE_BYTES} bytes`,
      );
      const labels = await cli(['replay', '--policy', 'policies/', '--labels', long, log]);
      expect(labels.code).toBe(3);
      expect(labels.err.join('\n')).toContain('line 2 is longer than');
      // A directory fails while read: a message and exit 3, not a stack trace.
      const dirRun = await cli(['replay', '--policy', 'policies/', dir]);
      expect(dirRun.code).toBe(3);
      expect(dirRun.err.join('\n')).toMatch(/^riskgate: cannot read .*: EISDIR$/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('replay of a line that recorded fewer counters than the candidate reads', () => {
  it('reads the unrecorded counter as 0 (it counted nothing then) and lists it as uncertain', async () => {
    const line = JSON.parse(readFileSync('bench/fixtures/decision-lines.jsonl', 'utf8').split('\n')[0]!);
    // Recorded by a policy that had only accountsPerIp; the shipped one also reads ipsPerAccount.
    line.inputs.velocity = { accountsPerIp: 1 };
    const dir = mkdtempSync(join(tmpdir(), 'riskgate-replay-counters-'));
    const file = join(dir, 'line.jsonl');
    writeFileSync(file, `${JSON.stringify(line)}\n`);
    const report = await replayDecisions(await loadPolicy('policies/'), [file]);
    expect(report.missingInputs['velocity.ipsPerAccount']).toBe(1);
    // Evaluated with 0, not failing on a missing key (which fails closed and counts the rule).
    expect(report.rules['password-spraying']).toEqual({ before: 0, after: 0 });
    expect(report.matrix.allow.allow).toBe(1);
  });
});

describe('replay of a log cut across worker threads', () => {
  /** The real log three times over, with action lines, a bad line and an empty one among them. */
  function mixedLog(): string {
    const dir = mkdtempSync(join(tmpdir(), 'riskgate-replay-threads-'));
    const file = join(dir, 'mixed.jsonl');
    const lines = readFileSync(log, 'utf8').trim().split('\n');
    const out: string[] = [];
    for (let copy = 0; copy < 3; copy++) {
      for (const [i, line] of lines.entries()) {
        out.push(line.replace(/"decisionId":"([^"]+)"/, `"decisionId":"$1-${copy}"`));
        if (i % 4 === 0)
          out.push('{"kind":"action","schemaVersion":1,"decisionId":"x","type":"lock_out_user"}');
        if (copy === 1 && i === 5) out.push('{not json');
        if (copy === 2 && i === 2) out.push('');
      }
    }
    writeFileSync(file, `${out.join('\n')}\n`);
    return file;
  }

  it('reports exactly what one pass reports: counts, changes in log order, unreadable lines by their number', async () => {
    const file = mixedLog();
    // A candidate that changes verdicts, so the changes' order across the stretches is tested.
    const dir = mkdtempSync(join(tmpdir(), 'riskgate-candidate-'));
    writeFileSync(
      join(dir, 'login.yaml'),
      readFileSync('policies/login.yaml', 'utf8').replace(/challenge: 40\b/, 'challenge: 79'),
    );
    const policy = await loadPolicy(dir);
    const ids = [...answered.keys()];
    const labels = new Map<string, 'fraud' | 'legit'>([
      [`${ids[0]}-0`, 'fraud'],
      [`${ids[1]}-2`, 'legit'],
    ]);
    const options = { changedLimit: 7, labels, policyPath: dir };
    const single = await replayDecisions(policy, [file], { ...options, threads: 1 });
    const threaded = await replayDecisions(policy, [file], { ...options, threads: 3, minBytesPerThread: 1 });
    // A piece of a line or two at a time, taken by whichever thread is free.
    const pieces = await replayDecisions(policy, [file], {
      ...options,
      threads: 2,
      minBytesPerThread: 1,
      pieceBytes: 1,
    });
    expect(single.changed).toBeGreaterThan(7);
    expect(single.bad.count).toBe(1);
    expect(single.skipped).toBeGreaterThan(0);
    expect({ ...threaded, elapsedMs: 0 }).toEqual({ ...single, elapsedMs: 0 });
    expect({ ...pieces, elapsedMs: 0 }).toEqual({ ...single, elapsedMs: 0 });
  });

  it('names a line too long by its number in the whole file', async () => {
    const file = mixedLog();
    const lines = readFileSync(file, 'utf8').split('\n');
    const total = lines.length - 1;
    const limit = Math.max(...lines.map((l) => Buffer.byteLength(l))) + 10;
    writeFileSync(file, `${readFileSync(file, 'utf8')}{"decisionId":"${'x'.repeat(limit)}"}\n`);
    const policy = await loadPolicy('policies/');
    const run = replayDecisions(policy, [file], {
      policyPath: 'policies/',
      threads: 3,
      minBytesPerThread: 1,
      maxLineBytes: limit,
    });
    await expect(run).rejects.toThrow(`${file}: line ${total + 1} is longer than ${limit} bytes`);
    // Cut into pieces of a line each: the threads stop taking pieces at the long one, and the lines
    // before it are still counted.
    const inPieces = replayDecisions(policy, [file], {
      policyPath: 'policies/',
      threads: 2,
      minBytesPerThread: 1,
      pieceBytes: 1,
      maxLineBytes: limit,
    });
    await expect(inPieces).rejects.toThrow(`${file}: line ${total + 1} is longer than ${limit} bytes`);
  });

  it('ends its threads at once when stopped, rejecting with what stopped it', async () => {
    const file = mixedLog();
    const policy = await loadPolicy('policies/');
    const controller = new AbortController();
    const tasks = [0, 1].map((k) => ({
      policy: { path: 'policies/', revision: policy.revision },
      source: {
        kind: 'file' as const,
        file,
        start: 0,
        end: k === 0 ? 0 : 1,
        maxLineBytes: MAX_REPLAY_LINE_BYTES,
      },
      changedLimit: 0,
      labelIds: [],
      tallyChanges: false,
    }));
    const run = replayOnThreads(tasks, controller.signal);
    // The threads started (a policy compiled by each takes longer than this turn): stopped mid-way.
    controller.abort();
    await expect(run).rejects.toBeInstanceOf(ReplayStopped);
    // Stopped before it starts: no thread at all.
    await expect(replayOnThreads(tasks, controller.signal)).rejects.toThrow();
  });
});
