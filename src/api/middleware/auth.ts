// Authentication (a Bearer API key or portal token) and authorization: the scope table of
// decisions section 4 for API keys, the token rules of sections 10 and 14 for portal tokens
// (src/core/scopes.ts). Every /v1 request passes here; there is no other permission check.
import type { NextFunction, Request, Response } from 'express';
import type { DatabasePool } from 'slonik';
import { findApiKeyByHash } from '../../db/api-keys.ts';
import { findPortalTokenByHash } from '../../db/portal-tokens.ts';
import { hashKey, KEY_PATTERN } from '../../core/api-keys.ts';
import { TOKEN_PATTERN } from '../../core/portal-tokens.ts';
import { accessFor, allows, tokenAllows, type Family } from '../../core/scopes.ts';
import { forbidden, unauthorized } from '../../errors.ts';

type Environment = 'live' | 'test';

/**
 * Who is calling. It is the Tenant every query takes: for a portal token `applicationId` is set,
 * which limits every query built with ownedBy() to that application.
 */
export type Auth = Readonly<
  | { kind: 'api_key'; keyId: string; orgId: string; environment: Environment; scopes: readonly string[]; applicationId?: undefined; readOnly: false }
  | { kind: 'portal_token'; tokenId: number; orgId: string; environment: Environment; scopes: readonly string[]; applicationId: string; readOnly: boolean }
>;

export function authOf(res: Response): Auth {
  const auth = res.locals.auth as Auth | undefined;
  if (!auth) throw new Error('authOf called on an unauthenticated route');
  return auth;
}

const TOKEN_REFUSALS = {
  revoked: 'This portal link was revoked.',
  expired: 'This portal link has expired.',
  application_deleted: 'The application of this portal link was deleted.',
} as const;

async function authenticateToken(pool: DatabasePool, token: string): Promise<Auth> {
  const row = await findPortalTokenByHash(pool, hashKey(token));
  if (!row) throw unauthorized('Invalid portal token.');
  if (row.refusal) throw unauthorized(TOKEN_REFUSALS[row.refusal]);
  return {
    kind: 'portal_token', tokenId: row.id, orgId: row.org_id, environment: row.environment, scopes: [],
    applicationId: row.application_id, readOnly: row.read_only,
  };
}

export function authenticate(pool: DatabasePool) {
  return async (req: Request, res: Response, next: NextFunction) => {
    const header = req.get('authorization');
    if (!header) throw unauthorized('Missing API key: send the header "Authorization: Bearer <API key>".');
    const match = /^Bearer +(\S+) *$/i.exec(header);
    if (!match) throw unauthorized('The Authorization header must have the form "Bearer <API key>".');
    const key = match[1] ?? '';
    if (TOKEN_PATTERN.test(key)) {
      res.locals.auth = await authenticateToken(pool, key);
      return next();
    }
    if (!KEY_PATTERN.test(key)) throw unauthorized('Malformed API key.');
    const row = await findApiKeyByHash(pool, hashKey(key));
    if (!row) throw unauthorized('Invalid API key.');
    if (row.expired) throw unauthorized('This API key has expired.');
    res.locals.auth = {
      kind: 'api_key', keyId: row.id, orgId: row.org_id, environment: row.environment, scopes: row.scopes, readOnly: false,
    } satisfies Auth;
    next();
  };
}

/** The path segments after the collection, decoded (so `%73ecret` is `secret`). */
function segments(path: string): string[] {
  return path.split('/').filter(Boolean).map((segment) => {
    try {
      return decodeURIComponent(segment);
    } catch {
      return segment;
    }
  });
}

/**
 * The one permission check. An API key: GET needs <family>:read, every other method
 * <family>:write (`null`: any valid key, as for GET /v1/credential). A portal token: the token
 * rules, by the collection it is mounted at.
 */
export function authorize(family: Family | null) {
  return (req: Request, res: Response, next: NextFunction) => {
    const auth = authOf(res);
    const access = accessFor(req.method);
    if (auth.kind === 'portal_token') {
      const collection = req.baseUrl.split('/').pop() ?? '';
      const verdict = tokenAllows(auth.readOnly, collection, req.method, segments(req.path));
      if (!verdict.allowed) throw forbidden(verdict.reason);
      if (auth.readOnly) withoutSecrets(res);
    } else if (family !== null && !allows(auth.scopes, family, access)) {
      throw forbidden(`This API key lacks the ${family}:${access} scope.`);
    }
    next();
  };
}

/**
 * A read-only portal link never receives a signing secret: `secret` is dropped from every
 * object the response sends (the body, or the items of its `data` list), whichever route sends it.
 */
function withoutSecrets(res: Response): void {
  const strip = (value: unknown): unknown => {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
    const { secret: _secret, old_secret: _old, ...rest } = value as Record<string, unknown>;
    return rest;
  };
  const send = res.json.bind(res);
  res.json = (body: unknown) => {
    const stripped = strip(body) as Record<string, unknown> | unknown;
    if (stripped && typeof stripped === 'object' && Array.isArray((stripped as { data?: unknown }).data)) {
      (stripped as { data: unknown[] }).data = (stripped as { data: unknown[] }).data.map(strip);
    }
    return send(stripped);
  };
}
