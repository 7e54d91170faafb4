-- Up Migration
-- The trailing 24 h attempts and successes of each endpoint and application as running sums,
-- so that a recording updates a success rate by what it adds and what left the window since
-- the last one (sql/009-success-rates.sql, add_to_success_rates), instead of summing the whole
-- window of per-minute stats again. Summed again, the rate cost every recording up to 1,440
-- stats rows per endpoint of its batch and as many per application once an endpoint had a day
-- of steady traffic: record_attempts() took 1.77 ms per delivery in batches of 100 across 50
-- endpoints with a day of stats, 0.25 with none, and 0.26 with a day of stats and these sums
-- (bench/statement-costs.ts).
--
-- A row holds the sums of the endpoint's (application's) endpoint_attempt_stats rows whose
-- minute is after window_start. Rows are created by the first recording that needs them (from
-- the stats then); the hourly upkeep moves the window of those no recording touches, and
-- refresh_success_rates() recomputes them from the stats, for a DBA who edited the stats by hand
-- (the sums only know what recordings added).
create table endpoint_success_windows (
  endpoint_id text primary key references endpoints (id) on delete cascade,
  window_start timestamptz not null,
  attempts bigint not null,
  successes bigint not null
);

create table application_success_windows (
  application_id text primary key references applications (id) on delete cascade,
  window_start timestamptz not null,
  attempts bigint not null,
  successes bigint not null
);

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
