import { SETTING_GROUPS, SETTINGS, type Setting, type SettingGroup } from './settings.ts';

/**
 * riskgate.env.example and the README's configuration table, written from the settings table
 * (src/config/settings.ts) by `npm run docs:settings` (src/config/write-settings-documentation.ts);
 * test/config-documentation.test.ts fails when either drifts from it.
 */

/** Variables riskgate does not parse itself but documents beside its own: Node's and OpenTelemetry's. */
const OTHER_VARIABLES: { name: string; group: SettingGroup; example: string; doc?: string }[] = [
  {
    name: 'NODE_ENV',
    group: 'service',
    example: 'production',
    doc: 'Production refuses to start without a vendor (no sandbox)',
  },
  { name: 'OTEL_SERVICE_NAME', group: 'tracing', example: 'riskgate' },
  { name: 'OTEL_EXPORTER_OTLP_ENDPOINT', group: 'tracing', example: 'http://otel-collector:4318' },
  { name: 'OTEL_TRACES_EXPORTER', group: 'tracing', example: 'otlp', doc: 'Or console, or none' },
  { name: 'OTEL_TRACES_SAMPLER', group: 'tracing', example: 'parentbased_traceidratio' },
  { name: 'OTEL_TRACES_SAMPLER_ARG', group: 'tracing', example: '0.1' },
];

const OTEL_ROW =
  "| `OTEL_*` | off | | tracing is opt-in: `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_TRACES_EXPORTER=otlp` or `console`) turns it on; `OTEL_SERVICE_NAME` (default `riskgate`); sampling by `OTEL_TRACES_SAMPLER(_ARG)`. Each decision is a server span (continuing the caller's `traceparent`) and every vendor call a client span, both with HTTP semantic-convention attributes, whose W3C `traceparent` the call sends: the decision's signal, batch, Admin read and action calls in its trace; token refreshes and the Log API follower in traces of their own. `console` writes each span as a JSON line on stderr (stdout stays the decision log). Span URLs carry no user or device id (`/users/{userId}`) and no query, unless `RISKGATE_DECISION_LOG_REDACT` allows them: a `request.userId:hash` (or `request.deviceId:hash`) rule puts the log's `hmac:` value there, `none` the id itself; a rule on `request.userAgent` drops or hashes `user_agent.original`. Off, nothing touches OpenTelemetry |";

const ENV_EXAMPLE_HEADER = `# riskgate's configuration: every variable it reads, grouped by concept, with its default.
# Copy to riskgate.env, fill in the vendor section, and run:
#   docker run -p 8080:8080 --env-file riskgate.env riskgate
#   node --env-file=riskgate.env dist/main.js        (or: npx tsx --env-file=riskgate.env src/main.ts)
# Comments stand on lines of their own: docker's --env-file takes everything after the = as the
# value, a # included (node's --env-file would cut it there), so a comment after a value would
# become part of it. A variable left commented out takes its default; a RISKGATE_ one uncommented
# as shown sets that default. Any secret can instead be given as <NAME>_FILE, a path whose content
# is the value (as container platforms mount secrets). README "Configuration" says more about each.
# Generated from src/config/settings.ts by \`npm run docs:settings\`: edit the setting there, not
# here (test/config-documentation.test.ts fails when the two differ).
`;

export const README_BEGIN =
  '<!-- settings:begin: generated from src/config/settings.ts by `npm run docs:settings`; edit there -->';
export const README_END = '<!-- settings:end -->';

const entries = () => Object.entries(SETTINGS) as [string, Setting][];

/** `text` as `# ` comment lines of at most `width` characters. */
function commentLines(text: string, width = 100): string[] {
  const lines: string[] = [];
  let line = '#';
  for (const word of text.split(/\s+/)) {
    if (line.length > 1 && line.length + 1 + word.length > width) {
      lines.push(line);
      line = '#';
    }
    line += ` ${word}`;
  }
  lines.push(line);
  return lines;
}

function envComment(setting: Setting): string {
  const notes = [setting.unit, setting.secret ? 'secret' : undefined].filter((n) => n !== undefined);
  return notes.length === 0 ? setting.doc : `${setting.doc} (${notes.join('; ')})`;
}

/** riskgate.env.example, whole. */
export function renderEnvExample(): string {
  const blocks: string[] = [ENV_EXAMPLE_HEADER];
  for (const [group, title] of Object.entries(SETTING_GROUPS)) {
    const lines = [`# --- ${title} `.padEnd(96, '-')];
    const items: string[][] = [];
    for (const other of OTHER_VARIABLES.filter((o) => o.group === group)) {
      items.push([...(other.doc ? commentLines(other.doc) : []), `# ${other.name}=${other.example}`]);
    }
    for (const [name, setting] of entries().filter(([, s]) => s.group === group)) {
      const uncommented = setting.fillIn || setting.vendor === 'required';
      const line = `${uncommented ? '' : '# '}${name}=${setting.default ?? ''}`;
      items.push([...commentLines(envComment(setting)), line]);
    }
    if (items.length === 0) continue;
    lines.push(items.map((item) => item.join('\n')).join('\n\n'));
    blocks.push(lines.join('\n'));
  }
  return `${blocks.join('\n')}\n`;
}

const markdownText = (text: string) => text.replaceAll('<', '&lt;').replaceAll('>', '&gt;');

function readmeDefault(setting: Setting): string {
  if (setting.defaultText !== undefined) return setting.defaultText;
  if (setting.default !== undefined) return `\`${setting.default}\``;
  return setting.vendor === 'required' ? 'required' : 'none';
}

function readmeDescription(name: string, setting: Setting): string {
  const text = setting.details ?? markdownText(setting.doc);
  return setting.secret ? `${text}; secret (or in the file \`${name}_FILE\` names)` : text;
}

/** The README's configuration tables, one per group, between the markers. */
export function renderReadmeSettings(): string {
  const parts: string[] = [README_BEGIN];
  for (const [group, title] of Object.entries(SETTING_GROUPS)) {
    const rows = entries()
      .filter(([, s]) => s.group === group)
      .map(
        ([name, s]) =>
          `| \`${name}\` | ${readmeDefault(s)} | ${s.unit ?? ''} | ${readmeDescription(name, s)} |`,
      );
    if (group === 'tracing') rows.push(OTEL_ROW);
    if (rows.length === 0) continue;
    parts.push(`\n#### ${title}\n\n| variable | default | unit | |\n|---|---|---|---|\n${rows.join('\n')}`);
  }
  parts.push(README_END);
  return parts.join('\n');
}

/** `readme` with its configuration tables written anew between the markers. */
export function withReadmeSettings(readme: string): string {
  const begin = readme.indexOf(README_BEGIN);
  const end = readme.indexOf(README_END);
  if (begin < 0 || end < begin) {
    throw new Error(`README.md has no ${README_BEGIN} ... ${README_END} section to write the settings in`);
  }
  return readme.slice(0, begin) + renderReadmeSettings() + readme.slice(end + README_END.length);
}
