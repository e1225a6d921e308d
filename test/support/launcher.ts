import { execFile } from 'node:child_process';
import { join, resolve } from 'node:path';

/**
 * The real launcher, `node bin/riskgate.js …`, as `npx riskgate` runs it in a checkout: a new Node
 * process each time, which loads the CLI's TypeScript through tsx (seconds on an idle machine).
 */

const ROOT = resolve(import.meta.dirname, '../..');

/** bin/riskgate.js. */
export const LAUNCHER = join(ROOT, 'bin', 'riskgate.js');

/**
 * How long one run of the launcher may take, milliseconds. Its start (a process, a TypeScript
 * load) grows with the machine's load (CI's two shared cores, stress-ng beside the suite), so the
 * bound is wide: it catches a launcher that hangs, not one that starts slowly.
 */
export const LAUNCH_MS = 60_000;

/** The timeout of a test that runs the launcher once: its run, and room for the rest of the test. */
export const LAUNCHER_TEST_MS = LAUNCH_MS + 10_000;

/** Runs the launcher with `args` from the repository's root; its exit code and output. */
export function runLauncher(
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      [LAUNCHER, ...args],
      { cwd: ROOT, timeout: LAUNCH_MS, env },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        done({ code, stdout, stderr });
      },
    );
  });
}
