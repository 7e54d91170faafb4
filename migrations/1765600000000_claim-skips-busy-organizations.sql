-- Up Migration
-- The claim returns each delivery's organization, and its fetch can pass over the messages of
-- organizations whose attempts hold more than their share of a worker's slots (sql/006-claim.sql,
-- src/worker/delivery-loop.ts): claim_deliveries and claim_next_deliveries return one more
-- column, claim_next_deliveries and fetch_due_messages take one more parameter, and sql/ creates
-- them anew so. The old signatures go, so that no call can reach a claim without them.
drop function if exists claim_next_deliveries(text, integer, integer, integer, bigint);
drop function if exists claim_deliveries(jsonb, integer, integer, bigint);
drop function if exists fetch_due_messages(text, integer);

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
