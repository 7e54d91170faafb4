-- Rate limits counted in PostgreSQL, so a limit holds across any number of web processes.
-- Fixed windows aligned to the epoch: one upsert per request takes a place in the current
-- window of `p_key`. Error bound: within one window at most p_limit requests are admitted;
-- across a window boundary up to 2 * p_limit can pass in any p_period_seconds span.
-- p_at is the time of the request: this database's clock unless a caller (a test) pins it.
-- The counting, for several keys in one statement: p_counts[i] requests against p_keys[i] (each
-- key once), counters locked in key order so concurrent callers never deadlock. Answers each
-- key's count after this take (the requests it counted hold places count - n + 1 .. count of
-- the window), when the window resets and the seconds until then. The web process counts a
-- group of job creations with one call (src/db/rate-limits.ts takeRateLimits).
create or replace function count_rate_limits(p_keys text[], p_counts integer[], p_period_seconds integer,
                                             p_at timestamptz default clock_timestamp())
returns table (key text, count integer, reset_at timestamptz, retry_after integer)
language sql as $$
  with now as (
    select p_at as at,
           date_bin(p_period_seconds * interval '1 second', p_at, timestamptz '1970-01-01 00:00:00+00') as window_start
  ), taken as (
    insert into rate_limit_counters as c (key, window_start, count)
    select i.key, now.window_start, i.n from unnest(p_keys, p_counts) as i(key, n), now order by i.key
    on conflict (key) do update
      set count = case when c.window_start = excluded.window_start then c.count + excluded.count else excluded.count end,
          window_start = excluded.window_start
    returning c.key, c.count, c.window_start
  )
  select taken.key, taken.count,
         taken.window_start + p_period_seconds * interval '1 second',
         greatest(1, ceil(extract(epoch from taken.window_start + p_period_seconds * interval '1 second' - now.at)))::integer
  from taken, now;
$$;

comment on function count_rate_limits(text[], integer[], integer, timestamptz) is
  'Counts p_counts[i] requests against p_keys[i] in the fixed window of p_at (default now); answers each key''s count, when its window resets and the seconds until then.';

-- One request against one key: whether it is within p_limit and what remains.
create or replace function take_rate_limit(p_key text, p_limit integer, p_period_seconds integer,
                                           p_at timestamptz default clock_timestamp())
returns table (allowed boolean, remaining integer, reset_at timestamptz, retry_after integer)
language sql as $$
  select c.count <= p_limit, greatest(p_limit - c.count, 0), c.reset_at, c.retry_after
  from count_rate_limits(array[p_key], array[1], p_period_seconds, p_at) c;
$$;

comment on function take_rate_limit(text, integer, integer, timestamptz) is
  'Counts one request against key in the fixed window of p_at (default now); says whether it is within p_limit, what remains, and when the window resets.';
