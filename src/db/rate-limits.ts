// Table rate_limit_counters, through take_rate_limit() (sql/014-rate-limits.sql).
import { sql, type CommonQueryMethods } from 'slonik';
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

const takenManyRow = z.object({ key: z.string(), count: z.number(), reset_at: z.string(), retry_after: z.number() });

/**
 * take_rate_limit's counting for several keys in one statement, `counts[i]` requests against
 * `keys[i]` (each key once; sorted, so concurrent callers lock the counters in one order), in
 * the caller's transaction. Answers each key's count after this take: the requests it counted
 * were places count - n + 1 .. count of the window.
 */
export async function takeRateLimits(
  db: CommonQueryMethods, keys: readonly string[], counts: readonly number[], periodSeconds: number, at?: Date,
) {
  const time = at ? sql.fragment`${at.toISOString()}::timestamptz` : sql.fragment`clock_timestamp()`;
  return db.any(sql.type(takenManyRow)`
    with now as (
      select ${time} as at
    ), input as (
      select i.key, i.n, date_bin(${periodSeconds} * interval '1 second', now.at, timestamptz '1970-01-01 00:00:00+00') as window_start
      from unnest(${sql.array(keys, 'text')}, ${sql.array(counts, 'int4')}) as i(key, n), now
    ), taken as (
      insert into rate_limit_counters as c (key, window_start, count)
      select key, window_start, n from input order by key
      on conflict (key) do update
        set count = case when c.window_start = excluded.window_start then c.count + excluded.count else excluded.count end,
            window_start = excluded.window_start
      returning c.key, c.count, c.window_start
    )
    select taken.key, taken.count, taken.window_start + ${periodSeconds} * interval '1 second' as reset_at,
           greatest(1, ceil(extract(epoch from taken.window_start + ${periodSeconds} * interval '1 second' - now.at)))::integer as retry_after
    from taken, now`);
}
