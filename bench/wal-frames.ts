/**
 * The WAL frames a running riskgate writes to one of its SQLite files, by B-tree and by kind of
 * transaction (issue 32: the control file's pages per deny; bench/RESULTS.md, "the SQLite files'
 * pages per decision" and "the control file's indexes earn their place"). Two steps:
 *
 *   npx tsx bench/syscalls-per-decision.ts ... --with "npx tsx bench/wal-frames.ts trace {pid} {build} /tmp/frames"
 *   npx tsx bench/wal-frames.ts report /tmp/frames/*
 *
 * `trace` runs `strace -f -e trace=pwrite64 -y -xx -s 24` on the process until SIGINT (the bench
 * sends it when its window ends), then copies the file (default `control.sqlite`, `--file`) and its
 * WAL beside the trace. strace slows the database threads: its runs give counts, not CPU.
 *
 * `report` reads each frame's 24-byte header as SQLite writes it (the page number; on a commit
 * frame the database size), maps pages to B-trees with the copy's `dbstat`, and divides by the
 * outbox entries created in the window (one per deny on the bench's mix).
 */
import { spawn } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  writeFileSync,
} from 'node:fs';
import { basename, join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { file: { type: 'string', default: 'control.sqlite' } },
});
const [command, ...rest] = positionals;

/** The path of `pid`'s open file named `name` (the state dir is the bench's temp dir). */
function openFile(pid: string, name: string): string {
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      if (basename(target) === name) return target;
    } catch {
      // closed meanwhile
    }
  }
  throw new Error(`process ${pid} has no ${name} open`);
}

function trace(pid: string, build: string, outRoot: string): void {
  const file = openFile(pid, values.file);
  const out = join(outRoot, `${build}-${Date.now()}`);
  mkdirSync(out, { recursive: true });
  const strace = spawn(
    'strace',
    ['-f', '-p', pid, '-e', 'trace=pwrite64', '-y', '-xx', '-s', '24', '-o', join(out, 'strace.txt')],
    { stdio: 'ignore' },
  );
  writeFileSync(join(out, 'window.json'), JSON.stringify({ file: basename(file), startMs: Date.now() }));
  const stop = () => {
    strace.kill('SIGINT');
    strace.once('exit', () => {
      const window = JSON.parse(readFileSync(join(out, 'window.json'), 'utf8'));
      writeFileSync(join(out, 'window.json'), JSON.stringify({ ...window, endMs: Date.now() }));
      for (const suffix of ['', '-wal'])
        if (existsSync(file + suffix)) copyFileSync(file + suffix, join(out, basename(file) + suffix));
      process.exit(0);
    });
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

/** What a transaction was, from the B-trees it wrote (the control file's; others by their names). */
function kindOf(trees: Set<string>): string {
  const outbox = [...trees].some((t) => t.startsWith('outbox_entry'));
  if (trees.has('lockout_created')) return 'a deny’s append with its lock-out';
  if (trees.has('sqlite_autoindex_outbox_entry_1')) return 'an append alone';
  if (!outbox && trees.has('lockout_status_created')) return 'the lock-out’s queued → locked';
  if (trees.has('outbox_entry_status_seq')) return 'the completion script (completions, marks, claim)';
  if (outbox) return 'a claim or marks alone';
  return [...trees].sort().join(', ');
}

function report(dir: string): void {
  const window = JSON.parse(readFileSync(join(dir, 'window.json'), 'utf8')) as {
    file: string;
    startMs: number;
    endMs: number;
  };
  const db = new DatabaseSync(join(dir, window.file));
  const names = new Map<number, string>();
  for (const r of db.prepare('select pageno, name from dbstat').all())
    names.set(Number(r.pageno), String(r.name));
  const hasOutbox = db.prepare("select 1 from sqlite_master where name = 'outbox_entry'").get() !== undefined;
  const entries = hasOutbox
    ? Number(
        db
          .prepare('select count(*) as n from outbox_entry where created_at between ? and ?')
          .get(window.startMs, window.endMs)!.n,
      )
    : 0;
  db.close();
  const wal = `/${window.file}-wal`;
  let frames = 0;
  let commits = 0;
  const byTree = new Map<string, number>();
  const byKind = new Map<string, { n: number; frames: number }>();
  let open: string[] = [];
  for (const line of readFileSync(join(dir, 'strace.txt'), 'utf8').split('\n')) {
    const m = /pwrite64\(\d+<([^>]*)>, "((?:\\x[0-9a-f]{2})*)"(?:\.\.\.)?, 24, \d+\)/.exec(line);
    if (m === null) continue;
    const path = Buffer.from(m[1]!.replaceAll('\\x', ''), 'hex').toString();
    if (!path.endsWith(wal)) continue;
    const header = Buffer.from(m[2]!.replaceAll('\\x', ''), 'hex');
    const page = header.readUInt32BE(0);
    const tree = names.get(page) ?? `page ${page}`;
    frames++;
    byTree.set(tree, (byTree.get(tree) ?? 0) + 1);
    open.push(tree);
    if (header.readUInt32BE(4) === 0) continue;
    commits++;
    const kind = kindOf(new Set(open));
    const k = byKind.get(kind) ?? { n: 0, frames: 0 };
    byKind.set(kind, { n: k.n + 1, frames: k.frames + open.length });
    open = [];
  }
  const per = entries > 0 ? entries : 1;
  const unit = entries > 0 ? 'outbox entry' : 'window';
  console.log(
    `## ${dir}: ${((window.endMs - window.startMs) / 1000).toFixed(1)} s, ${entries} outbox entries; ${frames} frames in ${commits} commits: ${(frames / per).toFixed(2)} frames and ${(commits / per).toFixed(2)} commits per ${unit}`,
  );
  console.log(
    `by B-tree, frames per ${unit}: ${[...byTree]
      .sort((a, b) => b[1] - a[1])
      .map(([tree, n]) => `${tree} ${(n / per).toFixed(2)}`)
      .join('; ')}`,
  );
  console.log(`| transaction | per ${unit} | frames each | frames per ${unit} |\n|---|---:|---:|---:|`);
  for (const [kind, k] of [...byKind].sort((a, b) => b[1].frames - a[1].frames))
    console.log(
      `| ${kind} | ${(k.n / per).toFixed(2)} | ${(k.frames / k.n).toFixed(1)} | ${(k.frames / per).toFixed(2)} |`,
    );
}

if (command === 'trace' && rest.length === 3) trace(rest[0]!, rest[1]!, rest[2]!);
else if (command === 'report' && rest.length > 0) for (const dir of rest) report(dir);
else {
  console.error(
    'usage: wal-frames.ts trace <pid> <build> <out dir> [--file control.sqlite] | report <dir>...',
  );
  process.exit(2);
}
