-- Up Migration
-- A worker shares its slots among organizations (sql/006-claim.sql,
-- src/worker/organization-share.ts): claim_deliveries and claim_next_deliveries take each
-- organization's share and holdings and return each delivery's organization, and
-- fetch_due_messages takes the organizations to pass over; sql/ creates them anew so. The old
-- signatures go, so that no call can reach a claim that shares nothing.
drop function if exists claim_next_deliveries(text, integer, integer, integer, bigint);
drop function if exists claim_next_deliveries(text, integer, integer, integer, bigint, text[]);
drop function if exists claim_deliveries(jsonb, integer, integer, bigint);
drop function if exists fetch_due_messages(text, integer);

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
