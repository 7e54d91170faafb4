-- Up Migration

-- Definitions that sql/ replaced and that `create or replace` cannot: sql/ holds only the
-- current definitions (applied whenever they change), the history of what they replaced is
-- here. Each drop is a no-op on a database created after the change.

-- Deliveries are inserted only with their job, pending at attempt 0, which is the job's own
-- status at insert: refreshing the job there cost more than the rest of accepting a job.
drop trigger if exists deliveries_refresh_jobs_on_insert on deliveries;

-- release_held_deliveries gained p_limit (released in batches of 10,000).
drop function if exists release_held_deliveries(text[]);

-- claim_deliveries' result gained spacing_ms, which `create or replace` cannot add: the old one
-- goes, and sql/006-claim.sql creates the new one right after migrations (same start).
drop function if exists claim_deliveries(jsonb, integer, integer);

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
