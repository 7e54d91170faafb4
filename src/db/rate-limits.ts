// Table rate_limit_counters, through take_rate_limit() (sql/014-rate-limits.sql).
import { sql, type CommonQueryMethods, type FragmentSqlToken } from 'slonik';
import { z } from 'zod';

const takenRow = z.object({ allowed: z.boolean(), remaining: z.number(), reset_at: z.string(), retry_after: z.number() });
export type Taken = z.infer<typeof takenRow>;

/**
 * One statement: counts this request against `key` and says whether it is within `limit`. `at`
 * is the time of the request: the database's clock when absent (production), pinned by tests.
 */
export async function takeRateLimit(
  db: CommonQueryMethods, key: string, limit: number, periodSeconds: number, at?: Date,
): Promise<Taken> {
  const time = at ? sql.fragment`, ${at.toISOString()}::timestamptz` : sql.fragment``;
  return db.one(sql.type(takenRow)`select * from take_rate_limit(${key}, ${limit}, ${periodSeconds}${time})`);
}

export const takenManyRow = z.object({ key: z.string(), count: z.number(), reset_at: z.string(), retry_after: z.number() });
/** A counter's count after a take of several requests (count_rate_limits). */
export type CounterCount = z.infer<typeof takenManyRow>;

/**
 * Several keys counted in one statement (count_rate_limits in sql/014-rate-limits.sql, which
 * take_rate_limit uses for one): `counts[i]` requests against `keys[i]` (each key once), in the
 * caller's transaction. Answers each key's count after this take: the requests it counted were
 * places count - n + 1 .. count of the window.
 */
export async function takeRateLimits(
  db: CommonQueryMethods, keys: readonly string[], counts: readonly number[], periodSeconds: number, at?: Date,
) {
  const time = at ? sql.fragment`, ${at.toISOString()}::timestamptz` : sql.fragment``;
  return db.any(sql.type(takenManyRow)`
    select * from count_rate_limits(${sql.array(keys, 'text')}, ${sql.array(counts, 'int4')}, ${periodSeconds}${time})`);
}
