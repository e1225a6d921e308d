import { parseArgs } from 'node:util';
import { type CliIo, EXIT, policyCheck, policySchema, policyTest } from './policy-commands.ts';

const USAGE = `usage: riskgate policy <command> [path] [options]

commands:
  check [path]    compile and type-check the policies (default path: policies)
                  exit 0 ok, 3 on errors; one line per issue: file:line:col message
  test [path]     run the *.test.yaml suites beside the policies
                  exit 0 ok, 4 on a failing case, 3 when a suite or policy does not load
  schema [dir]    write policy.schema.json and policy-test.schema.json (default dir: policies)

options:
  --json                 machine-readable output (check, test)
  --require-coverage     test: also fail (exit 4) on a coverage gap
  -h, --help             this text`;

/** Console output for the real CLI. */
export const processIo: CliIo = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
};

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
  const [group, command, path, extra] = positionals;
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
      help: { type: 'boolean', short: 'h' },
    },
  });
}
