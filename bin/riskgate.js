#!/usr/bin/env node
// Launcher: there is no build step, so register tsx's ESM loader in-process and run the
// TypeScript CLI (src/cli/main.ts). Exit codes pass through process.exitCode.
import { register } from 'tsx/esm/api';

register();
const { runCli, processIo, handleClosedStdout } = await import('../src/cli/main.ts');
handleClosedStdout();
try {
  process.exitCode = await runCli(process.argv.slice(2), processIo);
} catch (e) {
  process.stderr.write(
    `riskgate: internal error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`,
  );
  process.exitCode = 1;
}
