/**
 * The RISKGATE_DECISION_LOG_REDACT setting: its default and its parser, owned by the configuration;
 * what each mode does to a log line is src/decision-log/log-redaction.ts.
 */

export type RedactionMode = 'drop' | 'hash' | 'truncate';

export interface RedactionRule {
  path: readonly string[];
  mode: RedactionMode;
}

/** The default: display names identify a person and no rule or replay needs them. */
export const DEFAULT_REDACTION = 'inputs.user.display_name:drop,inputs.devices.display_name:drop';

const MODES: ReadonlySet<string> = new Set(['drop', 'hash', 'truncate']);

/**
 * Parses `path:mode,path:mode`. Returns the rules, or a message naming the bad entry. `none` (or an
 * empty value) turns redaction off.
 */
export function parseRedaction(text: string): RedactionRule[] | string {
  const trimmed = text.trim();
  if (trimmed === '' || trimmed === 'none') return [];
  const rules: RedactionRule[] = [];
  for (const entry of trimmed.split(',')) {
    const [path, mode, extra] = entry.trim().split(':');
    if (
      !path ||
      !mode ||
      extra !== undefined ||
      !MODES.has(mode) ||
      !/^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*$/.test(path)
    ) {
      return `"${entry.trim().slice(0, 60)}" is not path:mode (mode drop, hash or truncate; e.g. request.ip:truncate)`;
    }
    rules.push({ path: path.split('.'), mode: mode as RedactionMode });
  }
  return rules;
}
