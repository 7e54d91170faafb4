-- Up Migration
-- Late starts take their new rate-limit slots together, one query per endpoint and grace
-- (sql/006-claim.sql creates take_send_slots(text, integer, integer, integer)): the one-slot
-- function goes.
drop function if exists take_send_slot(text, integer, integer);

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
