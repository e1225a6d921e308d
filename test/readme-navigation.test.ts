import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, isAbsolute, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { headingAnchor, linkableAnchors, markdownHeadings, markdownLinks } from './support/markdown.ts';

/**
 * A newcomer can find their way: the README opens with the two commands, then a table of contents
 * that lists each of its sections and every page of docs/; every relative link of every Markdown
 * document in the repository reaches a file of the repository and, with an anchor, one of that
 * document's headings (as GitHub renders them); no document points outside the repository; and a
 * citation of a section by name ("docs/operations.md, \"Workers\"") names a heading that exists.
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SELF = 'test/readme-navigation.test.ts';
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');

/** Folders no reader follows: dependencies, build and run output, local state. */
const UNREAD = new Set(['node_modules', '.git', 'dist', 'coverage', 'results', '.riskgate']);

/** Every Markdown document of the working tree (new ones included), as paths from the root. */
function markdownFiles(dir = ''): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const path = dir === '' ? e.name : `${dir}/${e.name}`;
    if (e.isDirectory()) return UNREAD.has(e.name) ? [] : markdownFiles(path);
    return e.name.endsWith('.md') ? [path] : [];
  });
}

/** The files that cite documents by section: what git tracks of them, or a walk without git. */
function citingFiles(): string[] {
  const scope = ['src', 'test', 'bench', 'policies', 'docs', 'deploy', '.ci', 'README.md', 'Dockerfile'];
  try {
    const out = execFileSync('git', ['ls-files', '-z', '--', ...scope, '*.example'], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    const files = out.split('\0').filter((f) => f !== '');
    if (files.length > 0) return [...new Set([...files, ...markdownFiles()])];
  } catch {
    // fall through to the Markdown files alone
  }
  return markdownFiles();
}

/** Paths of the machine a document was written on, never of the repository. */
const MACHINE_PATHS = /(?:^|[\s(`'"=])(?:\.\.\/shared\b|\/work\/|\/home\/|\/Users\/|\/root\/|~\/|file:\/\/)/;

/** The section of `markdown` under the `## title` heading, up to the next `## `. */
function section(markdown: string, title: string): string {
  const at = markdown.indexOf(`\n## ${title}\n`);
  if (at < 0) return '';
  const end = markdown.indexOf('\n## ', at + 1);
  return markdown.slice(at, end < 0 ? undefined : end);
}

interface Resolved {
  /** The file the link reaches, from the root; undefined for a web address. */
  file?: string;
  anchor?: string;
  /** Why it cannot be followed inside the repository. */
  outside?: string;
}

/** Where a link of `from` (a path from the root) leads. */
function resolveLink(from: string, target: string): Resolved {
  if (/^(https?:|mailto:)/i.test(target)) return {};
  if (/^[a-z][a-z0-9+.-]*:/i.test(target) || isAbsolute(target)) return { outside: 'an absolute address' };
  const [path, anchor] = target.split('#', 2) as [string, string | undefined];
  const file = path === '' ? from : normalize(join(dirname(from), decodeURIComponent(path)));
  if (file === '..' || file.startsWith(`..${sep}`) || isAbsolute(file)) {
    return { outside: 'a path out of the repository' };
  }
  return { file: file.split(sep).join('/').replace(/\/$/, '') || '.', anchor };
}

const documents = markdownFiles();
const readme = read('README.md');

describe('README navigation', () => {
  it('finds the documents it checks', () => {
    expect(documents).toEqual(
      expect.arrayContaining(['README.md', 'docs/operations.md', 'policies/README.md', 'bench/README.md']),
    );
  });

  it('opens with `npm start` and `npm test`, before anything else', () => {
    const top = readme.split('\n').slice(0, 40).join('\n');
    expect(top).toMatch(/npm ci && npm start/);
    expect(top).toMatch(/npm ci && npm test/);
    expect(readme.indexOf('npm start')).toBeLessThan(readme.indexOf('\n## '));
  });

  it('has a table of contents, before the first section, listing every section and every page of docs/', () => {
    const contents = section(readme, 'Contents');
    expect(contents, 'a "## Contents" section').not.toBe('');
    const sections = markdownHeadings(readme).filter((h) => h.level === 2 && h.text !== 'Contents');
    expect(readme.indexOf(contents)).toBeLessThan(readme.indexOf(`\n## ${sections[0]!.text}\n`));
    const linked = new Set(markdownLinks(contents).map((l) => l.target));
    const missing = [
      ...sections.map((h) => `#${headingAnchor(h.text)}`),
      ...readdirSync(join(ROOT, 'docs')).map((f) => `docs/${f}`),
    ].filter((target) => !linked.has(target));
    expect(missing, 'not in the README contents').toEqual([]);
  });

  it('gives every relative link a file of the repository and, with an anchor, a heading of it', () => {
    const broken: string[] = [];
    for (const from of documents) {
      for (const { target, line } of markdownLinks(read(from))) {
        const { file, anchor, outside } = resolveLink(from, target);
        if (outside !== undefined || file === undefined) continue; // the next test's concern
        if (!existsSync(join(ROOT, file))) {
          broken.push(`${from}:${line}: ${target} (no ${file})`);
        } else if (anchor !== undefined && anchor !== '') {
          if (!file.endsWith('.md'))
            broken.push(`${from}:${line}: ${target} (an anchor into a non-Markdown file)`);
          else if (!linkableAnchors(read(file)).has(anchor)) {
            broken.push(`${from}:${line}: ${target} (no heading #${anchor} in ${file})`);
          }
        }
      }
    }
    expect(broken).toEqual([]);
  });

  it('points nowhere outside the repository: no absolute path, no ../ out of it, no path of this machine', () => {
    const outside: string[] = [];
    for (const from of documents) {
      const text = read(from);
      for (const { target, line } of markdownLinks(text)) {
        const why = resolveLink(from, target).outside;
        if (why !== undefined) outside.push(`${from}:${line}: ${target} (${why})`);
      }
      text.split('\n').forEach((l, i) => {
        if (MACHINE_PATHS.test(l)) outside.push(`${from}:${i + 1}: ${l.trim()}`);
      });
    }
    expect(outside).toEqual([]);
  });

  it('cites sections by names that are headings of the document cited', () => {
    const wrong: string[] = [];
    const citation = /(?<![\w/.-])((?:[\w.-]+\/)*[\w-]+\.md|README)[,:]?\s+"([^"\n]+)"/g;
    for (const from of citingFiles().filter((f) => f !== SELF && !f.endsWith('.json'))) {
      read(from)
        .split('\n')
        .forEach((l, i) => {
          for (const [, cited, title] of l.matchAll(citation)) {
            // README alone is the root one; a bare name is beside the citing file, else at the root.
            const candidates =
              cited === 'README' ? ['README.md'] : [normalize(join(dirname(from), cited!)), cited!];
            const file = candidates.find((c) => existsSync(join(ROOT, c)));
            const want = `-${headingAnchor(title!)}-`;
            const found =
              file !== undefined && [...linkableAnchors(read(file))].some((a) => `-${a}-`.includes(want));
            if (!found) wrong.push(`${from}:${i + 1}: ${cited}, "${title}"`);
          }
        });
    }
    expect(wrong, 'cite a heading of the document (or its first words)').toEqual([]);
  });

  it('reads links and anchors the way GitHub renders them', () => {
    expect(headingAnchor('POST /decide')).toBe('post-decide');
    expect(headingAnchor('Workers: every core')).toBe('workers-every-core');
    expect(headingAnchor('Test suites (`*.test.yaml`)')).toBe('test-suites-testyaml');
    expect([...linkableAnchors('# A\n## Notes\n```\n## Not a heading\n```\n## Notes\n')]).toEqual([
      'a',
      'notes',
      'notes-1',
    ]);
    expect(
      markdownLinks(
        'See [a](docs/a.md#x) and `[b](not-a-link.md)`.\n\n```\n[c](code.md)\n```\n[d]: ../d.md\n',
      ),
    ).toEqual([
      { target: 'docs/a.md#x', line: 1 },
      { target: '../d.md', line: 6 },
    ]);
    expect(resolveLink('docs/ops.md', '../README.md#quick-start')).toEqual({
      file: 'README.md',
      anchor: 'quick-start',
    });
    expect(
      resolveLink('docs/ops.md', ['..', '..', 'shared', 'specs', 'api.md'].join('/')).outside,
    ).toBeDefined();
    expect(resolveLink('README.md', '/work/shared/x.md').outside).toBeDefined();
    expect(resolveLink('README.md', 'https://example.com/')).toEqual({});
  });
});
