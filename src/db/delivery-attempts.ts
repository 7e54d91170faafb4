// Table delivery_attempts, read as an endpoint's attempt log (GET /v1/endpoints/{id}/attempts):
// newest first by (attempted_at, id), a keyset cursor on both, so a page never repeats or skips
// an attempt that was recorded before the first page was read. Rows are written by
// record_attempts (sql/008-record-attempts.sql) only.
import { sql, type CommonQueryMethods, type FragmentSqlToken } from 'slonik';
import { z } from 'zod';
import { encodeCursor, type Cursor } from './cursor.ts';

/** One attempt as the API's delivery record shows it (decisions section 7). */
export const attemptRecordRow = z.object({
  endpoint_id: z.string(),
  attempt: z.number(),
  status_code: z.number().nullable(),
  response_body: z.string(),
  latency_ms: z.number(),
  attempted_at: z.string(),
  success: z.boolean(),
  error: z.string().nullable(),
});

/** An endpoint's attempt log item: the delivery record and its job. */
export const endpointAttemptRow = attemptRecordRow.extend({ job_id: z.string(), event_type: z.string() });

export type AttemptFilters = {
  status?: 'succeeded' | 'failed'; eventType?: string; since?: string; until?: string;
};

/** A cursor's id part is the attempt's row number. */
export const isAttemptCursorId = (id: string) => /^[1-9]\d{0,17}$/.test(id);

export type AttemptPage = AttemptFilters & { limit: number; cursor: Cursor | null };

/** The query of one page (exported so a test can EXPLAIN exactly this statement). */
export function endpointAttemptsQuery(endpointId: string, options: AttemptPage): FragmentSqlToken {
  const conditions = [
    sql.fragment`a.endpoint_id = ${endpointId}`,
    options.status === 'succeeded' ? sql.fragment`a.success` : null,
    options.status === 'failed' ? sql.fragment`not a.success` : null,
    options.eventType !== undefined ? sql.fragment`a.event_type = ${options.eventType}` : null,
    options.since !== undefined ? sql.fragment`a.attempted_at >= ${options.since}::timestamptz` : null,
    options.until !== undefined ? sql.fragment`a.attempted_at < ${options.until}::timestamptz` : null,
    options.cursor ? sql.fragment`(a.attempted_at, a.id) < (${options.cursor.at}::timestamptz, ${options.cursor.id}::bigint)` : null,
  ].filter((c) => c !== null);
  return sql.fragment`
    select a.id::text as id,
           to_char(a.attempted_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as cursor_at,
           a.job_id, a.event_type, a.endpoint_id, a.attempt, a.status_code,
           a.response_body, a.latency_ms, a.attempted_at, a.success, a.error
    from delivery_attempts a
    where ${sql.join(conditions, sql.fragment` and `)}
    order by a.attempted_at desc, a.id desc
    limit ${options.limit + 1}`;
}

/**
 * One page of the endpoint's attempts (the endpoint already checked to be the tenant's). Each
 * filter has an index that keeps the walk short (migration 1764700000000): status=failed the
 * partial index of failures, event_type the (endpoint_id, event_type, attempted_at, id) one,
 * everything else (endpoint_id, attempted_at, id).
 */
export async function listEndpointAttempts(db: CommonQueryMethods, endpointId: string, options: AttemptPage) {
  const rows = await db.any(sql.type(endpointAttemptRow.extend({ cursor_at: z.string(), id: z.string() }))`
    ${endpointAttemptsQuery(endpointId, options)}`);
  const page = rows.slice(0, options.limit);
  const last = page[page.length - 1];
  return {
    rows: page.map(({ cursor_at: _, id: __, ...rest }) => rest),
    nextCursor: rows.length > options.limit && last ? encodeCursor(last) : null,
  };
}
