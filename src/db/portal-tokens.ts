// Table portal_tokens: application-scoped bearer tokens behind portal links, stored as hashes.
import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { ownedBy, type Tenant } from './tenant.ts';

export async function insertPortalToken(
  db: CommonQueryMethods,
  tenant: Tenant,
  token: { applicationId: string; tokenHash: Buffer; readOnly: boolean; expiresInSeconds: number },
): Promise<{ expires_at: string }> {
  return db.one(sql.type(z.object({ expires_at: z.string() }))`
    insert into portal_tokens (org_id, environment, application_id, token_hash, read_only, expires_at)
    values (${tenant.orgId}, ${tenant.environment}, ${token.applicationId}, ${sql.binary(token.tokenHash)}, ${token.readOnly},
            date_trunc('milliseconds', now()) + ${token.expiresInSeconds} * interval '1 second')
    returning expires_at`);
}

const authRow = z.object({
  id: z.number(),
  org_id: z.string(),
  environment: z.enum(['live', 'test']),
  application_id: z.string(),
  read_only: z.boolean(),
  /** Why the token no longer works, or null when it does. */
  refusal: z.enum(['revoked', 'expired', 'application_deleted']).nullable(),
});
export type PortalTokenAuthRow = z.infer<typeof authRow>;

/** The token with this hash and whether it still works (its application must be live too). */
export async function findPortalTokenByHash(db: CommonQueryMethods, tokenHash: Buffer): Promise<PortalTokenAuthRow | null> {
  return db.maybeOne(sql.type(authRow)`
    select t.id, t.org_id, t.environment, t.application_id, t.read_only,
           case when t.revoked_at is not null then 'revoked'
                when a.deleted_at is not null then 'application_deleted'
                when t.expires_at <= now() then 'expired' end as refusal
    from portal_tokens t join applications a on a.id = t.application_id
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

/** When the token stops working (for GET /v1/credential). */
export async function portalTokenExpiry(db: CommonQueryMethods, id: number): Promise<string | null> {
  return db.maybeOneFirst(sql.type(z.object({ expires_at: z.string() }))`
    select expires_at from portal_tokens where id = ${id}`);
}
