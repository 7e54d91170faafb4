-- API keys as job creation confirms them (sql/005-accept-job.sql, accept_job_group) and as
-- authentication records their use (src/db/api-keys.ts).

-- Whether a key's use should be recorded now: at most once a minute per key, never for an expired key.
create or replace function api_key_use_due(p_last_used_at timestamptz, p_expired boolean) returns boolean
language sql stable as $$
  select not p_expired and (p_last_used_at is null or p_last_used_at < now() - interval '1 minute')
$$;

comment on function api_key_use_due(timestamptz, boolean) is
  'Whether a key''s use is recorded now (last_used_at): at most once a minute, never for an expired key.';

-- These keys as they are now (a key not returned no longer exists), their use recorded
-- (api_key_use_due). A key whose row another transaction holds is not recorded this time.
create or replace function confirm_api_keys(p_ids text[])
returns table (id text, scopes text[], expired boolean)
language plpgsql as $$
begin
  -- plpgsql, so that the statement keeps its plan for the session on any PostgreSQL version.
  return query
  with found as (
    select k.id, k.scopes, k.last_used_at, coalesce(k.expires_at <= now(), false) as expired
    from api_keys k where k.id = any(p_ids)
  ), touched as (
    update api_keys t set last_used_at = now()
    where t.id in (
      select k.id from api_keys k join found f on f.id = k.id
      where api_key_use_due(f.last_used_at, f.expired)
      for no key update of k skip locked)
    returning t.id
  )
  select f.id, f.scopes, f.expired from found f;
end;
$$;

comment on function confirm_api_keys(text[]) is
  'The keys with these ids as they are now (scopes, expired), recording their use at most once a minute each.';
