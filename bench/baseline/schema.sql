-- The baseline's tables (bench/baseline/README.md): what a team would write for the same
-- scenario, in a database of its own; pg-boss makes its own schema there at start.
create table api_keys (key_hash text primary key, org_id text not null);
create table applications (id text primary key, org_id text not null);
create table endpoints (
  id text primary key, application_id text not null references applications, url text not null,
  secret text not null, event_types text[] not null
);
create index on endpoints (application_id);
create table jobs (
  id text primary key, application_id text not null references applications, event_type text not null,
  payload jsonb not null, created_at timestamptz not null default now()
);
create table attempts (
  id bigserial primary key, job_id text not null references jobs, endpoint_id text not null references endpoints,
  status_code integer, success boolean not null, attempted_at timestamptz not null default now()
);
