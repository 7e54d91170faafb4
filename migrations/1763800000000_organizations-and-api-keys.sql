-- Up Migration

-- Tenants. Every tenant-owned row carries org_id (and, below the organization, an environment).
create table organizations (
  id text primary key constraint organizations_id_format_check check (id ~ '^org_[0-9A-Za-z]{27}$'),
  name text not null constraint organizations_name_length_check check (char_length(name) between 1 and 255),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

-- API keys are organization-wide; each still carries the environment it grants access to.
-- Only a SHA-256 hash of the key is stored; the value is shown once, at creation.
create table api_keys (
  id text primary key constraint api_keys_id_format_check check (id ~ '^key_[0-9A-Za-z]{27}$'),
  org_id text not null references organizations (id) on delete cascade,
  environment text not null constraint api_keys_environment_check check (environment in ('live', 'test')),
  name text not null constraint api_keys_name_length_check check (char_length(name) between 1 and 255),
  key_hash bytea not null constraint api_keys_key_hash_key unique
    constraint api_keys_key_hash_length_check check (octet_length(key_hash) = 32),
  prefix text not null constraint api_keys_prefix_check check (prefix ~ '^sk_(live|test)_[0-9A-Za-z]{4}$'),
  scopes text[] not null constraint api_keys_scopes_check check (
    cardinality(scopes) >= 1 and scopes <@ array[
      '*', 'webhooks:write', 'webhooks:read', 'endpoints:write', 'endpoints:read',
      'applications:write', 'applications:read', 'event-types:write', 'event-types:read',
      'api-keys:write', 'api-keys:read'
    ]::text[]),
  expires_at timestamptz,
  last_used_at timestamptz,
  created_at timestamptz not null default now(),
  constraint api_keys_prefix_environment_check check (prefix like 'sk_' || environment || '_%')
);

-- Serves the newest-first cursor listing of one organization's keys.
create index api_keys_org_id_created_at_id_idx on api_keys (org_id, created_at desc, id desc);

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
