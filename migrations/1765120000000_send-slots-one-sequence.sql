-- Up Migration
-- The delivery rate limit is one sequence of slots per endpoint, spaced to absorb a late start
-- (sql/006-claim.sql): who took the latest slots no longer matters, so the owner, its guard and
-- the lead go. sql/ creates claim_deliveries(jsonb, integer, integer) and
-- take_send_slot(text, integer, integer).
drop function if exists claim_deliveries(jsonb, integer, text, integer, integer);
drop function if exists take_send_slot(text, text, integer, integer, integer);
alter table endpoint_send_slots drop column if exists owner, drop column if exists guard_until;

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
