// Table api_keys: typed queries, every one scoped to an organization (except the lookup by
// hash that authenticates a request).
import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { afterCursor, cursorAtColumn, cursorPage, type Cursor } from './cursor.ts';

export const apiKeyRow = z.object({
  id: z.string(),
  org_id: z.string(),
  name: z.string(),
  prefix: z.string(),
  environment: z.enum(['live', 'test']),
  scopes: z.array(z.string()),
  last_used_at: z.string().nullable(),
  expires_at: z.string().nullable(),
  created_at: z.string(),
});
export type ApiKeyRow = z.infer<typeof apiKeyRow>;

const columns = sql.fragment`id, org_id, name, prefix, environment, scopes, last_used_at, expires_at, created_at`;

export type NewApiKey = {
  id: string;
  orgId: string;
  environment: 'live' | 'test';
  name: string;
  keyHash: Buffer;
  prefix: string;
  scopes: readonly string[];
  expiresAt: string | null;
};

export async function insertApiKey(db: CommonQueryMethods, key: NewApiKey): Promise<ApiKeyRow> {
  return db.one(sql.type(apiKeyRow)`
    insert into api_keys (id, org_id, environment, name, key_hash, prefix, scopes, expires_at)
    values (${key.id}, ${key.orgId}, ${key.environment}, ${key.name}, ${sql.binary(key.keyHash)},
            ${key.prefix}, ${sql.array(key.scopes, 'text')}, ${key.expiresAt}::timestamptz)
    returning ${columns}`);
}

const authRow = z.object({
  id: z.string(),
  org_id: z.string(),
  environment: z.enum(['live', 'test']),
  scopes: z.array(z.string()),
  expired: z.boolean(),
});
export type AuthRow = z.infer<typeof authRow>;

/** Whether a key `found` should have its use recorded: at most once a minute per key, never for an expired key (sql/022-api-keys.sql). */
const useDue = sql.fragment`api_key_use_due(found.last_used_at, found.expired)`;

/** The key with this hash, in one round trip that also records its use (useDue). */
export async function findApiKeyByHash(db: CommonQueryMethods, keyHash: Buffer): Promise<AuthRow | null> {
  return db.maybeOne(sql.type(authRow)`
    with found as (
      select id, org_id, environment, scopes, last_used_at,
             coalesce(expires_at <= now(), false) as expired
      from api_keys where key_hash = ${sql.binary(keyHash)}
    ), touched as (
      update api_keys set last_used_at = now()
      from found
      where api_keys.id = found.id and ${useDue}
      returning api_keys.id
    )
    select id, org_id, environment, scopes, expired from found`);
}

const confirmedRow = z.object({ id: z.string(), scopes: z.array(z.string()), expired: z.boolean() });
export type ConfirmedKey = z.infer<typeof confirmedRow>;

/**
 * These keys as they are now (a key that is gone has no row), their use recorded as
 * findApiKeyByHash records it (confirm_api_keys, sql/022-api-keys.sql). For the transaction that
 * writes on the keys' behalf (the grouped job accept), so a key deleted or narrowed before this
 * reads it is refused, as a lookup would refuse it. The record skips rows another transaction
 * has locked: groups never wait for, or deadlock on, each other's keys.
 */
export async function confirmApiKeys(db: CommonQueryMethods, ids: readonly string[]): Promise<readonly ConfirmedKey[]> {
  return db.any(sql.type(confirmedRow)`select id, scopes, expired from confirm_api_keys(${sql.array(ids, 'text')})`);
}

/** A key's expiry, its row held (`for share`) until the caller's transaction ends: no other request changes it meanwhile. */
export async function lockApiKeyLifetime(db: CommonQueryMethods, orgId: string, id: string): Promise<{ expires_at: string | null } | null> {
  return db.maybeOne(sql.type(z.object({ expires_at: z.string().nullable() }))`
    select expires_at from api_keys where org_id = ${orgId} and id = ${id} for share`);
}

export async function findApiKey(db: CommonQueryMethods, orgId: string, id: string): Promise<ApiKeyRow | null> {
  return db.maybeOne(sql.type(apiKeyRow)`
    select ${columns} from api_keys where org_id = ${orgId} and id = ${id}`);
}

export async function listApiKeys(
  db: CommonQueryMethods,
  orgId: string,
  options: { limit: number; cursor: Cursor | null; environment: 'live' | 'test' | undefined },
) {
  const rows = await db.any(sql.type(apiKeyRow.extend({ cursor_at: z.string() }))`
    select ${columns}, ${cursorAtColumn}
    from api_keys
    where org_id = ${orgId}
      ${options.environment ? sql.fragment`and environment = ${options.environment}` : sql.fragment``}
      ${afterCursor(options.cursor)}
    order by created_at desc, id desc
    limit ${options.limit + 1}`);
  return cursorPage(rows, options.limit);
}

export type ApiKeyPatch = { name?: string; scopes?: readonly string[]; expiresAt?: string | null };

/**
 * `holdingOnly`: the scopes the caller may grant; the key is changed (or deleted) only while it
 * holds none beyond them, in the statement that writes, so a key widened by another request
 * after the caller's check is left alone (null). Absent: any key.
 */
const withinScopes = (holdingOnly: readonly string[] | undefined) =>
  (holdingOnly === undefined ? sql.fragment`` : sql.fragment`and scopes <@ ${sql.array(holdingOnly, 'text')}`);

/**
 * `expiringBy`: the caller's expiry as read (to the millisecond, as every timestamp is); the key
 * is changed (or deleted) only while it expires by then, in the writing statement, as
 * withinScopes. Compared to the millisecond: an expiry written in SQL with microseconds is
 * still the caller's own. Null or absent: any key.
 */
const withinLifetime = (expiringBy: string | null | undefined) =>
  (expiringBy == null ? sql.fragment`` : sql.fragment`and date_trunc('milliseconds', expires_at) <= ${expiringBy}::timestamptz`);

export async function updateApiKey(
  db: CommonQueryMethods, orgId: string, id: string, patch: ApiKeyPatch, holdingOnly?: readonly string[], expiringBy?: string | null,
): Promise<ApiKeyRow | null> {
  const sets = [
    patch.name !== undefined ? sql.fragment`name = ${patch.name}` : null,
    patch.scopes !== undefined ? sql.fragment`scopes = ${sql.array(patch.scopes, 'text')}` : null,
    patch.expiresAt !== undefined ? sql.fragment`expires_at = ${patch.expiresAt}::timestamptz` : null,
  ].filter((s) => s !== null);
  if (sets.length === 0) return findApiKey(db, orgId, id);
  return db.maybeOne(sql.type(apiKeyRow)`
    update api_keys set ${sql.join(sets, sql.fragment`, `)}
    where org_id = ${orgId} and id = ${id} ${withinScopes(holdingOnly)} ${withinLifetime(expiringBy)}
    returning ${columns}`);
}

const deletedRow = z.object({ id: z.string(), deleted_at: z.string() });

/** API keys are deleted for good: the very next request with the key is a 401. */
export async function deleteApiKey(
  db: CommonQueryMethods, orgId: string, id: string, holdingOnly?: readonly string[], expiringBy?: string | null,
) {
  return db.maybeOne(sql.type(deletedRow)`
    delete from api_keys where org_id = ${orgId} and id = ${id} ${withinScopes(holdingOnly)} ${withinLifetime(expiringBy)}
    returning id, now() as deleted_at`);
}
