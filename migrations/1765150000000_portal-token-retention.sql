-- Up Migration

-- Retention (sql/013-retention.sql) deletes portal tokens that stopped working more than 7 days
-- ago; "stopped working" is the earlier of expires_at and revoked_at, this expression.
create index portal_tokens_ended_at_idx on portal_tokens (least(expires_at, coalesce(revoked_at, expires_at)));

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
