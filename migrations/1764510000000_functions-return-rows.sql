-- Up Migration

-- accept_webhook_job returns one row per delivery to enqueue instead of the arrays delivery_ids
-- and rounds, and record_attempts also returns the circuits it changed: `create or replace`
-- cannot change a function's result, so the old ones go here and sql/ creates the new ones
-- right after migrations, in the same start.
drop function if exists accept_webhook_job(text, text, text, text, text, text, bigint, boolean, text, text, jsonb, text);
drop function if exists record_attempts(jsonb, integer, integer);

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
