import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { loadPolicy } from '../policy/policy-loader.ts';
import { type ReplayReport, replayDecisions } from './replay-run.ts';

/**
 * Replay reads a log file as bytes (each thread its own stretch, a line decoded only as far as it
 * is read, action and label lines passed over by their first bytes). Over a mixed log it must
 * report what reading every line whole with `JSON.parse` reports: the same decisions, verdicts
 * changed or not, rules, unreadable lines by number and reason, and other lines skipped.
 */

const ROOT = join(import.meta.dirname, '../..');
const fixture = readFileSync(join(ROOT, 'bench/fixtures/decision-lines.jsonl'), 'utf8').trim().split('\n');
const dir = mkdtempSync(join(tmpdir(), 'riskgate-replay-mixed-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// biome-ignore lint/suspicious/noExplicitAny: a test lays lines out freely.
type Fields = Record<string, any>;

/** A candidate reading two signals and the Admin user. */
const NARROW = `apiVersion: riskgate/v1
kind: Policy
name: login
thresholds: { challenge: 40, deny: 80 }
rules:
  - { id: new-browser, description: a new browser, when: 'signals.newBrowser.success && !signals.newBrowser.known', score: 40 }
  - { id: rat, description: remote control, when: 'signals.remoteAccessTool.success && signals.remoteAccessTool.anomaly', verdict: deny }
  - { id: locked, description: locked out, when: 'user.status == "locked_out"', verdict: deny }
`;

/** A fixture decision changed by `edit`, with an id of its own. */
function decision(n: number, edit: (v: Fields) => void = () => {}, template = n % fixture.length): string {
  const v = JSON.parse(fixture[template]!) as Fields;
  v.decisionId = `mixed-${n}`;
  edit(v);
  return JSON.stringify(v);
}

const action = (n: number) =>
  JSON.stringify({
    kind: 'action',
    schemaVersion: 1,
    at: '2026-11-29T00:00:00.000Z',
    key: `mixed-${n}:lock_out_user:0`,
    decisionId: `mixed-${n}`,
    type: 'lock_out_user',
    target: 'DU0000000000000000',
    status: 'done',
    attempts: 1,
    elapsedMs: 42,
  });

/** Every input shape a decision line holds, and every other line a log can hold. */
function mixedLog(): string {
  const lines: string[] = [];
  for (let n = 0; n < fixture.length; n++) lines.push(decision(n), action(n));
  lines.push(
    // The Admin reads unavailable.
    decision(20, (v) => {
      delete v.inputs.user;
      v.inputs.devices = [];
      v.inputs.adminUnavailable = { user: 'RG_ERR_UPSTREAM_TIMEOUT', devices: 'circuit_open' };
    }),
    // Velocity and history recorded, high enough to fire their rules.
    decision(21, (v) => {
      v.inputs.velocity = { accountsPerIp: 120, ipsPerAccount: 12 };
      v.inputs.history = { failedAuthentications1h: 6, totpReuses24h: 1, newDevices1h: 1, newDevices24h: 1 };
    }),
    decision(22, (v) => {
      v.inputs.featuresUnavailable = { velocity: 'timeout', history: 'not_configured' };
    }),
    decision(23, (v) => {
      v.inputs.extra = { someRow: { status: 'ok', value: { n: 1 } } };
    }),
    // Signals unavailable, and one never recorded.
    decision(24, (v) => {
      v.inputs.signals.remoteAccessTool = { status: 'unavailable', reason: 'timeout' };
      v.inputs.signals.newBrowser = { status: 'unavailable', reason: 'deadline' };
      delete v.inputs.signals.latestProximity;
    }),
    // Unicode and escapes in strings, keys included, before and after the cuts.
    decision(25, (v) => {
      v.request.userAgent = 'Mözilla/5.0 "quoted" back\\slash\ttab\nnewline ☃ 😀 \u2028';
      v.request.context = { 'naïve "key"': '日本語', 'emoji😀': true, n: 3 };
      v.outcome.matchedRules = v.outcome.matchedRules.map((r: Fields) => ({
        ...r,
        description: `“${r.id}” ✓`,
      }));
    }),
    // Keys in another order: read whole.
    decision(26, (v) => {
      const { outcome, ...rest } = v;
      for (const k of Object.keys(v)) delete v[k];
      Object.assign(v, { outcome, ...rest });
    }),
    // An overload answer: never evaluated, passed over.
    JSON.stringify({
      kind: 'decision',
      schemaVersion: 1,
      decisionId: 'mixed-shed',
      at: '2026-11-29T00:00:00.000Z',
      policy: { name: 'login', revision: 'r' },
      outcome: { verdict: 'challenge', score: 0, decidedBy: 'overload', shed: 'queue' },
      actions: [],
      degraded: true,
    }),
    JSON.stringify({
      kind: 'outcome',
      schemaVersion: 1,
      at: '2026-11-29T00:00:00.000Z',
      decisionId: 'mixed-1',
      type: 'login',
      value: 'success',
    }),
    JSON.stringify({
      kind: 'feedback',
      schemaVersion: 1,
      at: '2026-11-29T00:00:00.000Z',
      decisionId: 'mixed-2',
      label: 'fraud',
    }),
    '',
    '{not json',
    '42',
    decision(27, (v) => {
      v.schemaVersion = 2;
    }),
    decision(28, (v) => {
      v.at = 'yesterday';
    }),
    decision(29, (v) => {
      delete v.inputs.devices;
    }),
    // Keys named as signals nested in a vendor's answer, and a signal's key escaped.
    decision(
      32,
      (v) => {
        v.inputs.signals.latestProximity.response.extra = {
          newBrowser: { status: 'ok', response: { success: true, result: { known: false } } },
          x: ['"newBrowser":{"status":"', '\\', { '}': ']' }],
        };
      },
      0,
    ),
    decision(33, () => {}, 0).replace('"newBrowser":{"status"', '"new\\u0042rowser":{"status"'),
    // A line cut short mid-file (a writer that died), then one ended by \r\n.
    decision(30).slice(0, 900),
    `${decision(31)}\r`,
  );
  for (let n = 40; n < 60; n++) lines.push(decision(n), action(n));
  // The last line cut short, without its \n.
  return `${lines.join('\n')}\n${decision(61).slice(0, 1500)}`;
}

/** The report without its timing. */
function comparable(r: ReplayReport): Omit<ReplayReport, 'elapsedMs'> {
  const { elapsedMs: _, ...rest } = r;
  return rest;
}

/**
 * The log read line by line from a stream, each line behind a space: JSON all the same, and read
 * whole by `JSON.parse` (riskgate's prefixes no longer match).
 */
async function readWhole(policy: Parameters<typeof replayDecisions>[0], file: string): Promise<ReplayReport> {
  const spaced = readFileSync(file, 'utf8')
    .split('\n')
    .map((l) => (l === '' || l === '\r' ? l : ` ${l}`))
    .join('\n');
  return replayDecisions(policy, [{ name: file, stream: Readable.from([Buffer.from(spaced)]) }], {
    changedLimit: Number.POSITIVE_INFINITY,
  });
}

describe('replaying a mixed log as bytes', () => {
  const log = join(dir, 'mixed.jsonl');
  writeFileSync(log, mixedLog());
  const candidateDir = join(dir, 'candidate');
  const narrowDir = join(dir, 'narrow');
  const shipped = readFileSync(join(ROOT, 'policies/login.yaml'), 'utf8');

  it('reports what reading every line whole reports, on threads and in process, for three candidates', async () => {
    rmSync(candidateDir, { recursive: true, force: true });
    rmSync(narrowDir, { recursive: true, force: true });
    // A candidate that changes verdicts: challenges below 79 points become allows.
    const text = shipped.replace(/challenge: 40\b/, 'challenge: 79');
    expect(text).not.toBe(shipped);
    mkdirSync(candidateDir);
    writeFileSync(join(candidateDir, 'login.yaml'), text);
    // One that reads two of the five signals the lines hold: the other three are never parsed.
    mkdirSync(narrowDir);
    writeFileSync(join(narrowDir, 'login.yaml'), NARROW);
    expect([...(await loadPolicy(narrowDir)).requirements.signals]).toEqual([
      'remoteAccessTool',
      'newBrowser',
    ]);
    for (const path of [join(ROOT, 'policies'), candidateDir, narrowDir]) {
      const policy = await loadPolicy(path);
      const whole = await readWhole(policy, log);
      const all = { changedLimit: Number.POSITIVE_INFINITY };
      const inProcess = await replayDecisions(policy, [log], all);
      const threaded = await replayDecisions(policy, [log], {
        ...all,
        policyPath: path,
        threads: 3,
        minBytesPerThread: 1,
      });
      // Pieces of about a line each, taken in turn by the threads: whichever takes which, the
      // report is put back in log order.
      const pieces = await replayDecisions(policy, [log], {
        ...all,
        policyPath: path,
        threads: 2,
        minBytesPerThread: 1,
        pieceBytes: 4096,
      });
      expect(comparable(inProcess)).toEqual(comparable(whole));
      expect(comparable(threaded)).toEqual(comparable(whole));
      expect(comparable(pieces)).toEqual(comparable(whole));
      // Every kind of line is in the log and counted as such.
      expect(whole.decisions).toBeGreaterThan(30);
      expect(whole.skipped).toBeGreaterThan(30);
      // Five listed of seven: the two lines cut short are not JSON either.
      expect(whole.bad.count).toBe(7);
      expect(whole.bad.first.map((b) => b.why)).toEqual([
        'not JSON',
        'not an object',
        'schemaVersion 2 is not one this riskgate reads',
        'at is not a time: yesterday',
        'not a decision line (decisionId, at, request, inputs, outcome)',
      ]);
      expect(Object.values(whole.rules).some((r) => r.after > 0)).toBe(true);
      if (path !== join(ROOT, 'policies')) expect(whole.changed).toBeGreaterThan(0);
    }
    // Twelve replays, nine of them on threads that each load the candidate: 8 s on a quiet
    // machine, over 20 at a load of 11 on two cores.
  }, 180_000);
});
