-- Up Migration
-- Who took an endpoint's latest send slots (a worker's delivery loop): a claimant that follows
-- another one's slots leaves a gap after them, in which the other one's late starts fit.
-- guard_until: the owner's late starts (take_send_slot) end before it, so another claimant's
-- first slot lies the handoff gap after it too.
alter table endpoint_send_slots add column owner text, add column guard_until timestamptz;

-- claim_deliveries gained p_owner and p_handoff_ms and returns rate_limit_rps instead of
-- spacing_ms, and the job's event_type (the webhook-event-type header); sql/ creates the new one.
drop function if exists claim_deliveries(jsonb, integer, integer);

-- record_attempts also returns the circuit transitions of its batch (the worker logs them).
drop function if exists record_attempts(jsonb, integer, integer);

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
