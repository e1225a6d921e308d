/**
 * Reading Markdown the way GitHub renders it, for the documentation tests: headings and their
 * anchors, and the links a reader can follow. Code fences and inline code are not Markdown.
 */

/** One line of a document outside code fences, with its 1-based number. */
interface ProseLine {
  text: string;
  line: number;
}

/** The lines of `markdown` outside fenced code blocks (``` or ~~~, indented or not). */
function proseLines(markdown: string): ProseLine[] {
  const lines: ProseLine[] = [];
  let fence: string | undefined;
  markdown.split('\n').forEach((text, i) => {
    const opener = /^\s*(`{3,}|~{3,})/.exec(text)?.[1];
    if (opener !== undefined && (fence === undefined || opener.startsWith(fence))) {
      fence = fence === undefined ? opener : undefined;
      return;
    }
    if (fence === undefined) lines.push({ text, line: i + 1 });
  });
  return lines;
}

/** GitHub's heading anchor: lower case, punctuation dropped, spaces as hyphens. */
export function headingAnchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The ATX headings of a document (outside code fences): level (1 for `#`) and text. */
export function markdownHeadings(markdown: string): { level: number; text: string }[] {
  return proseLines(markdown).flatMap(({ text }) => {
    const m = /^(#{1,6})\s+(.+?)\s*#*\s*$/.exec(text);
    return m ? [{ level: m[1]!.length, text: m[2]! }] : [];
  });
}

/** The anchors of a document's headings, one per heading, as written (repeats kept). */
export function headingAnchors(markdown: string): string[] {
  return markdownHeadings(markdown).map((h) => headingAnchor(h.text));
}

/** Every anchor a link into the document can name: GitHub suffixes a repeated one `-1`, `-2`. */
export function linkableAnchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const anchor of headingAnchors(markdown)) {
    const n = seen.get(anchor) ?? 0;
    anchors.add(n === 0 ? anchor : `${anchor}-${n}`);
    seen.set(anchor, n + 1);
  }
  return anchors;
}

/** A link of a document: where it points (as written) and the line it is on. */
export interface MarkdownLink {
  target: string;
  line: number;
}

/**
 * The links of a document outside code: inline `[text](target)` (also images) and reference
 * definitions `[label]: target`. Inline code spans are skipped, so `[a](b)` in backticks is text.
 */
export function markdownLinks(markdown: string): MarkdownLink[] {
  const links: MarkdownLink[] = [];
  const lines = proseLines(markdown);
  // Link text may wrap onto the next line: read each line with the one after it, keep matches
  // that start on the first.
  lines.forEach(({ text, line }, i) => {
    const next = lines[i + 1]?.line === line + 1 ? lines[i + 1]!.text : '';
    const prose = `${text}\n${next}`.replace(/`[^`\n]*`/g, (code) => ' '.repeat(code.length));
    for (const m of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      if (m.index! <= text.length) links.push({ target: m[1]!, line });
    }
    const definition = /^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s|$)/.exec(text);
    if (definition) links.push({ target: definition[1]!, line });
  });
  return links;
}
