import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { SLOW, UNIT } from '../vitest.config.ts';

/**
 * The file rule of the vitest projects (vitest.config.ts): the unit project stays in process, and
 * every test that compiles dist/ is in the slow one. A new file that breaks the rule fails here,
 * not as a unit run that quietly grew past its budget.
 */

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** What starts a server or process of its own: the sandbox, riskgate, Redis, a dist build. */
const OUT_OF_PROCESS = [
  'decide-harness',
  'clients-sandbox',
  'support/test-sandbox',
  'support/redis-server',
  'support/riskgate-process',
  'startRiskgate(',
  'startSandbox(',
];

function testFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.test.ts'))
    .map((e) => join(e.parentPath, e.name).slice(ROOT.length).split('\\').join('/'));
}

const SELF = 'test/test-projects.test.ts';
/** A file's text; this file names what it looks for, so it reads as empty. */
const read = (file: string) => (file === SELF ? '' : readFileSync(join(ROOT, file), 'utf8'));

describe('the vitest projects', () => {
  it('list only test files that exist, each in one project', () => {
    for (const file of [...UNIT, ...SLOW]) expect(existsSync(join(ROOT, file)), file).toBe(true);
    expect(UNIT.filter((f) => SLOW.includes(f))).toEqual([]);
  });

  it('keep the unit project in process: no sandbox, riskgate, Redis or dist of its own', () => {
    const unit = [...testFiles('src'), ...UNIT];
    const outside = unit.filter((file) => OUT_OF_PROCESS.some((needle) => read(file).includes(needle)));
    expect(outside).toEqual([]);
  });

  it('put every test that compiles dist/ in the slow project', () => {
    const builds = testFiles('test').filter((file) => read(file).includes('buildDist('));
    expect(builds.filter((file) => !SLOW.includes(file))).toEqual([]);
  });
});
