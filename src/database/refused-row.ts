/**
 * Whether the database refused the data itself (retrying it can only fail again), not the
 * connection or the disk: PostgreSQL's classes 22 (data exception: "invalid byte sequence ...
 * 0x00"), 23 (integrity constraint) and 54 (a value past a limit); SQLite's SQLITE_TOOBIG,
 * SQLITE_CONSTRAINT, SQLITE_MISMATCH and SQLITE_RANGE.
 */
export function isRefusedRow(error: unknown): boolean {
  const e = error as { code?: unknown; errcode?: unknown } | undefined;
  if (typeof e?.code === 'string' && /^(22|23|54)[0-9A-Z]{3}$/.test(e.code)) return true;
  if (typeof e?.errcode === 'number') return [18, 19, 20, 25].includes(e.errcode & 0xff);
  return false;
}
