import { readdir, readFile, stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { ErrorCode, RiskgateError } from '../errors/riskgate-error.ts';
import { type CompileOptions, type CompileResult, compilePolicy } from './policy-compiler.ts';
import type { CompiledPolicy, PolicyIssue } from './policy-types.ts';

/** A policy failed to load; `issues` holds every error (and warning) with its position. */
export class PolicyLoadError extends RiskgateError {
  readonly issues: readonly PolicyIssue[];
  constructor(message: string, issues: readonly PolicyIssue[]) {
    super(ErrorCode.INVALID_POLICY, message);
    this.name = 'PolicyLoadError';
    this.issues = issues;
  }
}

/** `file:line:col message`, the one-line form the CLI and logs print. */
export function formatIssue(i: PolicyIssue): string {
  return `${i.file}:${i.line}:${i.col} ${i.severity === 'warning' ? 'warning: ' : ''}${i.message}`;
}

/** Whether a file name is a policy (`*.yaml`/`*.yml`, not a `*.test.yaml` suite). */
export function isPolicyFileName(name: string): boolean {
  return /\.ya?ml$/.test(name) && !/\.test\.ya?ml$/.test(name);
}

/** Whether a file name is a test suite (`*.test.yaml`). */
export function isTestFileName(name: string): boolean {
  return /\.test\.ya?ml$/.test(name);
}

/** The policy files at `path`: the file itself, or the policy files of the directory (sorted). */
export async function resolvePolicyFiles(path: string): Promise<string[]> {
  const s = await stat(path);
  if (!s.isDirectory()) return [path];
  const names = (await readdir(path)).filter(isPolicyFileName).sort();
  return names.map((n) => join(path, n));
}

/** Compiles one policy file from disk; I/O errors come back as an issue too. */
export async function compilePolicyFile(file: string, options?: CompileOptions): Promise<CompileResult> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? 'EIO';
    return {
      issues: [{ file, line: 1, col: 1, message: `cannot read the file (${code})`, severity: 'error' }],
    };
  }
  return compilePolicy(file, text, options);
}

/**
 * Loads the policy at `path` (a file, or a directory holding exactly one policy file).
 * @throws PolicyLoadError with every issue when it does not compile.
 */
export async function loadPolicy(path: string, options?: CompileOptions): Promise<CompiledPolicy> {
  let files: string[];
  try {
    files = await resolvePolicyFiles(path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? 'EIO';
    const issue: PolicyIssue = {
      file: path,
      line: 1,
      col: 1,
      message: `cannot read (${code})`,
      severity: 'error',
    };
    throw new PolicyLoadError(`policy ${path}: cannot read (${code})`, [issue]);
  }
  if (files.length !== 1) {
    const message =
      files.length === 0
        ? 'no policy file (*.yaml, not *.test.yaml) in the directory'
        : `several policy files (${files.map((f) => basename(f)).join(', ')}); name the one to load`;
    throw new PolicyLoadError(`policy ${path}: ${message}`, [
      { file: path, line: 1, col: 1, message, severity: 'error' },
    ]);
  }
  const file = files[0]!;
  const result = await compilePolicyFile(file, options);
  if (!result.policy) {
    const errors = result.issues.filter((i) => i.severity === 'error');
    const first = errors[0];
    const summary = first ? formatIssue(first) : 'invalid policy';
    const more = errors.length > 1 ? ` (and ${errors.length - 1} more)` : '';
    throw new PolicyLoadError(`policy ${file} is invalid: ${summary}${more}`, result.issues);
  }
  return result.policy;
}
