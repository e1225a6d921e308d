#!/usr/bin/env node
// Launcher. In a checkout (src/ present) it runs the TypeScript CLI through tsx's ESM loader, so an
// edit is live with no build step; in the image, where only the compiled dist/ ships (and tsx, a
// devDependency, is pruned), it runs dist/cli/main.js. Exit codes pass through process.exitCode.
import { existsSync } from 'node:fs';

const source = new URL('../src/cli/main.ts', import.meta.url);
let cli;
if (existsSync(source)) {
  const { register } = await import('tsx/esm/api');
  register();
  cli = await import(source.href);
} else {
  cli = await import(new URL('../dist/cli/main.js', import.meta.url).href);
}
const { runCli, processIo, handleClosedStdout } = cli;
handleClosedStdout();
try {
  process.exitCode = await runCli(process.argv.slice(2), processIo);
} catch (e) {
  process.stderr.write(
    `riskgate: internal error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`,
  );
  process.exitCode = 1;
}
