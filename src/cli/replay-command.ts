import { access } from 'node:fs/promises';
import { RiskgateError } from '../errors/riskgate-error.ts';
import { loadPolicy, PolicyLoadError } from '../policy/policy-loader.ts';
import type { CompiledPolicy } from '../policy/policy-types.ts';
import { readLabels } from '../replay/replay-labels.ts';
import { formatReplayReport, type ReplayReport, replayDecisions } from '../replay/replay-run.ts';
import { type CliIo, EXIT } from './policy-commands.ts';

/**
 * `riskgate replay --policy <dir|file> <decision-log.ndjson>... (or - for stdin)`: every logged
 * decision evaluated again with the candidate from its recorded inputs, no vendor call. Exit 0 when
 * at most `--max-changed` verdicts changed (default 0), 4 beyond, 3 when the policy or a log cannot
 * be read (an unreadable line included, or one longer than MAX_REPLAY_LINE_BYTES, 16 MiB), 2 on a
 * usage error: as `policy test`, for CI.
 */
export interface ReplayCommandOptions {
  policy: string | undefined;
  maxChanged: string | undefined;
  json: boolean;
  stats: boolean;
  /** `--labels <file>`: analyst labels (feedback lines) to score the candidate's rules against. */
  labels?: string[] | undefined;
  /** Changed decisions listed: 20 unless `--json` (all). */
  stdin: NodeJS.ReadableStream & import('node:stream').Readable;
}

export async function replayCommand(
  files: readonly string[],
  o: ReplayCommandOptions,
  io: CliIo,
): Promise<number> {
  if (o.policy === undefined) {
    io.err('riskgate: replay needs --policy <dir|file>, the candidate to replay with');
    return EXIT.USAGE;
  }
  if (files.length === 0) {
    io.err('riskgate: replay needs decision log files (or - for standard input)');
    return EXIT.USAGE;
  }
  const maxChanged = o.maxChanged === undefined ? 0 : Number(o.maxChanged);
  if (!Number.isInteger(maxChanged) || maxChanged < 0) {
    io.err('riskgate: --max-changed must be a whole number of at least 0');
    return EXIT.USAGE;
  }
  let policy: CompiledPolicy;
  try {
    policy = await loadPolicy(o.policy);
  } catch (e) {
    io.err(e instanceof PolicyLoadError ? e.message : `riskgate: ${String(e)}`);
    return EXIT.INVALID_POLICY;
  }
  for (const f of files) {
    if (f === '-') continue;
    try {
      await access(f);
    } catch {
      io.err(`riskgate: cannot read ${f}`);
      return EXIT.INVALID_POLICY;
    }
  }
  for (const f of o.labels ?? []) {
    try {
      await access(f);
    } catch {
      io.err(`riskgate: cannot read labels ${f}`);
      return EXIT.INVALID_POLICY;
    }
  }
  let report: ReplayReport;
  try {
    const labels = o.labels === undefined || o.labels.length === 0 ? undefined : await readLabels(o.labels);
    report = await replayDecisions(
      policy,
      files.map((f) => (f === '-' ? { name: 'stdin', stream: o.stdin } : f)),
      {
        changedLimit: o.json ? Number.POSITIVE_INFINITY : 20,
        policyPath: o.policy,
        ...(labels !== undefined && { labels }),
      },
    );
  } catch (e) {
    // A line past MAX_REPLAY_LINE_BYTES, or a log that fails while read (a directory, EIO).
    if (e instanceof RiskgateError) io.err(`riskgate: ${e.message}`);
    else if (isSystemError(e)) io.err(`riskgate: cannot read ${e.path ?? 'a log'}: ${e.code}`);
    else throw e;
    return EXIT.INVALID_POLICY;
  }
  if (o.json) io.out(JSON.stringify(report));
  else for (const line of formatReplayReport(report, o.stats)) io.out(line);
  if (report.bad.count > 0) return EXIT.INVALID_POLICY;
  return report.changed > maxChanged ? EXIT.TEST_FAILED : EXIT.OK;
}

function isSystemError(e: unknown): e is NodeJS.ErrnoException {
  return e instanceof Error && typeof (e as NodeJS.ErrnoException).code === 'string' && 'syscall' in e;
}
