-- Up Migration
-- take_rate_limit gained p_at (the time of the request, default clock_timestamp()), so tests pin
-- the window instead of sleeping to its boundary; sql/ creates the new one.
drop function if exists take_rate_limit(text, integer, integer);

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
