-- Rate limits counted in PostgreSQL, so a limit holds across any number of web processes.
-- Fixed windows aligned to the epoch: one upsert per request takes a place in the current
-- window of `p_key`. Error bound: within one window at most p_limit requests are admitted;
-- across a window boundary up to 2 * p_limit can pass in any p_period_seconds span.
-- p_at is the time of the request: this database's clock unless a caller (a test) pins it.
create or replace function take_rate_limit(p_key text, p_limit integer, p_period_seconds integer,
                                           p_at timestamptz default clock_timestamp())
returns table (allowed boolean, remaining integer, reset_at timestamptz, retry_after integer)
language sql as $$
  with now as (
    select p_at as at,
           date_bin(p_period_seconds * interval '1 second', p_at, timestamptz '1970-01-01 00:00:00+00') as window_start
  ), taken as (
    insert into rate_limit_counters as c (key, window_start, count)
    select p_key, now.window_start, 1 from now
    on conflict (key) do update
      set count = case when c.window_start = excluded.window_start then c.count + 1 else 1 end,
          window_start = excluded.window_start
    returning c.count, c.window_start
  )
  select taken.count <= p_limit,
         greatest(p_limit - taken.count, 0),
         taken.window_start + p_period_seconds * interval '1 second',
         greatest(1, ceil(extract(epoch from taken.window_start + p_period_seconds * interval '1 second' - now.at)))::integer
  from taken, now;
$$;

comment on function take_rate_limit(text, integer, integer, timestamptz) is
  'Counts one request against key in the fixed window of p_at (default now); says whether it is within p_limit, what remains, and when the window resets.';
