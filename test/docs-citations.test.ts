import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { headingAnchor, headingAnchors } from './support/markdown.ts';

/**
 * The repository is readable on its own: code, tests, benchmarks, policies and READMEs cite the
 * vendor's contract as docs/vendor-api.md and its section anchors, never documents that live
 * outside the repository (the vendor's API documents, the contract notes, a `../shared` folder),
 * and every anchor they cite is a heading of docs/vendor-api.md.
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SELF = 'test/docs-citations.test.ts';
/** Where citations live: the folders and files a reader of the repository follows. */
const SCOPE = ['src', 'test', 'bench', 'policies', 'docs', 'README.md'];
/** Binary and generated files, never read for citations. */
const SKIPPED = /\.(png|jpe?g|gif|ico|sqlite|gz|tgz|zip)$/i;

/** The files of `SCOPE` that git tracks; without git (an exported tree), every file under it. */
function trackedFiles(): string[] {
  try {
    const out = execFileSync('git', ['ls-files', '-z', '--', ...SCOPE], { cwd: ROOT, encoding: 'utf8' });
    const files = out.split('\0').filter((f) => f !== '');
    if (files.length > 0) return files;
  } catch {
    // fall through to a walk
  }
  const walk = (path: string): string[] => {
    const full = join(ROOT, path);
    try {
      return readdirSync(full, { withFileTypes: true }).flatMap((e) =>
        e.name === 'node_modules' || e.name === 'results' ? [] : walk(join(path, e.name)),
      );
    } catch {
      return [relative(ROOT, full)];
    }
  };
  return SCOPE.flatMap(walk);
}

/** The citations of documents outside the repository, each as a regular expression. */
const OUTSIDE = [
  /\bCONTRACT\b/,
  /\.\.\/shared\b/,
  /\bshared\/specs\b/,
  /\b(admin-api|trust-signals-api|log-api)\.md\b/,
];

/**
 * The anchors cited in `text`: `docs/vendor-api.md#a` and the ones that follow it in a list
 * (`docs/vendor-api.md#a, #b`).
 */
function citedAnchors(text: string): string[] {
  const anchors: string[] = [];
  for (const m of text.matchAll(/docs\/vendor-api\.md#([\w-]+)((?:,\s*#[\w-]+)*)/g)) {
    anchors.push(m[1]!, ...[...m[2]!.matchAll(/#([\w-]+)/g)].map((a) => a[1]!));
  }
  return anchors;
}

const files = trackedFiles().filter((f) => f !== SELF && !SKIPPED.test(f));
const read = (file: string) => readFileSync(join(ROOT, file), 'utf8');
const vendorApi = read('docs/vendor-api.md');

describe('documentation citations', () => {
  it('finds the files it checks', () => {
    expect(files).toContain('docs/vendor-api.md');
    expect(files).toContain('src/vendor-auth/hmac-signature.ts');
    expect(files.length).toBeGreaterThan(100);
  });

  it('cites no document outside the repository', () => {
    const found: string[] = [];
    for (const file of files) {
      read(file)
        .split('\n')
        .forEach((line, i) => {
          if (OUTSIDE.some((re) => re.test(line))) found.push(`${file}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(found, 'cite docs/vendor-api.md#<section> instead').toEqual([]);
  });

  it('gives docs/vendor-api.md one anchor per heading', () => {
    const anchors = headingAnchors(vendorApi);
    expect(anchors.filter((a, i) => anchors.indexOf(a) !== i)).toEqual([]);
  });

  it('cites only anchors that are headings of docs/vendor-api.md', () => {
    const anchors = new Set(headingAnchors(vendorApi));
    const missing: string[] = [];
    for (const file of files) {
      for (const anchor of citedAnchors(read(file))) {
        if (!anchors.has(anchor)) missing.push(`${file}: #${anchor}`);
      }
    }
    // Its own links within the page, e.g. the contents: [Signing](#signing).
    for (const m of vendorApi.matchAll(/\]\(#([\w-]+)\)/g)) {
      if (!anchors.has(m[1]!)) missing.push(`docs/vendor-api.md: #${m[1]}`);
    }
    expect(missing).toEqual([]);
  });

  it('reads anchors the way GitHub renders them', () => {
    expect(headingAnchor('Signing test vectors')).toBe('signing-test-vectors');
    expect(headingAnchor('OAuth token')).toBe('oauth-token');
    expect(headingAnchor('Admin API: users')).toBe('admin-api-users');
    expect(citedAnchors('see docs/vendor-api.md#log-api, #signing and docs/vendor-api.md#x.')).toEqual([
      'log-api',
      'signing',
      'x',
    ]);
  });
});
