import { afterAll, beforeAll } from 'vitest';
import { type RunningSandbox, type SandboxOptions, startSandbox } from '../../src/sandbox/server.ts';

/**
 * The sandbox as tests start it: in process, on port 0, quiet, and always stopped. Test files
 * take one of these instead of calling `startSandbox` themselves.
 */

/** `startSandbox` with the tests' defaults: port 0 (a free port) and no request log. */
export function startTestSandbox(options: SandboxOptions = {}): Promise<RunningSandbox> {
  return startSandbox({ port: 0, quiet: true, ...options });
}

/**
 * The sandbox a test file shares: call it at the top of the file (or of a `describe`); it is
 * started before the first test (a `beforeAll` registered here, so before the file's own) and
 * stopped after the last. The value stands for the running sandbox: reading it before the
 * sandbox started (at collection time) throws.
 */
export function sandboxForFile(options: SandboxOptions = {}): RunningSandbox {
  let running: RunningSandbox | undefined;
  beforeAll(async () => {
    running = await startTestSandbox(options);
  });
  afterAll(async () => {
    await running?.stop();
    running = undefined;
  });
  return new Proxy({} as RunningSandbox, {
    get(_target, property) {
      if (running === undefined) {
        throw new Error('the file’s sandbox is not running here: use it inside a test or a hook');
      }
      const value = Reflect.get(running, property);
      return typeof value === 'function' ? value.bind(running) : value;
    },
  });
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
