-- Up Migration

-- Application-scoped credentials behind portal links (decisions section 10): a bearer token
-- accepted by the /v1 API for one application only. Only a SHA-256 hash of the token is kept.
-- A token stops working at expires_at, when revoked_at is set, or when its application is
-- deleted (the application's deleted_at, checked at authentication).
create table portal_tokens (
  id bigint generated always as identity primary key,
  org_id text not null references organizations (id) on delete cascade,
  environment text not null constraint portal_tokens_environment_check check (environment in ('live', 'test')),
  application_id text not null references applications (id) on delete cascade,
  token_hash bytea not null constraint portal_tokens_token_hash_key unique,
  read_only boolean not null,
  expires_at timestamptz not null,
  revoked_at timestamptz,
  created_at timestamptz not null default now(),
  constraint portal_tokens_expires_at_check check (expires_at > created_at)
);

-- Revocation finds the application's tokens that still work.
create index portal_tokens_application_id_idx on portal_tokens (application_id) where revoked_at is null;

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
