import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * The shape of src/: no import circle between files or between top-level folders, and production
 * code never reaches into the sandbox (the vendor emulator) except through src/dev/, which starts it
 * for development. Every import counts, `import type` and `import()` included: a type-only import is
 * erased at run time, but it still ties the two modules together for a reader. Test files are left
 * out: a test may import whatever it exercises.
 */

const SRC = resolve(import.meta.dirname, '../src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return /\.tsx?$/.test(e.name) && !e.name.endsWith('.test.ts') ? [path] : [];
  });
}

/** Each module (path under src/) and the src/ modules it imports. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sourceFiles(SRC)) {
    const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    const targets = importedFiles
      .map((i) => i.fileName)
      .filter((name) => name.startsWith('.'))
      .map((name) => relative(SRC, resolve(dirname(file), name)));
    graph.set(relative(SRC, file), [...new Set(targets)]);
  }
  return graph;
}

/** The strongly connected components with more than one member (Tarjan): each is a circle. */
function circles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1) found.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

const folderOf = (path: string): string => (path.includes('/') ? path.slice(0, path.indexOf('/')) : '.');

/** Top-level folders of src/ and the folders they import, with the imports that make each edge. */
function folderGraph(files: ReadonlyMap<string, readonly string[]>) {
  const graph = new Map<string, string[]>();
  const why = new Map<string, string[]>();
  for (const [file, targets] of files) {
    const from = folderOf(file);
    if (!graph.has(from)) graph.set(from, []);
    for (const target of targets) {
      const to = folderOf(target);
      if (to === from) continue;
      if (!graph.get(from)!.includes(to)) graph.get(from)!.push(to);
      why.set(`${from} -> ${to}`, [...(why.get(`${from} -> ${to}`) ?? []), `${file} -> ${target}`]);
    }
  }
  return { graph, why };
}

describe('the import graph of src/', () => {
  const files = importGraph();

  it('finds the modules and their imports', () => {
    expect(files.size).toBeGreaterThan(100);
    expect(files.get('riskgate-process.ts')).toContain('config/riskgate-config.ts');
  });

  it('has no circle between files', () => {
    expect(circles(files)).toEqual([]);
  });

  it('has no circle between top-level folders', () => {
    const { graph, why } = folderGraph(files);
    const knots = circles(graph).map((knot) => {
      const members = new Set(knot);
      const edges = [...why].filter(([edge]) => edge.split(' -> ').every((f) => members.has(f)));
      return { knot, edges: Object.fromEntries(edges) };
    });
    expect(knots).toEqual([]);
  });

  it('keeps the sandbox out of production code: only src/dev/ starts it', () => {
    const intoSandbox = [...files].flatMap(([file, targets]) =>
      folderOf(file) === 'sandbox' || folderOf(file) === 'dev'
        ? []
        : targets.filter((t) => folderOf(t) === 'sandbox').map((t) => `${file} -> ${t}`),
    );
    expect(intoSandbox).toEqual([]);
  });

  it('finds a circle when there is one (the detector itself)', () => {
    const g = new Map([
      ['a', ['b']],
      ['b', ['c']],
      ['c', ['a']],
      ['d', ['a']],
    ]);
    expect(circles(g)).toEqual([['a', 'b', 'c']]);
  });
});
