// Portal tokens: application-scoped bearer tokens for the consumer portal (decisions sections
// 10 and 14). Generated here, shown once in a portal link, stored only as a SHA-256 hash.
import type { CommonQueryMethods } from 'slonik';
import { findApplication } from '../db/applications.ts';
import { insertPortalToken } from '../db/portal-tokens.ts';
import type { Tenant } from '../db/tenant.ts';
import { notFound, unauthorized } from '../errors.ts';
import { isId } from '../ids.ts';
import { hashKey, randomBase62 } from './api-keys.ts';

/** `pt_live_` or `pt_test_` and 40 base62 characters (about 238 bits): never mistaken for an API key. */
export const TOKEN_PATTERN = /^pt_(live|test)_[0-9A-Za-z]{40}$/;

export type PortalLink = { url: string; token: string; expires_at: string; read_only: boolean };

export async function createPortalLink(
  db: CommonQueryMethods,
  tenant: Tenant,
  input: { applicationId: string; apiKeyId: string; expiresInSeconds: number; readOnly: boolean; publicUrl: string },
): Promise<PortalLink> {
  const app = isId('app', input.applicationId) ? await findApplication(db, tenant, input.applicationId) : null;
  if (!app) throw notFound('Application');
  const token = `pt_${tenant.environment}_${randomBase62(40)}`;
  const inserted = await insertPortalToken(db, tenant, {
    applicationId: app.id, apiKeyId: input.apiKeyId, tokenHash: hashKey(token), readOnly: input.readOnly, expiresInSeconds: input.expiresInSeconds,
  });
  if (!inserted) throw unauthorized('Invalid API key.');
  const { expires_at } = inserted;
  // In the fragment: browsers never send it, so it stays out of request lines, logs and Referer.
  return { url: `${input.publicUrl}/portal#${token}`, token, expires_at, read_only: input.readOnly };
}
