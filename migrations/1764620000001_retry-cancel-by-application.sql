-- Up Migration

-- retry_webhook_job and cancel_webhook_job take the caller's application (a portal token's, or
-- null for an API key): `create or replace` cannot add a parameter to a function, so the
-- three-argument versions go here and sql/ creates the new ones right after migrations.
drop function if exists retry_webhook_job(text, text, text);
drop function if exists cancel_webhook_job(text, text, text);

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
