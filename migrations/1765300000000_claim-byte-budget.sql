-- Up Migration
-- The claim takes a budget of payload bytes (sql/006-claim.sql): claim_deliveries and
-- claim_next_deliveries gain a parameter, and sql/ creates them anew with it. The old
-- signatures go, so that no call can still reach a claim without a budget.
drop function if exists claim_next_deliveries(text, integer, integer, integer);
drop function if exists claim_deliveries(jsonb, integer, integer);

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
