import { readdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { policyJsonSchemas } from '../policy/policy-json-schema.ts';
import {
  compilePolicyFile,
  formatIssue,
  isTestFileName,
  resolvePolicyFiles,
} from '../policy/policy-loader.ts';
import { runPolicyTestFile, type SuiteResult } from '../policy/policy-test-runner.ts';
import type { PolicyIssue } from '../policy/policy-types.ts';

/** Exit codes of `riskgate policy …`. */
export const EXIT = { OK: 0, USAGE: 2, INVALID_POLICY: 3, TEST_FAILED: 4 } as const;

/** Where a command writes; injected so tests can capture output without spawning. */
export interface CliIo {
  out: (line: string) => void;
  err: (line: string) => void;
}

async function pathKind(path: string): Promise<'file' | 'dir' | undefined> {
  try {
    return (await stat(path)).isDirectory() ? 'dir' : 'file';
  } catch {
    return undefined;
  }
}

/**
 * `riskgate policy check [path]`: compiles and type-checks every policy file at `path` (default
 * `policies`). Prints one line per issue (`file:line:col message`); exit 0, or 3 on any error,
 * a missing path or a directory without policy files.
 */
export async function policyCheck(path: string, opts: { json: boolean }, io: CliIo): Promise<number> {
  if (!(await pathKind(path))) {
    io.err(`riskgate policy check: ${path}: no such file or directory (nothing checked)`);
    return EXIT.INVALID_POLICY;
  }
  const files = await resolvePolicyFiles(path);
  const issues: PolicyIssue[] = [];
  const policies: {
    file: string;
    name: string;
    revision: string;
    signals: string[];
    adminUser: boolean;
    adminDevices: boolean;
    /** Velocity counter names the policy reads (empty when none). */
    velocity: string[];
    history: boolean;
  }[] = [];
  for (const file of files) {
    const r = await compilePolicyFile(file);
    issues.push(...r.issues);
    if (r.policy) {
      const q = r.policy.requirements;
      policies.push({
        file,
        name: r.policy.name,
        revision: r.policy.revision,
        signals: [...q.signals],
        adminUser: q.adminUser,
        adminDevices: q.adminDevices,
        velocity: q.velocity ? (r.policy.velocityCounters ?? []).map((c) => c.name) : [],
        history: q.history,
      });
    }
  }
  const errors = issues.filter((i) => i.severity === 'error').length;
  if (opts.json) io.out(JSON.stringify({ ok: errors === 0, files, policies, issues }, null, 2));
  else {
    for (const i of issues) io.out(formatIssue(i));
    if (files.length === 0) io.err(`riskgate policy check: no policy files in ${path}`);
    for (const p of policies) {
      const reads = [
        ...p.signals,
        ...(p.adminUser ? ['user'] : []),
        ...(p.adminDevices ? ['devices'] : []),
        ...(p.velocity.length > 0 ? ['velocity'] : []),
        ...(p.history ? ['history'] : []),
      ];
      io.err(`ok ${p.file}: ${p.name} @ ${p.revision} (reads ${reads.join(', ') || 'nothing'})`);
    }
    const warnings = issues.length - errors;
    io.err(`${files.length} file(s), ${errors} error(s), ${warnings} warning(s)`);
  }
  return errors > 0 || files.length === 0 ? EXIT.INVALID_POLICY : EXIT.OK;
}

async function resolveTestFiles(path: string): Promise<string[]> {
  const kind = await pathKind(path);
  if (kind === 'file') return [path];
  return (await readdir(path))
    .filter(isTestFileName)
    .sort()
    .map((n) => join(path, n));
}

function printSuite(s: SuiteResult, io: CliIo): void {
  const policy = s.policy ? ` (${s.policy.name} @ ${s.policy.revision})` : '';
  io.out(`${s.file} → ${s.policyFile || '?'}${policy}`);
  for (const i of s.issues) io.out(`  ${formatIssue(i)}`);
  for (const c of s.cases) {
    if (c.passed) {
      const d = c.decision!;
      io.out(`  ✓ ${c.name}  [${d.verdict}, score ${d.score}]`);
    } else {
      io.out(`  ✗ ${c.name}  (${c.file}:${c.line})`);
      for (const f of c.failures) io.out(`      ${f}`);
      const d = c.decision;
      if (d) {
        const rules = d.matchedRules.map(
          (r) => `${r.id}${r.score !== undefined ? `(${r.score})` : `(${r.verdict})`}`,
        );
        io.out(`      matched: ${rules.join(', ') || 'none'}; total ${d.score}; decided by ${d.decidedBy}`);
        for (const u of d.unavailable)
          io.out(`      unavailable: ${u.signal} (${u.reason}) → ${u.treatment}`);
      }
    }
  }
  if (s.cases.length > 0) {
    const both = s.coverage.rules.filter((r) => r.matched > 0 && r.notMatched > 0).length;
    io.out(`  coverage: ${both}/${s.coverage.rules.length} rules seen both matching and not matching`);
    for (const g of s.coverage.gaps) io.out(`  gap: ${g}`);
  }
}

/**
 * `riskgate policy test [path]`: runs the `*.test.yaml` suites at `path` (default `policies`).
 * Exit 0 when all pass, 4 on a failing case (or a coverage gap with `requireCoverage`), 3 when a
 * suite or its policy does not load, the path does not exist or holds no suite.
 */
export async function policyTest(
  path: string,
  opts: { json: boolean; requireCoverage: boolean },
  io: CliIo,
): Promise<number> {
  if (!(await pathKind(path))) {
    io.err(`riskgate policy test: ${path}: no such file or directory (nothing tested)`);
    return EXIT.INVALID_POLICY;
  }
  const started = performance.now();
  const files = await resolveTestFiles(path);
  const suites: SuiteResult[] = [];
  for (const f of files) suites.push(await runPolicyTestFile(f));
  const cases = suites.flatMap((s) => s.cases);
  const failed = cases.filter((c) => !c.passed).length;
  const broken = suites.some((s) => s.issues.length > 0);
  const gaps = suites.reduce((n, s) => n + s.coverage.gaps.length, 0);
  const code = broken
    ? EXIT.INVALID_POLICY
    : failed > 0 || (opts.requireCoverage && gaps > 0)
      ? EXIT.TEST_FAILED
      : files.length === 0
        ? EXIT.INVALID_POLICY
        : EXIT.OK;
  if (opts.json) {
    const slim = suites.map((s) => ({
      ...s,
      cases: s.cases.map(({ decision, ...c }) => ({
        ...c,
        ...(decision ? { verdict: decision.verdict, score: decision.score, decision } : {}),
      })),
    }));
    io.out(
      JSON.stringify({ ok: code === EXIT.OK, passed: cases.length - failed, failed, suites: slim }, null, 2),
    );
  } else {
    if (files.length === 0) io.err(`riskgate policy test: no *.test.yaml suites in ${path}`);
    for (const s of suites) printSuite(s, io);
    const ms = Math.round(performance.now() - started);
    io.out(`${cases.length - failed} passed, ${failed} failed (${suites.length} suite(s), ${ms} ms)`);
  }
  return code;
}

/** `riskgate policy schema [dir]`: writes the JSON Schemas (default into `policies/`). */
export async function policySchema(dir: string, io: CliIo): Promise<number> {
  for (const [name, text] of Object.entries(policyJsonSchemas())) {
    const file = join(dir, name);
    await writeFile(file, text);
    io.err(`wrote ${file}`);
  }
  return EXIT.OK;
}
