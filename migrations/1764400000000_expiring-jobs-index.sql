-- Up Migration
-- Upkeep fails held deliveries whose job's 48 h window is over, every second. It joined every
-- held delivery to its job to find them, so an endpoint paused or disabled through a long
-- outage (the case held deliveries exist for) made that second-by-second query read its whole
-- backlog: 11 ms per run at 20,000 held deliveries, growing linearly. Unfinished jobs by expiry
-- find the few that expired instead.
create index webhook_jobs_open_expires_at_idx on webhook_jobs (expires_at)
  where status in ('created', 'executing', 'awaiting_retry');

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
