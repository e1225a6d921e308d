import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { type FunctionSize, functionSizes } from './support/function-sizes.ts';

/**
 * No function in src/ has more than `MAX_OWN_LINES` lines of its own (issue 23): a function,
 * method, accessor, constructor or arrow counts the lines it spans less those of the functions
 * nested in it (a factory's inner functions count apart). Test files are not counted; neither are
 * the sandbox (an emulator, not riskgate) and the policy compiler's passes.
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MAX_OWN_LINES = 120;
const EXEMPT = [/^src\/sandbox\//, /^src\/policy\/policy-compiler\.ts$/];

/**
 * Functions still over the limit, by `file:name`, each with why. The lead removes an entry when
 * its refactor lands; an entry that no longer names an offender fails the test, so none lingers.
 */
const ALLOWED = new Map<string, string>([]);

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    // .tsx too: the console's pages are functions like any other.
    return /\.tsx?$/.test(entry.name) && !entry.name.endsWith('.test.ts') ? [path] : [];
  });
}

function offenders(): FunctionSize[] {
  return sourceFiles(join(ROOT, 'src'))
    .map((path) => relative(ROOT, path).split('\\').join('/'))
    .filter((file) => !EXEMPT.some((pattern) => pattern.test(file)))
    .flatMap((file) => functionSizes(file, readFileSync(join(ROOT, file), 'utf8')))
    .filter((f) => f.ownLines > MAX_OWN_LINES);
}

describe('function size in src/', () => {
  it(`has no function with more than ${MAX_OWN_LINES} lines of its own, but the allowed ones`, () => {
    const found = offenders();
    const unexpected = found
      .filter((f) => !ALLOWED.has(`${f.file}:${f.name}`))
      .map((f) => `${f.file}:${f.line} ${f.name}: ${f.ownLines} lines of its own`);
    expect(unexpected).toEqual([]);
  });

  it('allows only functions that are still over the limit (remove an entry once its split lands)', () => {
    const over = new Set(offenders().map((f) => `${f.file}:${f.name}`));
    expect([...ALLOWED.keys()].filter((key) => !over.has(key))).toEqual([]);
  });

  it('counts a nested function apart from the function it is written in', () => {
    const body = (n: number) => Array.from({ length: n }, (_, i) => `  const v${i} = ${i};`).join('\n');
    const text = `export function outer() {\n${body(3)}\n  const inner = () => {\n${body(5)}\n  };\n  return inner;\n}\nclass K {\n  method() {\n${body(2)}\n  }\n}\n`;
    const sizes = functionSizes('x.ts', text).map(({ name, ownLines }) => ({ name, ownLines }));
    expect(sizes).toEqual([
      { name: 'inner', ownLines: 7 },
      // 13 lines in all, 7 of them inner's
      { name: 'outer', ownLines: 6 },
      { name: 'method', ownLines: 4 },
    ]);
  });
});
