import { type Document, isMap, isPair, isScalar, isSeq, LineCounter, type Node, parseDocument } from 'yaml';
import type { PolicyIssue } from './policy-types.ts';

/**
 * YAML with positions: every issue the loader reports points at `file:line:col` of the value (or
 * key) at fault, and a CEL error points inside the expression, even in a block scalar.
 */

export interface YamlSource {
  file: string;
  text: string;
  doc: Document;
  lineCounter: LineCounter;
}

export type YamlPath = readonly (string | number)[];

export interface Position {
  line: number;
  col: number;
}

/** Parses `text`; syntax errors come back as issues (the document is then unusable). */
export function parseYamlSource(file: string, text: string): { source: YamlSource; issues: PolicyIssue[] } {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  const issues: PolicyIssue[] = [];
  for (const e of doc.errors) {
    const pos = e.linePos?.[0] ?? lineCounter.linePos(e.pos[0]);
    issues.push({ file, line: pos.line, col: pos.col, message: firstLine(e.message), severity: 'error' });
  }
  for (const w of doc.warnings) {
    const pos = w.linePos?.[0] ?? lineCounter.linePos(w.pos[0]);
    issues.push({ file, line: pos.line, col: pos.col, message: firstLine(w.message), severity: 'warning' });
  }
  return { source: { file, text, doc, lineCounter }, issues };
}

function firstLine(s: string): string {
  const i = s.indexOf('\n');
  return i < 0 ? s : s.slice(0, i);
}

/** The deepest existing node on `path` (the path is cut where the document ends). */
function nodeAt(src: YamlSource, path: YamlPath): Node | null {
  let node: unknown = src.doc.contents;
  for (const key of path) {
    if (isMap(node)) {
      const pair = node.items.find((p) => isPair(p) && isScalar(p.key) && p.key.value === key);
      if (!pair) break;
      node = pair.value;
    } else if (isSeq(node) && typeof key === 'number' && node.items[key] !== undefined) {
      node = node.items[key];
    } else break;
  }
  return (node as Node | null) ?? null;
}

/** Position of the value at `path`, or of the nearest existing ancestor. */
export function positionOf(src: YamlSource, path: YamlPath): Position {
  const node = nodeAt(src, path);
  const offset = node?.range?.[0] ?? 0;
  return src.lineCounter.linePos(offset);
}

/** Position of the key `key` inside the map at `path` (for unknown keys). */
export function positionOfKey(src: YamlSource, path: YamlPath, key: string): Position {
  const node = nodeAt(src, path);
  if (isMap(node)) {
    const pair = node.items.find((p) => isPair(p) && isScalar(p.key) && p.key.value === key);
    const k = pair?.key as Node | undefined;
    if (k?.range) return src.lineCounter.linePos(k.range[0]);
  }
  return positionOf(src, path);
}

/**
 * Position of character `offset` of the string value at `path`. The value is the source with
 * characters removed (quotes, block indicators, indentation) and line breaks folded to spaces, so
 * a greedy left-to-right alignment recovers each character's place in the file.
 */
export function positionInString(src: YamlSource, path: YamlPath, offset: number): Position {
  const node = nodeAt(src, path);
  if (!isScalar(node) || typeof node.value !== 'string' || !node.range) return positionOf(src, path);
  const value = node.value;
  const text = src.text;
  let j = node.range[0];
  const end = node.range[1];
  if (node.type === 'BLOCK_LITERAL' || node.type === 'BLOCK_FOLDED') {
    const nl = text.indexOf('\n', j);
    j = nl < 0 ? end : nl + 1;
  } else if (node.type === 'QUOTE_DOUBLE' || node.type === 'QUOTE_SINGLE') {
    j += 1;
  }
  const target = Math.min(Math.max(offset, 0), value.length);
  for (let i = 0; i < target && j < end; i++) {
    const c = value[i];
    while (j < end && text[j] !== c && !(c === ' ' && text[j] === '\n')) j++;
    j++;
  }
  const c = value[target];
  if (c !== undefined) while (j < end && text[j] !== c && !(c === ' ' && text[j] === '\n')) j++;
  return src.lineCounter.linePos(Math.min(j, end));
}
