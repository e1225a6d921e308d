/**
 * The members of a JSON object found in its bytes without parsing their values: where each key and
 * value starts and ends, so replay parses only the values a candidate reads (replay-record.ts). A
 * value passed over is checked only for balance (its strings closed, its brackets matched), not
 * parsed. Strict about the layout `JSON.stringify` writes (no whitespace, no escape in a key): any
 * other layout gives up, and the caller parses the line as a whole.
 */

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;

/** Deepest nesting a passed-over value may have (a decision's inputs nest about 6 deep). */
const MAX_DEPTH = 64;
const closers = new Uint8Array(MAX_DEPTH);

/** A member: its key's bytes `[keyStart, keyEnd)` (between the quotes), its value's `[valueStart, valueEnd)`. */
export type OnMember = (keyStart: number, keyEnd: number, valueStart: number, valueEnd: number) => void;

/** Just past the string whose opening quote is at `i`, or -1 when it does not close before `end`. */
function skipString(buf: Uint8Array, i: number, end: number): number {
  for (let j = i + 1; j < end; j++) {
    const c = buf[j];
    if (c === QUOTE) return j + 1;
    if (c === BACKSLASH) j++;
  }
  return -1;
}

/** Just past the value starting at `i`, or -1 when it is not balanced before `end`. */
export function skipValue(buf: Uint8Array, i: number, end: number): number {
  const first = buf[i];
  if (first === QUOTE) return skipString(buf, i, end);
  if (first !== OPEN_OBJECT && first !== OPEN_ARRAY) {
    // A number, true, false or null: up to the byte that ends it.
    let j = i;
    while (j < end && buf[j] !== COMMA && buf[j] !== CLOSE_OBJECT && buf[j] !== CLOSE_ARRAY) j++;
    return j > i ? j : -1;
  }
  let depth = 0;
  for (let j = i; j < end; j++) {
    const c = buf[j];
    if (c === QUOTE) {
      j = skipString(buf, j, end) - 1;
      if (j < 0) return -1;
    } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (depth === MAX_DEPTH) return -1;
      closers[depth++] = c === OPEN_OBJECT ? CLOSE_OBJECT : CLOSE_ARRAY;
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      if (depth === 0 || closers[--depth] !== c) return -1;
      if (depth === 0) return j + 1;
    }
  }
  return -1;
}

/**
 * Each member of the object whose `{` is at `buf[from]`, to `onMember`, in order. Returns the index
 * just past the object's `}`, or -1 when the bytes before `end` are not such an object.
 */
export function scanObject(buf: Uint8Array, from: number, end: number, onMember: OnMember): number {
  if (buf[from] !== OPEN_OBJECT) return -1;
  let i = from + 1;
  if (buf[i] === CLOSE_OBJECT) return i + 1;
  for (;;) {
    if (i >= end || buf[i] !== QUOTE) return -1;
    let k = i + 1;
    while (k < end && buf[k] !== QUOTE && buf[k] !== BACKSLASH) k++;
    if (k >= end || buf[k] !== QUOTE || buf[k + 1] !== COLON) return -1;
    const valueEnd = skipValue(buf, k + 2, end);
    if (valueEnd === -1) return -1;
    onMember(i + 1, k, k + 2, valueEnd);
    const next = buf[valueEnd];
    if (next === CLOSE_OBJECT) return valueEnd + 1;
    if (next !== COMMA) return -1;
    i = valueEnd + 1;
  }
}

/**
 * Just past the object or array whose opening bracket is at `text[i]`, or -1 when it is not one or
 * not balanced (its strings closed, its brackets matched): `skipValue` over a decoded line.
 */
export function skipNested(text: string, i: number): number {
  const first = text.charCodeAt(i);
  if (first !== OPEN_OBJECT && first !== OPEN_ARRAY) return -1;
  let depth = 0;
  for (let j = i; j < text.length; j++) {
    const c = text.charCodeAt(j);
    if (c === QUOTE) {
      for (j++; j < text.length; j++) {
        const d = text.charCodeAt(j);
        if (d === QUOTE) break;
        if (d === BACKSLASH) j++;
      }
    } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (depth === MAX_DEPTH) return -1;
      closers[depth++] = c === OPEN_OBJECT ? CLOSE_OBJECT : CLOSE_ARRAY;
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      if (closers[--depth] !== c) return -1;
      if (depth === 0) return j + 1;
    }
  }
  return -1;
}
