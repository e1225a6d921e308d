import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES } from '../src/config/riskgate-config.ts';

/**
 * The configuration's three descriptions stay one: the variables loadConfig reads, the ones
 * riskgate.env.example lists (set or commented out) and the README's configuration table.
 */

const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');
const ours = (name: string) => /^(RISKGATE|SANDBOX)_/.test(name);

describe('configuration documentation', () => {
  it('riskgate.env.example lists every variable loadConfig reads, and no other', () => {
    const listed = [...read('riskgate.env.example').matchAll(/^#? ?([A-Z][A-Z0-9_]+)=/gm)]
      .map((m) => m[1]!)
      .filter(ours);
    expect(new Set(listed).size, 'a variable listed twice').toBe(listed.length);
    expect([...listed].sort()).toEqual([...CONFIG_VARIABLES].sort());
  });

  it("the README's configuration table has a row for every variable loadConfig reads, and no other", () => {
    const readme = read('README.md');
    const section = readme.slice(readme.indexOf('## Configuration'));
    const table = section.slice(0, section.indexOf('\n## '));
    const rows = [...table.matchAll(/^\| `([A-Z][A-Z0-9_]+)` \|/gm)].map((m) => m[1]!).filter(ours);
    expect([...rows].sort()).toEqual([...CONFIG_VARIABLES].sort());
  });
});
