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

-- A key's delete revokes the portal tokens it made (a leaked key revoked takes its links with
-- it), before the delete, while the tokens still name the key (its foreign key then sets
-- api_key_id to null). In SQL, so that a key deleted by hand does the same. A token never does
-- more than its key's scopes allow at the time of each request (src/api/middleware/auth.ts).
create or replace function api_keys_revoke_portal_tokens() returns trigger
language plpgsql as $$
begin
  update portal_tokens set revoked_at = now() where api_key_id = old.id and revoked_at is null;
  return old;
end;
$$;

comment on function api_keys_revoke_portal_tokens() is
  'Trigger: a deleted API key revokes the portal tokens it made.';

select ensure_trigger('api_keys', 'api_keys_revoke_portal_tokens', $trigger$
create or replace trigger api_keys_revoke_portal_tokens
  before delete on api_keys
  for each row execute function api_keys_revoke_portal_tokens()
$trigger$);
