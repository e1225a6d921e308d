import { open, stat } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import type { Readable } from 'node:stream';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import { numberedLines } from '../logs/ndjson-lines.ts';
import type { CompiledPolicy, Verdict } from '../policy/policy-types.ts';
import { readLineBytes } from './replay-file-lines.ts';
import {
  formatLabelReport,
  type Label,
  type LabelReport,
  LabelTally,
  MAX_REPLAY_LINE_BYTES,
} from './replay-labels.ts';
import type { ReplayPiecesTask } from './replay-pieces.ts';
import type { ReplayStretchReply } from './replay-stretch.ts';
import {
  BAD_LINES_LISTED,
  emptyMatrix,
  type ReplayChange,
  type ReplayPartial,
  ReplayTally,
} from './replay-tally.ts';
import { replayOnThreads } from './replay-threads.ts';

export type { ReplayChange } from './replay-tally.ts';

/**
 * Replays logged decisions with a candidate policy: each decision's recorded inputs evaluated again
 * (no vendor call), compared with what was decided. Streams: a line is read, evaluated and
 * forgotten, so a log of any size runs in constant memory. A large log file is cut at line ends
 * into pieces that one worker thread per core takes in turn (replay-pieces.ts); the pieces' tallies
 * are merged in log order, so the report is the one a single pass would give.
 */

export interface ReplayReport {
  candidate: { name: string; revision: string };
  /** Lines read, decisions replayed, other lines (action outcomes, overload answers) skipped. */
  lines: number;
  decisions: number;
  skipped: number;
  /** Lines that could not be read as decisions, with the first few reasons. */
  bad: { count: number; first: { line: number; source: string; why: string }[] };
  /** from → to → count. */
  matrix: Record<Verdict, Record<Verdict, number>>;
  changed: number;
  /** The changed decisions: the first `changedLimit`, or all. */
  changes: ReplayChange[];
  score: { meanShift: number; up: number; down: number };
  /** Per rule: matches recorded (`before`, rules of the logged revision) and replayed (`after`). */
  rules: Record<string, { before: number; after: number }>;
  /** Decisions whose replay is uncertain, by the input they lacked. */
  missingInputs: Record<string, number>;
  /** Decisions made by each recorded policy revision. */
  revisions: Record<string, number>;
  /** With `--labels`: each rule's and verdict's precision and recall against analyst labels. */
  labels?: LabelReport;
  elapsedMs: number;
}

export interface ReplayOptions {
  /** Changed decisions listed in the report. Default 20; Infinity for all. */
  changedLimit?: number;
  /** Analyst labels by decision id (`readLabels`): the report scores the candidate against them. */
  labels?: ReadonlyMap<string, Label>;
  /** Longest line read, bytes. Default MAX_REPLAY_LINE_BYTES (16 MiB). */
  maxLineBytes?: number;
  /**
   * Where `policy` was loaded from: worker threads load it again from there. Without it the log
   * is replayed on this thread alone.
   */
  policyPath?: string;
  /** Worker threads for a log file. Default: the cores there are (`os.availableParallelism()`). */
  threads?: number;
  /**
   * Bytes a thread gets at the least: a smaller file runs on fewer threads (a thread's start, the
   * policy compiled again, costs about what 10,000 lines do). Default 32 MiB.
   */
  minBytesPerThread?: number;
  /**
   * Bytes of a piece the threads take in turn (replay-pieces.ts): a thread that gets less of a
   * shared core replays fewer of them. Default 64 MiB (a 4 GB log is 63 pieces; a piece costs a
   * file open and a tally, well under a millisecond).
   */
  pieceBytes?: number;
}

const VERDICTS: readonly Verdict[] = ['allow', 'challenge', 'deny'];

/** Pieces a log file is cut into at the most (each costs a read of 64 KiB to find its cut). */
const MAX_PIECES = 4096;

/** A replayed stretch of one source: its tally and where its lines start in the source. */
interface Stretch {
  source: string;
  partial: ReplayPartial;
  /** Lines (empty ones too) of the source before the stretch. */
  lineOffset: number;
}

/**
 * Replays every decision line of `sources` (paths, or readable streams such as stdin). Rejects
 * with `RiskgateError` `RG_ERR_INVALID_INPUT` at a line longer than `maxLineBytes`, and with Node's
 * error when a source cannot be read.
 */
export async function replayDecisions(
  policy: CompiledPolicy,
  sources: readonly (string | { name: string; stream: Readable })[],
  options: ReplayOptions = {},
): Promise<ReplayReport> {
  const startedAt = performance.now();
  const changedLimit = options.changedLimit ?? 20;
  const maxLineBytes = options.maxLineBytes ?? MAX_REPLAY_LINE_BYTES;
  const labelIds = options.labels === undefined ? undefined : new Set(options.labels.keys());
  const stretches: Stretch[] = [];
  for (const source of sources) {
    if (typeof source === 'string' && options.policyPath !== undefined) {
      const size = (await stat(source)).size;
      const minBytes = Math.max(1, options.minBytesPerThread ?? 32 * 1024 * 1024);
      const threads = Math.min(options.threads ?? availableParallelism(), Math.floor(size / minBytes));
      if (threads > 1) {
        const pieceBytes = Math.max(1, options.pieceBytes ?? 64 * 1024 * 1024);
        const pieces = Math.min(MAX_PIECES, Math.max(threads, Math.ceil(size / pieceBytes)));
        const task = {
          policyPath: options.policyPath,
          revision: policy.revision,
          file: source,
          changedLimit,
        };
        const ranges = await lineRanges(source, size, pieces);
        stretches.push(...(await replayRanges(task, ranges, threads, labelIds, maxLineBytes)));
        continue;
      }
    }
    const tally = new ReplayTally(policy, changedLimit, labelIds);
    if (typeof source === 'string') {
      // The bytes read as a thread reads its stretch (decoded only as far as a line is read).
      const read = await readLineBytes(
        source,
        { start: 0, end: Number.POSITIVE_INFINITY },
        maxLineBytes,
        (b, s, e, n) => tally.addBytes(b, s, e, n),
      );
      if ('tooLong' in read) throw lineTooLong(source, read.tooLong, maxLineBytes);
      stretches.push({ source, partial: tally.partial, lineOffset: 0 });
      continue;
    }
    for await (const { text, lineNo } of numberedLines(source.stream, source.name, maxLineBytes))
      tally.add(text, lineNo);
    stretches.push({ source: source.name, partial: tally.partial, lineOffset: 0 });
  }
  const report = mergeStretches(policy, stretches, changedLimit);
  if (options.labels !== undefined) {
    const tally = new LabelTally(options.labels, policy.ruleIds ?? []);
    for (const s of stretches) {
      for (const [id, verdict, matched] of s.partial.labelled)
        tally.add(
          id,
          verdict,
          matched.map((m) => ({ id: m })),
        );
    }
    report.labels = tally.finish();
  }
  report.elapsedMs = Math.round(performance.now() - startedAt);
  return report;
}

/**
 * `file` (`size` bytes) cut into at most `count` byte ranges, each starting at a line's first byte
 * (just after a `\n`).
 */
async function lineRanges(file: string, size: number, count: number): Promise<[number, number][]> {
  if (count <= 1) return [[0, size]];
  const cuts = [0];
  const handle = await open(file, 'r');
  try {
    const buf = Buffer.alloc(64 * 1024);
    for (let k = 1; k < count; k++) {
      let at = Math.floor((size * k) / count);
      // Inside the piece just cut (its line ran past this point): the next point cuts further on.
      if (at < cuts[cuts.length - 1]!) continue;
      let cut = size;
      while (at < size) {
        const { bytesRead } = await handle.read(buf, 0, buf.length, at);
        if (bytesRead === 0) break;
        const nl = buf.subarray(0, bytesRead).indexOf(10);
        if (nl !== -1) {
          cut = at + nl + 1;
          break;
        }
        at += bytesRead;
      }
      if (cut >= size) break;
      if (cut > cuts[cuts.length - 1]!) cuts.push(cut);
    }
  } finally {
    await handle.close();
  }
  return cuts.map((start, i) => [start, cuts[i + 1] ?? size]);
}

/**
 * The pieces of one file replayed by `threads` threads taking them in turn (replay-pieces.ts);
 * every thread is waited for, and the pieces' tallies are put back in log order.
 */
async function replayRanges(
  task: { policyPath: string; revision: string; file: string; changedLimit: number },
  ranges: [number, number][],
  threads: number,
  labelIds: ReadonlySet<string> | undefined,
  maxLineBytes: number,
): Promise<Stretch[]> {
  const piecesTask: ReplayPiecesTask = {
    policy: { path: task.policyPath, revision: task.revision },
    pieces: { file: task.file, ranges, next: new SharedArrayBuffer(4), maxLineBytes },
    changedLimit: task.changedLimit,
    labelIds: labelIds === undefined ? [] : [...labelIds],
  };
  const replies = await replayOnThreads(Array.from({ length: threads }, () => piecesTask));
  const byIndex: (ReplayStretchReply | undefined)[] = new Array(ranges.length);
  for (const reply of replies) {
    if (!reply.ok) throw Object.assign(new Error(reply.error.message), reply.error);
    for (const p of reply.pieces) byIndex[p.index] = p.reply;
  }
  const stretches: Stretch[] = [];
  let lineOffset = 0;
  // The first failure in log order is the one a single pass would have met: every piece before it
  // was taken before it, and finished (replay-pieces.ts).
  for (const reply of byIndex) {
    if (reply === undefined) throw new Error(`${task.file}: a piece of the log was not replayed`);
    if (reply.ok) {
      stretches.push({ source: task.file, partial: reply.partial, lineOffset });
      lineOffset += reply.linesEnded;
      continue;
    }
    if ('tooLong' in reply) throw lineTooLong(task.file, lineOffset + reply.tooLong, maxLineBytes);
    throw Object.assign(new Error(reply.error.message), reply.error);
  }
  return stretches;
}

/** The error of a line past the limit, as src/logs/ndjson-lines.ts words it for a stream. */
function lineTooLong(file: string, lineNo: number, maxLineBytes: number): RiskgateError {
  return new RiskgateError(
    ErrorCode.INVALID_INPUT,
    `${file}: line ${lineNo} is longer than ${maxLineBytes} bytes`,
  );
}

/** The stretches' tallies as one report, in log order. */
function mergeStretches(
  policy: CompiledPolicy,
  stretches: readonly Stretch[],
  changedLimit: number,
): ReplayReport {
  const report: ReplayReport = {
    candidate: { name: policy.name, revision: policy.revision },
    lines: 0,
    decisions: 0,
    skipped: 0,
    bad: { count: 0, first: [] },
    matrix: emptyMatrix(),
    changed: 0,
    changes: [],
    score: { meanShift: 0, up: 0, down: 0 },
    rules: {},
    missingInputs: {},
    revisions: {},
    elapsedMs: 0,
  };
  for (const id of policy.ruleIds ?? []) report.rules[id] = { before: 0, after: 0 };
  let shiftSum = 0;
  const add = (into: Record<string, number>, from: Record<string, number>) => {
    for (const [k, n] of Object.entries(from)) into[k] = (into[k] ?? 0) + n;
  };
  for (const { source, partial: p, lineOffset } of stretches) {
    report.lines += p.lines;
    report.decisions += p.decisions;
    report.skipped += p.skipped;
    report.bad.count += p.badCount;
    for (const b of p.badFirst) {
      if (report.bad.first.length < BAD_LINES_LISTED)
        report.bad.first.push({ line: lineOffset + b.line, source, why: b.why });
    }
    for (const from of VERDICTS) for (const to of VERDICTS) report.matrix[from][to] += p.matrix[from][to];
    report.changed += p.changed;
    for (const c of p.changes) if (report.changes.length < changedLimit) report.changes.push(c);
    shiftSum += p.shiftSum;
    report.score.up += p.up;
    report.score.down += p.down;
    for (const [id, r] of Object.entries(p.rules)) {
      const into = report.rules[id] ?? { before: 0, after: 0 };
      into.before += r.before;
      into.after += r.after;
      report.rules[id] = into;
    }
    add(report.missingInputs, p.missingInputs);
    add(report.revisions, p.revisions);
  }
  report.score.meanShift =
    report.decisions === 0 ? 0 : Math.round((shiftSum / report.decisions) * 1000) / 1000;
  return report;
}

/** The report as text lines for people. */
export function formatReplayReport(r: ReplayReport, stats: boolean): string[] {
  const out: string[] = [];
  out.push(
    `replayed ${r.decisions} decisions with ${r.candidate.name} @ ${r.candidate.revision} in ${(r.elapsedMs / 1000).toFixed(1)} s` +
      ` (${r.skipped} other lines skipped${r.bad.count > 0 ? `, ${r.bad.count} unreadable` : ''})`,
  );
  const revisions = Object.entries(r.revisions).map(([rev, n]) => `${rev || '?'} (${n})`);
  if (revisions.length > 0) out.push(`recorded by revision ${revisions.join(', ')}`);
  out.push(
    `${r.changed} verdicts changed; score shift mean ${r.score.meanShift} (${r.score.up} up, ${r.score.down} down)`,
  );
  out.push('');
  out.push(`from \\ to    ${VERDICTS.map((v) => v.padStart(10)).join('')}`);
  for (const from of VERDICTS) {
    out.push(`${from.padEnd(12)}${VERDICTS.map((to) => String(r.matrix[from][to]).padStart(10)).join('')}`);
  }
  if (r.changes.length > 0) {
    out.push('');
    out.push(`changed (first ${r.changes.length}):`);
    for (const c of r.changes) {
      out.push(
        `  ${c.decisionId}  ${c.from} → ${c.to}  score ${c.scoreFrom} → ${c.scoreTo}${c.missing ? `  (uncertain: ${c.missing.join(', ')} not recorded)` : ''}`,
      );
    }
  }
  const missing = Object.entries(r.missingInputs);
  if (missing.length > 0) {
    out.push('');
    out.push(
      `uncertain: the candidate reads inputs these decisions did not record: ${missing.map(([k, n]) => `${k} (${n})`).join(', ')}`,
    );
  }
  if (stats) {
    out.push('');
    const width = Math.max(4, ...Object.keys(r.rules).map((id) => id.length)) + 2;
    out.push(`${'rule'.padEnd(width)}  before     after   rate after`);
    for (const [id, h] of Object.entries(r.rules).sort((a, b) => b[1].after - a[1].after)) {
      const rate = r.decisions === 0 ? 0 : (h.after / r.decisions) * 100;
      out.push(
        `${id.padEnd(width)}${String(h.before).padStart(8)}${String(h.after).padStart(10)}${rate.toFixed(2).padStart(12)} %`,
      );
    }
  }
  if (r.labels !== undefined) out.push(...formatLabelReport(r.labels));
  for (const b of r.bad.first) out.push(`unreadable: ${b.source}:${b.line}: ${b.why}`);
  return out;
}
