import { readFile } from 'node:fs/promises';
import { parseTtl } from '../policy/policy-schema.ts';
import {
  callOperator,
  type OperatorTarget,
  type OperatorTargetOptions,
  operatorTarget,
} from './operator-client.ts';
import type { CliIo } from './policy-commands.ts';

/**
 * `riskgate lists show|add|remove|import`: the runtime lists of a running riskgate, through its
 * operator endpoints (src/cli/operator-client.ts: where, as whom), so every change is checked,
 * audited and shared exactly as from the API. Exit 0 ok, 1 when riskgate refused or did not
 * answer, 2 on a usage error.
 */

export const LISTS_EXIT = { OK: 0, FAILED: 1, USAGE: 2 } as const;

/** Entries per import request (riskgate takes up to 5000). */
const IMPORT_CHUNK = 1000;

export interface ListsCommandOptions extends OperatorTargetOptions {
  reason?: string | undefined;
  /** Seconds, or a duration: `90s`, `30m`, `24h`, `7d`. */
  ttl?: string | undefined;
  json: boolean;
}

function ttlSecondsOf(ttl: string | undefined): number | undefined | 'bad' {
  if (ttl === undefined) return undefined;
  if (/^\d+$/.test(ttl)) return Number(ttl);
  const ms = parseTtl(ttl);
  return ms === undefined ? 'bad' : Math.round(ms / 1000);
}

/** `riskgate lists <command> [name] [value|file]`. */
export async function listsCommand(
  command: string,
  args: readonly string[],
  o: ListsCommandOptions,
  io: CliIo,
): Promise<number> {
  const ttlSeconds = ttlSecondsOf(o.ttl);
  if (ttlSeconds === 'bad') return usage(io, '--ttl must be seconds or a duration like 90s, 30m, 24h or 7d');
  const [name, arg] = args;
  const expected: Record<string, number> = { show: 1, add: 2, remove: 2, import: 2 };
  if (expected[command] === undefined) return usage(io, `unknown command "lists ${command}"`);
  if (args.length > expected[command]! || (command !== 'show' && args.length < expected[command]!)) {
    return usage(
      io,
      `lists ${command} takes ${command === 'show' ? '[name]' : command === 'import' ? '<name> <file>' : '<name> <value>'}`,
    );
  }
  if ((command === 'add' || command === 'remove') && o.reason === undefined) {
    return usage(io, `lists ${command} needs --reason (it goes to the audit trail)`);
  }
  const t = await operatorTarget(o, io);
  if (t === undefined) return LISTS_EXIT.FAILED;
  const list = name === undefined ? '' : encodeURIComponent(name);
  switch (command) {
    case 'show':
      return name === undefined ? showLists(t, o, io) : showList(t, list, o, io);
    case 'add': {
      const answer = await callOperator(t, io, 'POST', `/lists/${list}/entries`, {
        json: { value: arg, reason: o.reason, ...(ttlSeconds !== undefined && { ttlSeconds }) },
      });
      if (answer.ok)
        io.out(
          o.json
            ? JSON.stringify(answer.body)
            : `added ${String(answer.body.value)} to ${name}, expires ${String(answer.body.expiresAt ?? 'never')}`,
        );
      return answer.ok ? LISTS_EXIT.OK : LISTS_EXIT.FAILED;
    }
    case 'remove': {
      const path = `/lists/${list}/entries/${encodeURIComponent(arg!)}`;
      const answer = await callOperator(t, io, 'DELETE', path, { json: { reason: o.reason } });
      if (answer.ok)
        io.out(o.json ? JSON.stringify(answer.body) : `removed ${String(answer.body.value)} from ${name}`);
      return answer.ok ? LISTS_EXIT.OK : LISTS_EXIT.FAILED;
    }
    default:
      return importFile(t, list, arg!, { ...o, ttlSeconds }, io);
  }
}

async function showLists(t: OperatorTarget, o: ListsCommandOptions, io: CliIo): Promise<number> {
  const answer = await callOperator(t, io, 'GET', '/lists');
  if (!answer.ok) return LISTS_EXIT.FAILED;
  if (o.json) io.out(JSON.stringify(answer.body));
  else {
    for (const l of answer.body.lists as {
      name: string;
      key: string;
      entries: number;
      description?: string;
    }[]) {
      io.out(
        `${l.name.padEnd(24)} ${l.key.padEnd(9)} ${String(l.entries).padStart(7)} entries${l.description ? `  ${l.description}` : ''}`,
      );
    }
  }
  return LISTS_EXIT.OK;
}

async function showList(t: OperatorTarget, list: string, o: ListsCommandOptions, io: CliIo): Promise<number> {
  const items: Record<string, unknown>[] = [];
  let cursor: string | undefined;
  do {
    const query = `?limit=1000${cursor === undefined ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
    const answer = await callOperator(t, io, 'GET', `/lists/${list}${query}`);
    if (!answer.ok) return LISTS_EXIT.FAILED;
    items.push(...(answer.body.items as Record<string, unknown>[]));
    cursor = answer.body.nextCursor as string | undefined;
  } while (cursor !== undefined);
  if (o.json) for (const e of items) io.out(JSON.stringify(e));
  else {
    for (const e of items) {
      io.out(
        `${String(e.value).padEnd(40)} expires ${String(e.expiresAt ?? 'never').padEnd(24)} ${String(e.author)}: ${String(e.reason)}`,
      );
    }
  }
  return LISTS_EXIT.OK;
}

/**
 * An import file: one entry a line, a plain value or a JSON object (`{"value": ..., "reason": ...,
 * "ttlSeconds": ...}`); blank lines and `#` comments skipped. Sent in chunks.
 */
async function importFile(
  t: OperatorTarget,
  list: string,
  file: string,
  o: ListsCommandOptions & { ttlSeconds: number | undefined },
  io: CliIo,
): Promise<number> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    io.err(`riskgate: cannot read ${file}: ${(error as Error).message}`);
    return LISTS_EXIT.FAILED;
  }
  const lines = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => (l.startsWith('{') ? l : JSON.stringify({ value: l })));
  if (lines.length === 0) return usage(io, `${file} has no entries`);
  const query = new URLSearchParams();
  if (o.reason !== undefined) query.set('reason', o.reason);
  if (o.ttlSeconds !== undefined) query.set('ttlSeconds', String(o.ttlSeconds));
  let added = 0;
  for (let i = 0; i < lines.length; i += IMPORT_CHUNK) {
    const chunk = lines.slice(i, i + IMPORT_CHUNK).join('\n');
    const answer = await callOperator(t, io, 'POST', `/lists/${list}/import?${query}`, { ndjson: chunk });
    if (!answer.ok) {
      io.err(`riskgate: stopped at line ${i + 1} of the entries; ${added} added before`);
      return LISTS_EXIT.FAILED;
    }
    added += Number(answer.body.added);
  }
  io.out(o.json ? JSON.stringify({ added }) : `imported ${added} entries`);
  return LISTS_EXIT.OK;
}

function usage(io: CliIo, message: string): number {
  io.err(`riskgate: ${message}`);
  return LISTS_EXIT.USAGE;
}
