/**
 * The Node.js riskgate runs on, checked before anything else loads: riskgate imports `node:sqlite`
 * and other Node 24 modules, which an older Node refuses while loading (ERR_UNKNOWN_BUILTIN_MODULE),
 * before any code of riskgate's could explain. Entry points (src/main.ts, bin/riskgate.js) run this
 * first and import the rest dynamically. This module imports nothing, so any Node can load it.
 */

/** The lowest supported Node.js, `[major, minor]`: package.json's `engines` (a test keeps them equal). */
export const MINIMUM_NODE: readonly [number, number] = [24, 11];

/**
 * Why `version` (e.g. `20.20.2`, as in `process.versions.node`) cannot run riskgate, or undefined
 * when it can. Node 25 and later are not refused: `engines` says `<25` for npm's sake, but a newer
 * Node is more likely to work than a plain refusal is to help.
 */
export function unsupportedNodeReason(version: string): string | undefined {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  const [wantMajor, wantMinor] = MINIMUM_NODE;
  if (major > wantMajor || (major === wantMajor && minor >= wantMinor)) return undefined;
  return `riskgate needs Node.js ${wantMajor} (${wantMajor}.${wantMinor} or later; this is ${version})`;
}

/**
 * Exits with a plain message, status 1, unless this Node can run riskgate. `command` is how this
 * process was started, for the advice: `npx` runs the Node 24 that `npm ci` installs into
 * node_modules/.bin (the `node` devDependency), whatever Node the machine has.
 */
export function exitUnlessSupportedNode(command: string): void {
  const reason = unsupportedNodeReason(process.versions.node);
  if (reason === undefined) return;
  process.stderr.write(
    `${reason}: after npm ci, run it with the Node ${MINIMUM_NODE[0]} npm installs in node_modules/.bin: npx ${command}\n` +
      `  (or install Node.js ${MINIMUM_NODE[0]} LTS; .nvmrc names it)\n`,
  );
  process.exit(1);
}
