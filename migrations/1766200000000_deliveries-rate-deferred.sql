-- Up Migration
-- Whether a pending delivery waits for its endpoint's rate limit (a claim deferred it to a slot
-- past the claim's horizon) rather than for a retry. A raise of rate_limit_rps brings these
-- forward (sql/006-claim.sql, hasten_rate_deferred): a probe raised an endpoint from 1 to 100 per
-- second and its queued deliveries still came one a second, at the slots the old limit had given
-- them, while the API said the new limit applies from the next slot handed out. A retry's time
-- must not move, so the two had to be told apart. A constant default: no rewrite of the table.
alter table deliveries add column rate_deferred boolean not null default false;

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
