import { readFile } from 'node:fs/promises';
import { resolveSecretFiles } from '../config/riskgate-config.ts';
import { parseOperatorKeyEntry } from '../operators/operator-keys.ts';
import { parseTtl } from '../policy/policy-schema.ts';
import type { CliIo } from './policy-commands.ts';

/**
 * `riskgate lists show|add|remove|import`: the runtime lists of a running riskgate, through its
 * operator endpoints (so every change is checked, audited and shared exactly as from the API).
 * Where: `--url`, else 127.0.0.1 on RISKGATE_OPS_PORT (or RISKGATE_PORT, default 8080), as the
 * service reads them. Who: the key in `--key-file`, else the first RISKGATE_OPS_KEYS entry: its
 * operator is the one the audit trail names. Exit 0 ok, 1 when riskgate refused or did not answer,
 * 2 on a usage error.
 */

export const LISTS_EXIT = { OK: 0, FAILED: 1, USAGE: 2 } as const;

/** Each request's own timeout, milliseconds. */
const REQUEST_TIMEOUT_MS = 10_000;
/** Entries per import request (riskgate takes up to 5000). */
const IMPORT_CHUNK = 1000;

export interface ListsCommandOptions {
  env: Readonly<Record<string, string | undefined>>;
  url?: string | undefined;
  keyFile?: string | undefined;
  reason?: string | undefined;
  /** Seconds, or a duration: `90s`, `30m`, `24h`, `7d`. */
  ttl?: string | undefined;
  json: boolean;
}

interface Target {
  url: string;
  key: string;
}

type Answer = { ok: true; body: Record<string, unknown> } | { ok: false };

async function targetOf(o: ListsCommandOptions, io: CliIo): Promise<Target | undefined> {
  const port = o.env.RISKGATE_OPS_PORT?.trim() || o.env.RISKGATE_PORT?.trim() || '8080';
  const url = (o.url ?? `http://127.0.0.1:${port}`).replace(/\/+$/, '');
  if (o.keyFile !== undefined) {
    try {
      return { url, key: (await readFile(o.keyFile, 'utf8')).trim() };
    } catch (error) {
      io.err(`riskgate: cannot read --key-file: ${(error as Error).message}`);
      return undefined;
    }
  }
  let env: Record<string, string | undefined>;
  try {
    env = resolveSecretFiles(o.env);
  } catch (error) {
    io.err(`riskgate: ${(error as Error).message}`);
    return undefined;
  }
  const first = env.RISKGATE_OPS_KEYS?.split(',')[0]?.trim();
  const entry = first ? parseOperatorKeyEntry(first) : undefined;
  if (entry === undefined || typeof entry === 'string') {
    io.err(
      'riskgate: no operator key: pass --key-file <file> or set RISKGATE_OPS_KEYS as the service has it',
    );
    return undefined;
  }
  return { url, key: entry.key };
}

/** One call to riskgate; a refusal or a failure is printed (its problem detail), never the key. */
async function call(
  t: Target,
  io: CliIo,
  method: string,
  path: string,
  body?: { json: unknown } | { ndjson: string },
): Promise<Answer> {
  let res: Response;
  try {
    res = await fetch(`${t.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${t.key}`,
        ...(body !== undefined && {
          'content-type': 'json' in body ? 'application/json' : 'application/x-ndjson',
        }),
      },
      ...(body !== undefined && { body: 'json' in body ? JSON.stringify(body.json) : body.ndjson }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
  } catch (error) {
    io.err(`riskgate: ${t.url} did not answer: ${(error as Error).message}`);
    return { ok: false };
  }
  const text = await res.text();
  let parsed: Record<string, unknown> = {};
  try {
    parsed = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  } catch {
    // not JSON: the status says enough
  }
  if (!res.ok) {
    const field = typeof parsed.field === 'string' ? ` (${parsed.field})` : '';
    io.err(
      `riskgate: ${res.status} ${String(parsed.code ?? '')}: ${String(parsed.detail ?? text.slice(0, 200))}${field}`,
    );
    return { ok: false };
  }
  return { ok: true, body: parsed };
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
  const t = await targetOf(o, io);
  if (t === undefined) return LISTS_EXIT.FAILED;
  const list = name === undefined ? '' : encodeURIComponent(name);
  switch (command) {
    case 'show':
      return name === undefined ? showLists(t, o, io) : showList(t, list, o, io);
    case 'add': {
      const answer = await call(t, io, 'POST', `/lists/${list}/entries`, {
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
      const answer = await call(t, io, 'DELETE', path, { json: { reason: o.reason } });
      if (answer.ok)
        io.out(o.json ? JSON.stringify(answer.body) : `removed ${String(answer.body.value)} from ${name}`);
      return answer.ok ? LISTS_EXIT.OK : LISTS_EXIT.FAILED;
    }
    default:
      return importFile(t, list, arg!, { ...o, ttlSeconds }, io);
  }
}

async function showLists(t: Target, o: ListsCommandOptions, io: CliIo): Promise<number> {
  const answer = await call(t, io, 'GET', '/lists');
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

async function showList(t: Target, list: string, o: ListsCommandOptions, io: CliIo): Promise<number> {
  const items: Record<string, unknown>[] = [];
  let cursor: string | undefined;
  do {
    const query = `?limit=1000${cursor === undefined ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
    const answer = await call(t, io, 'GET', `/lists/${list}${query}`);
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
  t: Target,
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
    const answer = await call(t, io, 'POST', `/lists/${list}/import?${query}`, { ndjson: chunk });
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
