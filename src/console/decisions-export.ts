import type { DecisionFilter, DecisionReader, DecisionSummary } from '../decision-store/decision-query.ts';

/**
 * The Decisions page's filter exported whole, as CSV (a spreadsheet) or NDJSON (a script): the rows
 * the page counts, newest first, streamed page by page from the store so memory stays flat. An
 * export past {@link EXPORT_MAX_ROWS} is refused up front (narrow the filter) rather than cut short
 * without saying so.
 */

/** Most rows one export streams. */
export const EXPORT_MAX_ROWS = 100_000;

/** Rows read from the store per page while streaming. */
const PAGE_ROWS = 200;

export const EXPORT_FORMATS = {
  csv: 'text/csv; charset=utf-8',
  ndjson: 'application/x-ndjson',
} as const;
export type ExportFormat = keyof typeof EXPORT_FORMATS;

/** The columns of a row, in order: the CSV header and each line. */
const COLUMNS: readonly [string, (d: DecisionSummary) => string | number | boolean | undefined][] = [
  ['decisionId', (d) => d.decisionId],
  ['at', (d) => d.at],
  ['verdict', (d) => d.verdict],
  ['score', (d) => d.score],
  ['degraded', (d) => d.degraded],
  ['rules', (d) => d.rules.join(' ')],
  ['accountId', (d) => d.accountId],
  ['userId', (d) => d.userId],
  ['ip', (d) => d.ip],
  ['unitId', (d) => d.unitId],
  ['policy', (d) => d.policy.name],
  ['policyRevision', (d) => d.policy.revision],
  ['shadowVerdict', (d) => d.shadowVerdict],
  ['label', (d) => d.label],
  ['totalMs', (d) => d.totalMs],
];

/**
 * One CSV field. Quoted when it holds a quote, a comma or a line break; and a value a spreadsheet
 * would run as a formula (`=`, `+`, `-`, `@`, tab, CR first: an account id is the end user's text)
 * is prefixed with `'`, as OWASP's CSV-injection advice says. Numbers are left as they are.
 */
export function csvField(value: string | number | boolean | undefined): string {
  if (value === undefined) return '';
  if (typeof value !== 'string') return String(value);
  const safe = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe;
}

function line(format: ExportFormat, d: DecisionSummary): string {
  if (format === 'ndjson') return `${JSON.stringify(d)}\n`;
  return `${COLUMNS.map(([, of]) => csvField(of(d))).join(',')}\r\n`;
}

/** The export's body: the header (CSV), then every decision of `filter`, page by page. */
export function exportStream(
  reader: DecisionReader,
  filter: Omit<DecisionFilter, 'cursor' | 'limit'>,
  format: ExportFormat,
): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  let cursor: string | undefined;
  let started = false;
  let done = false;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (!started) {
        started = true;
        if (format === 'csv')
          controller.enqueue(encoder.encode(`${COLUMNS.map(([name]) => name).join(',')}\r\n`));
      }
      if (done) {
        controller.close();
        return;
      }
      try {
        const page = await reader.list({
          ...filter,
          limit: PAGE_ROWS,
          ...(cursor !== undefined && { cursor }),
        });
        const text = page.decisions.map((d) => line(format, d)).join('');
        if (text !== '') controller.enqueue(encoder.encode(text));
        cursor = page.nextCursor;
        done = cursor === undefined;
      } catch (error) {
        // Headers are sent: the broken stream is how the client learns the export is incomplete.
        controller.error(error);
      }
    },
  });
}
