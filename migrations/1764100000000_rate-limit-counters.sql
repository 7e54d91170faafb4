-- Up Migration

-- Fixed-window request counters for rate limits (decisions section 9): one row per limited
-- key (e.g. 'jobs:org_…'), holding the current window and its count. UNLOGGED: counters
-- may reset after a crash of PostgreSQL, which only grants one fresh window early.
create unlogged table rate_limit_counters (
  key text primary key,
  window_start timestamptz not null,
  count integer not null constraint rate_limit_counters_count_check check (count >= 1)
);

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
