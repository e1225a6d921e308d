import { type RunningSandbox, type SandboxOptions, startSandbox } from '../../src/sandbox/server.ts';
import { runningForBlock } from './running-for-block.ts';

/**
 * The sandbox as tests start it: in process, on port 0, quiet, and always stopped. Test files
 * take one of these instead of calling `startSandbox` themselves.
 */

/** `startSandbox` with the tests' defaults: port 0 (a free port) and no request log. */
export function startTestSandbox(options: SandboxOptions = {}): Promise<RunningSandbox> {
  return startSandbox({ port: 0, quiet: true, ...options });
}

/**
 * The sandbox a test file shares: call it at the top of the file (or of a `describe`); started
 * before the first test and stopped after the last ({@link runningForBlock}).
 */
export function sandboxForFile(options: SandboxOptions = {}): RunningSandbox {
  return runningForBlock('the file’s sandbox', () => startTestSandbox(options));
}

/** A sandbox for one test: started with `options`, handed to `use`, stopped whatever `use` does. */
export async function withSandbox<T>(
  options: SandboxOptions,
  use: (sandbox: RunningSandbox) => Promise<T>,
): Promise<T> {
  const sandbox = await startTestSandbox(options);
  try {
    return await use(sandbox);
  } finally {
    await sandbox.stop();
  }
}
