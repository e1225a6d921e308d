import { spawnSync } from 'node:child_process';

/**
 * Prometheus's own checker (`promtool`, from Debian's `prometheus` package), for the metrics
 * exposition, the alert rules and their unit tests. `.ci/run` installs the package; without it a
 * local run skips those checks with a message naming it, and CI (CI set) fails instead.
 */

export const PROMTOOL_PACKAGE = 'prometheus';

/** Whether `promtool` can run here. Under CI it must: a missing promtool there is a failure. */
export function promtoolAvailable(): boolean {
  const found = spawnSync('promtool', ['--version'], { stdio: 'ignore' }).status === 0;
  if (!found && process.env.CI) {
    throw new Error(
      `promtool is not installed, and CI never skips the Prometheus checks (.ci/run installs Debian's ${PROMTOOL_PACKAGE})`,
    );
  }
  if (!found) {
    console.warn(
      `skipping the promtool checks: install Debian's ${PROMTOOL_PACKAGE} package (apt-get install -y ${PROMTOOL_PACKAGE})`,
    );
  }
  return found;
}

/** Runs `promtool <args>` (with `input` on stdin); its exit status and everything it printed. */
export function promtool(args: string[], input?: string): { status: number | null; output: string } {
  const r = spawnSync('promtool', args, { input, encoding: 'utf8', timeout: 60_000 });
  return { status: r.status, output: `${r.stdout ?? ''}${r.stderr ?? ''}` };
}
