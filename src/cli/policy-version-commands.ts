import { readFile } from 'node:fs/promises';
import { POLICY_VERSION_STEP_ACTIONS } from '../policy-versions/policy-version-operations.ts';
import type { PolicyVersionStep } from '../policy-versions/policy-version-store.ts';
import {
  callOperator,
  type OperatorTarget,
  type OperatorTargetOptions,
  operatorTarget,
} from './operator-client.ts';
import { type CliIo, EXIT } from './policy-commands.ts';

/**
 * `riskgate policy push|propose|approve|reject|withdraw|activate|revert|versions` and
 * `stage|unstage|schedule|unschedule`: the policy
 * versions of a running riskgate, through its operator API (`/policy-versions`, where and as whom
 * as src/cli/operator-client.ts says), so a change from CI is compiled, audited and held to four
 * eyes exactly as from the console. Exit 0 ok, 1 when riskgate refused (its problem printed) or
 * did not answer, 2 on a usage error, 3 when a pushed policy does not compile.
 */

export const POLICY_VERSION_EXIT = { OK: EXIT.OK, FAILED: 1, USAGE: EXIT.USAGE, INVALID_POLICY: 3 } as const;

export interface PolicyVersionCommandOptions extends OperatorTargetOptions {
  /** `push`: why (shown beside the version); `revert`: why the earlier version comes back. */
  message?: string | undefined;
  /** `versions`: at most this many, newest first (default 50, riskgate takes up to 200). */
  limit?: string | undefined;
  /** `stage`: the share of accounts served the version (above 0, below 100, 0.01 steps). */
  percent?: string | undefined;
  /** `stage`: in shadow instead (evaluated beside the active version, never served). */
  shadow?: boolean | undefined;
  /** `schedule`: when to activate it, RFC 3339 (in the future). */
  at?: string | undefined;
  json: boolean;
}

const STEPS = Object.keys(POLICY_VERSION_STEP_ACTIONS) as PolicyVersionStep[];

/** The commands and what each takes after its name. */
export const POLICY_VERSION_COMMANDS: Record<string, string> = {
  push: '<file> -m <message>',
  ...Object.fromEntries(STEPS.map((s) => [s, '<id>'])),
  revert: '<id> [-m <message>]',
  versions: '',
  stage: '<id> --percent <n> | --shadow',
  unstage: '',
  schedule: '<id> --at <RFC 3339 time>',
  unschedule: '',
};

/** The rollout commands: their call, and the line that says what riskgate did. */
const ROLLOUT: Record<
  string,
  { path: (id: string) => string; said: (body: Record<string, unknown>) => string }
> = {
  stage: {
    path: (id) => `/policy-versions/${id}/stage`,
    said: (b) =>
      `staged ${String(b.versionId)}: ${b.stage === 'shadow' ? 'in shadow' : `${String(b.percent)} % of accounts`}`,
  },
  unstage: { path: () => '/policy-versions/unstage', said: () => 'rollout ended' },
  schedule: {
    path: (id) => `/policy-versions/${id}/schedule`,
    said: (b) => `scheduled ${String(b.versionId)} at ${String(b.at)} by ${String(b.by)}`,
  },
  unschedule: { path: () => '/policy-versions/unschedule', said: () => 'scheduled activation cancelled' },
};

interface VersionView {
  id: string;
  name: string;
  revision: string;
  author: string;
  createdAt: string;
  message: string;
  state: string;
  restoresId: string | null;
}

const line = (v: VersionView) =>
  `${v.id}  ${v.state.padEnd(9)} ${v.author.padEnd(12)} ${v.createdAt}  ${v.message}${v.restoresId ? ` (restores ${v.restoresId})` : ''}`;

/** `riskgate policy <command> [args]` for the commands in {@link POLICY_VERSION_COMMANDS}. */
export async function policyVersionCommand(
  command: string,
  args: readonly string[],
  o: PolicyVersionCommandOptions,
  io: CliIo,
): Promise<number> {
  const takes = POLICY_VERSION_COMMANDS[command];
  if (takes === undefined) return usage(io, `unknown command "policy ${command}"`);
  const wanted = takes === '' ? 0 : 1;
  if (args.length !== wanted) return usage(io, `policy ${command} takes ${takes || 'no argument'}`);
  if (command === 'push' && (o.message === undefined || o.message.trim() === ''))
    return usage(io, 'policy push needs -m <message> (why: it is shown beside the version)');
  const rolloutBody = rolloutBodyOf(command, o);
  if (typeof rolloutBody === 'string') return usage(io, rolloutBody);
  const limit = o.limit === undefined ? 50 : Number(o.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 200)
    return usage(io, '--limit must be a whole number from 1 to 200');
  const t = await operatorTarget(o, io);
  if (t === undefined) return POLICY_VERSION_EXIT.FAILED;
  const [arg] = args;
  if (command === 'versions') {
    const answer = await callOperator(t, io, 'GET', `/policy-versions?limit=${limit}`);
    if (!answer.ok) return POLICY_VERSION_EXIT.FAILED;
    const versions = answer.body.versions as VersionView[];
    if (o.json) io.out(JSON.stringify(answer.body));
    else if (versions.length === 0) io.err('no policy version yet');
    else for (const v of versions) io.out(line(v));
    return POLICY_VERSION_EXIT.OK;
  }
  if (command === 'push') return push(t, arg!, o, io);
  const rollout = ROLLOUT[command];
  if (rollout !== undefined) {
    const answer = await callOperator(
      t,
      io,
      'POST',
      rollout.path(encodeURIComponent(arg ?? '')),
      rolloutBody && { json: rolloutBody },
    );
    if (!answer.ok) return POLICY_VERSION_EXIT.FAILED;
    io.out(o.json ? JSON.stringify(answer.body) : rollout.said(answer.body));
    return POLICY_VERSION_EXIT.OK;
  }
  const id = encodeURIComponent(arg!);
  const answer =
    command === 'revert'
      ? await callOperator(t, io, 'POST', `/policy-versions/${id}/revert`, {
          json: { message: o.message?.trim() || `revert to ${arg} (riskgate policy revert)` },
        })
      : await callOperator(t, io, 'POST', `/policy-versions/${id}/${command}`);
  if (!answer.ok) return POLICY_VERSION_EXIT.FAILED;
  io.out(o.json ? JSON.stringify(answer.body) : line(answer.body as unknown as VersionView));
  return POLICY_VERSION_EXIT.OK;
}

/** `policy push <file> -m <message>`: a draft of the file's policy; 3 when it does not compile. */
async function push(
  t: OperatorTarget,
  file: string,
  o: PolicyVersionCommandOptions,
  io: CliIo,
): Promise<number> {
  let yaml: string;
  try {
    yaml = await readFile(file, 'utf8');
  } catch (error) {
    io.err(`riskgate: cannot read ${file}: ${(error as Error).message}`);
    return POLICY_VERSION_EXIT.FAILED;
  }
  const answer = await callOperator(t, io, 'POST', '/policy-versions', {
    json: { yaml, message: o.message!.trim() },
  });
  if (!answer.ok)
    return answer.status === 400 && answer.problem?.field === 'yaml'
      ? POLICY_VERSION_EXIT.INVALID_POLICY
      : POLICY_VERSION_EXIT.FAILED;
  const v = answer.body as unknown as VersionView;
  io.out(o.json ? JSON.stringify(answer.body) : `draft ${v.id} (${v.name} @ ${v.revision}): ${v.message}`);
  return POLICY_VERSION_EXIT.OK;
}

/**
 * The body of a `stage` or `schedule` call from the options (riskgate checks the values: a bad one
 * is its 400, naming the field), undefined for another command, or a usage error.
 */
function rolloutBodyOf(
  command: string,
  o: PolicyVersionCommandOptions,
): Record<string, unknown> | string | undefined {
  if (command === 'stage') {
    if ((o.percent === undefined) === (o.shadow !== true))
      return 'policy stage takes --percent <n> (the share of accounts) or --shadow';
    if (o.shadow === true) return { shadow: true };
    const percent = Number(o.percent);
    return o.percent?.trim() === '' || !Number.isFinite(percent)
      ? '--percent must be a number, above 0 and below 100'
      : { percent };
  }
  if (o.percent !== undefined || o.shadow === true) return '--percent and --shadow are for policy stage';
  if (command === 'schedule')
    return o.at === undefined || o.at.trim() === ''
      ? 'policy schedule takes --at <time> (RFC 3339, as 2026-12-01T09:00:00Z)'
      : { at: o.at.trim() };
  if (o.at !== undefined) return '--at is for policy schedule';
  return undefined;
}

function usage(io: CliIo, message: string): number {
  io.err(`riskgate: ${message}`);
  return POLICY_VERSION_EXIT.USAGE;
}
