import { readFileSync } from 'node:fs';
import { parseEnv } from 'node:util';
import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES, loadConfig } from '../src/config/riskgate-config.ts';
import { renderEnvExample, withReadmeSettings } from '../src/config/settings-documentation.ts';

/**
 * The settings are declared once (src/config/settings.ts); riskgate.env.example and the README's
 * configuration tables are written from them by `npm run docs:settings`. These fail when a file
 * drifts from the table, and check that what the table makes reads right.
 */

const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');
const ours = (name: string) => /^(RISKGATE|SANDBOX)_/.test(name);
const REGENERATE = 'out of date with src/config/settings.ts: run npm run docs:settings';

describe('configuration documentation', () => {
  it('riskgate.env.example is the one the settings table makes', () => {
    expect(read('riskgate.env.example'), `riskgate.env.example is ${REGENERATE}`).toBe(renderEnvExample());
  });

  it("the README's configuration tables are the ones the settings table makes", () => {
    const readme = read('README.md');
    expect(readme, `README.md's settings section is ${REGENERATE}`).toBe(withReadmeSettings(readme));
  });

  it('riskgate.env.example lists every variable loadConfig reads, and no other', () => {
    const listed = [...renderEnvExample().matchAll(/^#? ?([A-Z][A-Z0-9_]+)=/gm)]
      .map((m) => m[1]!)
      .filter(ours);
    expect(new Set(listed).size, 'a variable listed twice').toBe(listed.length);
    expect([...listed].sort()).toEqual([...CONFIG_VARIABLES].sort());
  });

  it("the README's configuration tables have a row for every variable loadConfig reads, and no other", () => {
    const readme = withReadmeSettings(read('README.md'));
    const section = readme.slice(readme.indexOf('## Configuration'));
    const table = section.slice(0, section.indexOf('\n## '));
    const rows = [...table.matchAll(/^\| `([A-Z][A-Z0-9_]+)` \|/gm)].map((m) => m[1]!).filter(ours);
    expect(new Set(rows).size, 'a variable listed twice').toBe(rows.length);
    expect([...rows].sort()).toEqual([...CONFIG_VARIABLES].sort());
  });

  it('riskgate.env.example reads the same under docker --env-file and node --env-file, every line uncommented', () => {
    // What a user does with it: uncomment the lines they set (as shown here, to see every value).
    const text = renderEnvExample().replace(/^# ?(?=[A-Z][A-Z0-9_]*=)/gm, '');
    // docker: a line starting with # is a comment, blank lines are skipped, anything else is
    // NAME=VALUE with the whole rest of the line as the value (no quotes, no comment stripping).
    const docker: Record<string, string> = {};
    for (const line of text.split('\n')) {
      if (line.trim() === '' || line.trimStart().startsWith('#')) continue;
      const at = line.indexOf('=');
      expect(at, `not NAME=VALUE: ${line}`).toBeGreaterThan(0);
      docker[line.slice(0, at)] = line.slice(at + 1);
    }
    // node --env-file's own parser (util.parseEnv is the same code).
    expect(parseEnv(text)).toEqual(docker);
    for (const [name, value] of Object.entries(docker)) {
      expect(value, `${name}: a comment or a space in the value`).not.toMatch(/[#\s'"]/);
    }
  });

  it('riskgate.env.example shows defaults: a RISKGATE_ line uncommented changes nothing', () => {
    const shown = [...renderEnvExample().matchAll(/^# ?((?:RISKGATE|SANDBOX)_[A-Z0-9_]+)=(.+)$/gm)];
    expect(shown.length).toBeGreaterThan(20);
    const defaults = loadConfig({});
    for (const [, name, value] of shown) {
      expect(loadConfig({ [name!]: value! }), `${name}=${value}`).toEqual(defaults);
    }
  });
});
