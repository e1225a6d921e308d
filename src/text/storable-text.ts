import { z } from 'zod';

/**
 * What riskgate refuses at the edge in text it keeps (a note, a reason, a list value, an id an
 * operator types) or hands to a database query: characters a database refuses or that corrupt
 * what a reader sees. PostgreSQL refuses U+0000 in `text` ("invalid byte sequence ... 0x00") and
 * a lone surrogate (not UTF-8 at all); one such row once halted a batch writer for everyone. The
 * other control characters (C0, DEL, C1) are stored, but they rewrite a terminal or a log reader's
 * screen and hide what an audit entry says. Refused, they are a 400 naming the field; nothing of
 * the request is kept.
 *
 * Two kinds: a *line* (a value, an id, a name: no control character at all) and a *text* (a note,
 * a reason: tab, line feed and carriage return are how people write those, so they pass).
 */

/** Tab, line feed, carriage return: what a multi-line text legitimately holds. */
const TEXT_WHITESPACE = new Set([0x09, 0x0a, 0x0d]);

/** Whether `code` (a UTF-16 code unit) is a C0 control, DEL or a C1 control. */
function isControl(code: number): boolean {
  return code < 0x20 || (code >= 0x7f && code <= 0x9f);
}

function codePoint(code: number): string {
  return `U+${code.toString(16).toUpperCase().padStart(4, '0')}`;
}

/**
 * Why `text` cannot be stored, as the end of a field's message ("must not contain ..."); undefined
 * when it can. `multiLine`: tab, line feed and carriage return pass (a note, a reason).
 */
export function unstorableReason(text: string, multiLine: boolean): string | undefined {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (isControl(code) && !(multiLine && TEXT_WHITESPACE.has(code))) {
      return `must not contain control characters (${codePoint(code)} at character ${i + 1})`;
    }
    if (code >= 0xd800 && code <= 0xdfff) {
      const pair = code <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00;
      if (!pair) {
        return `must not contain a lone surrogate (${codePoint(code)} at character ${i + 1}): it is not UTF-8`;
      }
      i++;
    }
  }
  return undefined;
}

function storable(multiLine: boolean) {
  return z.string().superRefine((text, ctx) => {
    const reason = unstorableReason(text, multiLine);
    if (reason !== undefined) ctx.addIssue({ code: 'custom', message: reason, input: text });
  });
}

/**
 * A string riskgate keeps on one line (a list value, an id, a filter): no control character, no
 * lone surrogate. Chain `.trim()`, `.min()`, `.max()` after it as on `z.string()`.
 */
export function storableLine() {
  return storable(false);
}

/**
 * A string riskgate keeps as free text (a note, a reason): tab, line feed and carriage return
 * pass; any other control character and a lone surrogate do not.
 */
export function storableText() {
  return storable(true);
}
