import { relative } from 'node:path';
import { exitUnlessSupportedNode } from './build-info/node-version.ts';

/**
 * The entry point (`npm start`, `node dist/main.js`, the image's CMD, each worker): the Node.js
 * version is checked before riskgate's modules load, since an older Node fails on their imports
 * (node:sqlite) before any of riskgate's code runs. Static imports are all loaded before a module
 * runs, so the process itself (src/riskgate-process.ts) is imported dynamically, after the check.
 */
const script = relative(process.cwd(), process.argv[1] ?? 'dist/main.js') || 'dist/main.js';
const runner = script.endsWith('.ts') ? 'tsx' : 'node';
exitUnlessSupportedNode(`${runner} ${[script, ...process.argv.slice(2)].join(' ')}`);
await import('./riskgate-process.ts');
