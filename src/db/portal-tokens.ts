// Table portal_tokens: application-scoped bearer tokens behind portal links, stored as hashes.
import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { ownedBy, type Tenant } from './tenant.ts';

export async function insertPortalToken(
  db: CommonQueryMethods,
  tenant: Tenant,
  token: { applicationId: string; apiKeyId: string; tokenHash: Buffer; readOnly: boolean; expiresInSeconds: number },
): Promise<{ expires_at: string } | null> {
  // Never past the end of the key that makes it (least() passes over a key's null expiry). No
  // row when the key was deleted since it was authenticated.
  return db.maybeOne(sql.type(z.object({ expires_at: z.string() }))`
    insert into portal_tokens (org_id, environment, application_id, api_key_id, token_hash, read_only, expires_at)
    select ${tenant.orgId}, ${tenant.environment}, ${token.applicationId}, k.id, ${sql.binary(token.tokenHash)}, ${token.readOnly},
           least(date_trunc('milliseconds', now()) + ${token.expiresInSeconds} * interval '1 second', k.expires_at)
    from api_keys k where k.id = ${token.apiKeyId}
    returning expires_at`);
}

const authRow = z.object({
  id: z.number(),
  org_id: z.string(),
  environment: z.enum(['live', 'test']),
  application_id: z.string(),
  read_only: z.boolean(),
  /** The scopes of the key that made it, now; null for a token made before keys were kept. */
  key_scopes: z.array(z.string()).nullable(),
  /** Why the token no longer works, or null when it does. */
  refusal: z.enum(['revoked', 'expired', 'application_deleted']).nullable(),
});
export type PortalTokenAuthRow = z.infer<typeof authRow>;

/**
 * The token with this hash and whether it still works: its application must be live too, and
 * the key that made it unexpired (a key's delete revokes its tokens); with the key's scopes as
 * they are now, which bound what the token may do (authorize in src/api/middleware/auth.ts).
 */
export async function findPortalTokenByHash(db: CommonQueryMethods, tokenHash: Buffer): Promise<PortalTokenAuthRow | null> {
  return db.maybeOne(sql.type(authRow)`
    select t.id, t.org_id, t.environment, t.application_id, t.read_only, k.scopes as key_scopes,
           case when t.revoked_at is not null then 'revoked'
                when a.deleted_at is not null then 'application_deleted'
                when t.expires_at <= now() or k.expires_at <= now() then 'expired' end as refusal
    from portal_tokens t join applications a on a.id = t.application_id
      left join api_keys k on k.id = t.api_key_id
    where t.token_hash = ${sql.binary(tokenHash)}`);
}

/** Revokes every token of the application; the count is of those that still worked. */
export async function revokePortalTokens(db: CommonQueryMethods, tenant: Tenant, applicationId: string): Promise<number> {
  return db.oneFirst(sql.type(z.object({ revoked: z.number() }))`
    with revoked as (
      update portal_tokens set revoked_at = now()
      where ${ownedBy(tenant)} and application_id = ${applicationId} and revoked_at is null
      returning expires_at
    )
    select count(*) filter (where expires_at > now())::int as revoked from revoked`);
}

/**
 * The links a key made end with it for good: its expiry, when earlier than a link's own, becomes
 * the link's. A link past its key's expiry came back to life when the key's expiry was moved
 * later again (a probe). Called in the transaction that changed the key.
 */
export async function capPortalTokensAtKeyExpiry(db: CommonQueryMethods, apiKeyId: string, expiresAt: string): Promise<void> {
  await db.query(sql.unsafe`
    update portal_tokens set expires_at = ${expiresAt}::timestamptz
    where api_key_id = ${apiKeyId} and expires_at > ${expiresAt}::timestamptz`);
}

/** When the token stops working (for GET /v1/credential). */
export async function portalTokenExpiry(db: CommonQueryMethods, id: number): Promise<string | null> {
  return db.maybeOneFirst(sql.type(z.object({ expires_at: z.string() }))`
    select least(t.expires_at, k.expires_at) as expires_at
    from portal_tokens t left join api_keys k on k.id = t.api_key_id where t.id = ${id}`);
}
