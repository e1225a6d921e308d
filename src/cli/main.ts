import { parseArgs } from 'node:util';
import { riskgateVersion } from '../build-info/riskgate-version.ts';
import { actionsCommand } from './actions-commands.ts';
import { listsCommand } from './lists-commands.ts';
import { type CliIo, EXIT, policyCheck, policySchema, policyTest } from './policy-commands.ts';
import { POLICY_VERSION_COMMANDS, policyVersionCommand } from './policy-version-commands.ts';
import { replayCommand } from './replay-command.ts';

const USAGE = `usage: riskgate policy <command> [path] [options]
       riskgate actions <command> [id] [options]
       riskgate lists <command> [name] [value|file] [options]
       riskgate replay --policy <dir|file> <decision-log>... [options]
       riskgate --version

commands:
  check [path]    compile and type-check the policies (default path: policies)
                  exit 0 ok, 3 on errors (a missing path too); one line per issue: file:line:col message
  test [path]     run the *.test.yaml suites beside the policies
                  exit 0 ok, 4 on a failing case, 3 when a suite or policy does not load (or is missing)
  schema [dir]    write policy.schema.json and policy-test.schema.json (default dir: policies)

policy versions (a running riskgate's, through its operator API, where and as whom as for lists:
  --url, --key-file, else the first RISKGATE_OPS_KEYS entry; docs/policy-versions.md)
  push <file> -m <message>  a draft of the file's policy (it must compile)
  propose|approve|reject|withdraw|activate <id>
                            one step of the flow (approve: an admin other than the author)
  revert <id> [-m <message>]  a new active version carrying earlier version <id>'s policy
  versions                  the versions, newest first (--limit, --json)
  stage <id> --percent <n>  an approved version served to n % of accounts (--shadow: in shadow)
  unstage                   the rollout ended (the version stays approved)
  schedule <id> --at <time> an approved version activated at an RFC 3339 time
  unschedule                the scheduled activation cancelled
                  exit 0 ok, 1 when riskgate refused (its problem printed) or did not answer,
                  3 when a pushed policy does not compile

replay: logged decisions evaluated again with a candidate policy, from their recorded inputs
  (no vendor call; '-' reads standard input): verdict changes as a from→to matrix, score shift,
  rule hits before/after, the changed decisions, inputs the candidate needs that were not recorded
                  exit 0 when at most --max-changed verdicts changed (default 0), 4 beyond,
                  3 when the policy or a log cannot be read (a line over 16 MiB included)

actions (the outbox in RISKGATE_DATABASE / RISKGATE_STATE_DIR, as the service reads them):
  list            the newest actions and the pending and dead counts (--status, --limit)
  retry <id>      a dead (or dropped) action pending again, due now, with a new horizon
  drop <id>       a pending or dead action given up (never delivered)
                  exit 0 ok, 1 when the store cannot be read or the action is not found

 lists (a running riskgate's runtime lists, through its operator endpoints: --url, else
  127.0.0.1 on RISKGATE_OPS_PORT or RISKGATE_PORT; as the operator of --key-file, else of the first
  RISKGATE_OPS_KEYS entry)
  show [name]             the declared lists and their counts, or one list's entries
  add <name> <value>      an entry (an address or CIDR for an ip list), with --reason [--ttl]
  remove <name> <value>   an entry removed, with --reason
  import <name> <file>    one entry a line (a value, or a JSON object), with --reason [--ttl]
                  exit 0 ok, 1 when riskgate refused (its problem printed) or did not answer

options:
  --json                 machine-readable output (check, test)
  --require-coverage     test: also fail (exit 4) on a coverage gap
  --status <status>      actions list: pending, delivered, dead or dropped
  --limit <n>            actions list: at most n actions (default 100); policy versions: (default 50)
  --reason <text>        lists add, remove, import: why (the audit trail keeps it)
  --ttl <duration>       lists add, import: seconds, or 90s, 30m, 24h, 7d (default: the list's)
  --url <url>            lists, policy versions: riskgate's operator endpoints
  --key-file <file>      lists, policy versions: the operator key to act with
  -m, --message <text>   policy push, revert: why (shown beside the version, audited)
  --percent <n>          policy stage: the share of accounts (above 0, below 100, 0.01 steps)
  --shadow               policy stage: in shadow (evaluated beside the active version, never served)
  --at <time>            policy schedule: when to activate (RFC 3339, in the future)
  --policy <path>        replay: the candidate policy (file, or directory with one policy)
  --max-changed <n>      replay: verdict changes allowed before exit 4 (default 0)
  --stats                replay: rule hit counts and rates over the log
  --labels <file>        replay: analyst labels (POST /feedback lines, or any JSON lines with
                         decisionId and label): each rule's precision and recall (repeatable)
  -v, --version          print riskgate's version and exit
  -h, --help             this text

exit 2 on a usage error`;

let stdoutClosed = false;

/** Console output for the real CLI; stops writing once the reader of stdout has gone. */
export const processIo: CliIo = {
  out: (line) => {
    if (!stdoutClosed) process.stdout.write(`${line}\n`);
  },
  err: (line) => process.stderr.write(`${line}\n`),
};

/**
 * Makes a closed stdout quiet: `riskgate policy test --json | head` closes the pipe early, and the
 * write fails with EPIPE, which unhandled is a crash with a stack trace. The reader has what it
 * wanted, so further output is dropped and the command ends with its own exit code. Call once,
 * from the launcher.
 */
export function handleClosedStdout(stream: NodeJS.WriteStream = process.stdout): void {
  stream.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') {
      stdoutClosed = true;
      return;
    }
    process.stderr.write(`riskgate: cannot write output: ${e.message}\n`);
    process.exitCode = 1;
    stdoutClosed = true;
  });
}

/** Runs the CLI with `argv` (without node and script); resolves to the exit code. */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (e) {
    io.err(`riskgate: ${e instanceof Error ? e.message : String(e)}\n${USAGE}`);
    return EXIT.USAGE;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    io.out(USAGE);
    return EXIT.OK;
  }
  if (values.version) {
    io.out(`riskgate ${riskgateVersion()}`);
    return EXIT.OK;
  }
  const [group, command, path, extra] = positionals;
  if (group === 'replay') {
    return replayCommand(
      positionals.slice(1),
      {
        policy: values.policy,
        maxChanged: values['max-changed'],
        json: values.json ?? false,
        stats: values.stats ?? false,
        labels: values.labels,
        stdin: process.stdin,
      },
      io,
    );
  }
  if (group === 'actions' && command !== undefined && extra === undefined) {
    return actionsCommand(
      command,
      path,
      { env: process.env, status: values.status, limit: values.limit, json: values.json ?? false },
      io,
    );
  }
  if (group === 'lists' && command !== undefined) {
    return listsCommand(
      command,
      positionals.slice(2),
      {
        env: process.env,
        url: values.url,
        keyFile: values['key-file'],
        reason: values.reason,
        ttl: values.ttl,
        json: values.json ?? false,
      },
      io,
    );
  }
  if (group === 'policy' && command !== undefined && Object.hasOwn(POLICY_VERSION_COMMANDS, command)) {
    return policyVersionCommand(
      command,
      positionals.slice(2),
      {
        env: process.env,
        url: values.url,
        keyFile: values['key-file'],
        message: values.message,
        limit: values.limit,
        percent: values.percent,
        shadow: values.shadow,
        at: values.at,
        json: values.json ?? false,
      },
      io,
    );
  }
  if (group !== 'policy' || command === undefined || extra !== undefined) {
    io.err(USAGE);
    return EXIT.USAGE;
  }
  const json = values.json ?? false;
  switch (command) {
    case 'check':
      return policyCheck(path ?? 'policies', { json }, io);
    case 'test':
      return policyTest(
        path ?? 'policies',
        { json, requireCoverage: values['require-coverage'] ?? false },
        io,
      );
    case 'schema':
      return policySchema(path ?? 'policies', io);
    default:
      io.err(`riskgate: unknown command "policy ${command}"\n${USAGE}`);
      return EXIT.USAGE;
  }
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      json: { type: 'boolean' },
      'require-coverage': { type: 'boolean' },
      status: { type: 'string' },
      policy: { type: 'string' },
      'max-changed': { type: 'string' },
      stats: { type: 'boolean' },
      labels: { type: 'string', multiple: true },
      limit: { type: 'string' },
      reason: { type: 'string' },
      ttl: { type: 'string' },
      url: { type: 'string' },
      'key-file': { type: 'string' },
      message: { type: 'string', short: 'm' },
      percent: { type: 'string' },
      shadow: { type: 'boolean' },
      at: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
      version: { type: 'boolean', short: 'v' },
    },
  });
}
