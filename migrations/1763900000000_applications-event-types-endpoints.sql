-- Up Migration

-- An organization's customers. Soft-deleted: deleted_at set, uid freed, endpoints follow.
create table applications (
  id text primary key constraint applications_id_format_check check (id ~ '^app_[0-9A-Za-z]{27}$'),
  org_id text not null references organizations (id) on delete cascade,
  environment text not null constraint applications_environment_check check (environment in ('live', 'test')),
  name text not null constraint applications_name_length_check check (char_length(name) between 1 and 255),
  uid text constraint applications_uid_format_check check (uid ~ '^[A-Za-z0-9_-]+$' and char_length(uid) <= 256),
  metadata jsonb not null default '{}' constraint applications_metadata_object_check check (jsonb_typeof(metadata) = 'object'),
  endpoints_count integer not null default 0 constraint applications_endpoints_count_check check (endpoints_count >= 0),
  webhook_jobs_count bigint not null default 0 constraint applications_webhook_jobs_count_check check (webhook_jobs_count >= 0),
  success_rate numeric(5, 2) not null default 100 constraint applications_success_rate_check check (success_rate between 0 and 100),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  deleted_at timestamptz
);

-- A uid is unique among the live applications of one organization and environment.
create unique index applications_org_id_environment_uid_key
  on applications (org_id, environment, uid) where deleted_at is null and uid is not null;
create index applications_org_id_environment_created_at_id_idx
  on applications (org_id, environment, created_at desc, id desc) where deleted_at is null;

-- Caller-defined event types. Deleted for good (a deleted name may be created again).
create table event_types (
  id text primary key constraint event_types_id_format_check check (id ~ '^evt_[0-9A-Za-z]{27}$'),
  org_id text not null references organizations (id) on delete cascade,
  environment text not null constraint event_types_environment_check check (environment in ('live', 'test')),
  name text not null constraint event_types_name_format_check
    check (char_length(name) <= 255 and name ~ '^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$'),
  description text constraint event_types_description_length_check check (char_length(description) <= 1024),
  schema jsonb constraint event_types_schema_object_check check (jsonb_typeof(schema) = 'object'),
  subscriber_count integer not null default 0 constraint event_types_subscriber_count_check check (subscriber_count >= 0),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  constraint event_types_org_id_environment_name_key unique (org_id, environment, name)
);

create index event_types_org_id_environment_created_at_id_idx
  on event_types (org_id, environment, created_at desc, id desc);

-- Destinations of an application. Soft-deleted like applications.
create table endpoints (
  id text primary key constraint endpoints_id_format_check check (id ~ '^ep_[0-9A-Za-z]{27}$'),
  org_id text not null references organizations (id) on delete cascade,
  environment text not null constraint endpoints_environment_check check (environment in ('live', 'test')),
  application_id text not null references applications (id) on delete cascade,
  url text not null constraint endpoints_url_length_check check (char_length(url) <= 2048),
  status text not null default 'active' constraint endpoints_status_check check (status in ('active', 'paused', 'disabled')),
  headers jsonb not null default '{}' constraint endpoints_headers_object_check check (jsonb_typeof(headers) = 'object'),
  rate_limit_rps integer not null default 100 constraint endpoints_rate_limit_rps_check check (rate_limit_rps between 1 and 10000),
  timeout_ms integer not null default 30000 constraint endpoints_timeout_ms_check check (timeout_ms between 1000 and 120000),
  secret text not null constraint endpoints_secret_format_check check (secret ~ '^whsec_[0-9a-f]{64}$'),
  secret_version integer not null default 1 constraint endpoints_secret_version_check check (secret_version >= 1),
  -- The previous secret stays valid for signing until old_secret_expires_at (one rotation back).
  old_secret text constraint endpoints_old_secret_format_check check (old_secret ~ '^whsec_[0-9a-f]{64}$'),
  old_secret_expires_at timestamptz,
  failure_count integer not null default 0 constraint endpoints_failure_count_check check (failure_count >= 0),
  disabled_at timestamptz,
  success_rate numeric(5, 2) not null default 100 constraint endpoints_success_rate_check check (success_rate between 0 and 100),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  deleted_at timestamptz,
  constraint endpoints_old_secret_check check ((old_secret is null) = (old_secret_expires_at is null)),
  constraint endpoints_disabled_at_check check ((status = 'disabled') = (disabled_at is not null))
);

create index endpoints_application_id_created_at_id_idx
  on endpoints (application_id, created_at desc, id desc) where deleted_at is null;

-- Which live endpoint subscribes to which event type: one row per subscription. A row exists
-- only while its endpoint is not deleted, so subscriber counts are plain row counts.
create table endpoint_event_types (
  endpoint_id text not null references endpoints (id) on delete cascade,
  event_type_id text not null references event_types (id),
  org_id text not null references organizations (id) on delete cascade,
  created_at timestamptz not null default now(),
  constraint endpoint_event_types_pkey primary key (endpoint_id, event_type_id)
);

create index endpoint_event_types_event_type_id_idx on endpoint_event_types (event_type_id);

-- Down Migration
-- Forward-only: migrations are never rolled back in production.
