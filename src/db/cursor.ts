// Keyset pagination for newest-first cursor lists: (created_at, id) descending. The cursor
// carries created_at at full microsecond precision, so rows created in the same millisecond
// are neither skipped nor repeated, and stays valid when its row is deleted.
import { sql, type FragmentSqlToken } from 'slonik';

const AT = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/;

export type Cursor = { at: string; id: string };

/** A real instant PostgreSQL can hold: no 2026-02-30, no hour 99, no year 0. */
function isRealInstant(at: string): boolean {
  const millis = at.slice(0, 23);
  const date = new Date(`${millis}Z`);
  return millis >= '0001' && !Number.isNaN(date.getTime()) && date.toISOString().slice(0, 23) === millis;
}

/** Select this column as `cursor_at` in a cursor list query. */
export const cursorAtColumn = sql.fragment`to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as cursor_at`;

export function encodeCursor(row: { cursor_at: string; id: string }): string {
  return Buffer.from(JSON.stringify([row.cursor_at, row.id])).toString('base64url');
}

/** The decoded cursor, or null when it is not one of ours. */
export function decodeCursor(value: string, isValidId: (id: string) => boolean): Cursor | null {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'));
    if (!Array.isArray(parsed) || parsed.length !== 2) return null;
    const [at, id] = parsed as unknown[];
    if (typeof at !== 'string' || typeof id !== 'string' || !AT.test(at) || !isRealInstant(at) || !isValidId(id)) return null;
    return { at, id };
  } catch {
    return null;
  }
}

export function afterCursor(cursor: Cursor | null): FragmentSqlToken {
  return cursor ? sql.fragment`and (created_at, id) < (${cursor.at}::timestamptz, ${cursor.id})` : sql.fragment``;
}

/** Rows were fetched with `limit + 1`; the extra row only says there is a next page. */
export function cursorPage<R extends { cursor_at: string; id: string }>(rows: readonly R[], limit: number) {
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return {
    rows: page.map(({ cursor_at: _, ...rest }) => rest),
    nextCursor: rows.length > limit && last ? encodeCursor(last) : null,
  };
}
