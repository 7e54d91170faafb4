-- Up Migration
-- A portal token does no more than the API key that made its link may do (decisions section
-- 4: no key hands out more than it holds): its tokens keep the key's id, so that each request
-- of a token is checked against the key's scopes as they are then, deleting the key revokes its
-- tokens (a trigger in sql/022-api-keys.sql), and a token stops working when its key expires.
-- A key with applications:write alone could otherwise hand out its applications' endpoints and
-- jobs, secrets included, for up to 7 days past its own end. Tokens made before this release
-- name no key and work as they did.
alter table portal_tokens add column api_key_id text references api_keys (id) on delete set null;

-- The key's delete and scope changes find its tokens.
create index portal_tokens_api_key_id_idx on portal_tokens (api_key_id) where api_key_id is not null;

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
