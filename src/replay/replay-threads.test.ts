import { describe, expect, it } from 'vitest';
import { threadExecArgv } from './replay-threads.ts';

/**
 * A replay thread loads erasable TypeScript, which Node strips itself: under `npx tsx` it must not
 * inherit tsx's loader (each thread would compile every module again), and keeps every other option.
 */

describe("a replay thread's Node options", () => {
  it("drops tsx's loader as `npx tsx` passes it", () => {
    // What process.execArgv holds under `npx tsx` (tsx 4).
    expect(
      threadExecArgv([
        '--require',
        '/app/node_modules/tsx/dist/preflight.cjs',
        '--import',
        'file:///app/node_modules/tsx/dist/loader.mjs',
      ]),
    ).toEqual([]);
  });

  it('drops it in every other spelling: by package name, with `=`, from a pnpm store, on Windows', () => {
    expect(
      threadExecArgv([
        '--import',
        'tsx',
        '--import=tsx/esm',
        '-r',
        'tsx/cjs',
        '--loader=file:///s/.pnpm/tsx@4.23.15/node_modules/tsx/dist/loader.mjs',
        '--experimental-loader',
        'C:\\app\\node_modules\\tsx\\dist\\loader.mjs',
      ]),
    ).toEqual([]);
  });

  it('keeps every other option, other loaders included', () => {
    const others = [
      '--cpu-prof',
      '--cpu-prof-dir=/tmp/prof',
      '--max-old-space-size=512',
      '--import',
      'file:///app/otel-setup.mjs',
      '--require',
      '/app/node_modules/vitest/suppress-warnings.cjs',
      '--conditions',
      'node',
      '--import=./tsxlike.mjs',
    ];
    expect(threadExecArgv(others)).toEqual(others);
    expect(threadExecArgv(['--import', 'tsx', '--cpu-prof'])).toEqual(['--cpu-prof']);
  });
});
