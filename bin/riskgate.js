#!/usr/bin/env node
// Launcher. In a checkout (src/ present) it runs the TypeScript CLI through tsx's ESM loader, so an
// edit is live with no build step; in the image, where only the compiled dist/ ships (and tsx, a
// devDependency, is pruned), it runs dist/cli/main.js. Exit codes pass through process.exitCode.
// The Node version is checked first (src/build-info/node-version.ts), before the CLI's modules load:
// an older Node fails on their imports (node:sqlite) with nothing but a loader error.
import { existsSync } from 'node:fs';

const source = new URL('../src/cli/main.ts', import.meta.url);
const checkout = existsSync(source);
if (checkout) {
  const { register } = await import('tsx/esm/api');
  register();
}
const nodeVersion = checkout
  ? await import(new URL('../src/build-info/node-version.ts', import.meta.url).href)
  : await import(new URL('../dist/build-info/node-version.js', import.meta.url).href);
nodeVersion.exitUnlessSupportedNode(['riskgate', ...process.argv.slice(2)].join(' '));
const cli = await import(checkout ? source.href : new URL('../dist/cli/main.js', import.meta.url).href);
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
