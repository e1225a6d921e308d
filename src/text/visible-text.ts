/**
 * Untrusted text as a reader should see it: characters that would reorder or hide what surrounds
 * them on a page are named where they stood (`⟨U+202E⟩`) instead of obeyed. A user agent carrying a
 * right-to-left override would otherwise display reversed ("exe.gpj" read as "jpg.exe"); a C0 or
 * C1 control would be invisible. What is stored is never changed: this is for display only.
 */

/** Whether `code` reorders text (bidi embeddings, overrides, isolates, marks) or is a control. */
function isHidden(code: number): boolean {
  if (code < 0x20) return code !== 0x09 && code !== 0x0a && code !== 0x0d;
  if (code >= 0x7f && code <= 0x9f) return true;
  return (
    code === 0x061c ||
    code === 0x200e ||
    code === 0x200f ||
    (code >= 0x202a && code <= 0x202e) ||
    (code >= 0x2066 && code <= 0x2069)
  );
}

/** `text` with every reordering or control character replaced by its visible name. */
export function visibleText(text: string): string {
  let out: string | undefined;
  let from = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (!isHidden(code)) continue;
    out = `${out ?? ''}${text.slice(from, i)}⟨U+${code.toString(16).toUpperCase().padStart(4, '0')}⟩`;
    from = i + 1;
  }
  return out === undefined ? text : `${out}${text.slice(from)}`;
}
