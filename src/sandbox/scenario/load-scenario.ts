import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { InputError } from '../../errors/riskgate-error.ts';
import { type Scenario, type ScenarioInput, scenarioSchema } from './scenario-schema.ts';

/** The scenario shipped with the sandbox: the six demo accounts (docs/sandbox.md, "Demo accounts"). */
export const DEFAULT_SCENARIO_PATH = fileURLToPath(new URL('./default.yaml', import.meta.url));

/** An empty scenario: no users, no observations, no faults. */
export const EMPTY_SCENARIO: Scenario = scenarioSchema.parse({ name: 'empty' });

/** Parses scenario YAML (anchors and `<<` merge keys allowed); `source` names it in errors. */
export function parseScenario(text: string, source: string): Scenario {
  let raw: unknown;
  try {
    raw = parseYaml(text, { merge: true });
  } catch (err) {
    throw new InputError(`scenario ${source}: not valid YAML: ${(err as Error).message}`);
  }
  const parsed = scenarioSchema.safeParse(raw ?? {});
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => ({ field: i.path.join('.'), message: i.message }));
    const first = issues[0]!;
    throw new InputError(`scenario ${source}: ${first.field || '(root)'}: ${first.message}`, issues);
  }
  return parsed.data;
}

/** Loads `'default'`, `'empty'`, a YAML file path, or passes a Scenario object through (validated). */
export async function loadScenario(
  spec: 'default' | 'empty' | string | ScenarioInput | undefined,
): Promise<Scenario> {
  if (spec === undefined || spec === 'default') {
    return parseScenario(await readFile(DEFAULT_SCENARIO_PATH, 'utf8'), 'default');
  }
  if (spec === 'empty') return EMPTY_SCENARIO;
  if (typeof spec === 'string') return parseScenario(await readFile(spec, 'utf8'), spec);
  const parsed = scenarioSchema.safeParse(spec);
  if (!parsed.success) {
    const i = parsed.error.issues[0]!;
    throw new InputError(`scenario: ${i.path.join('.')}: ${i.message}`);
  }
  return parsed.data;
}
