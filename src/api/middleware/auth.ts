// Authentication (Bearer API key) and authorization (the scope table of decisions section 4).
import type { NextFunction, Request, Response } from 'express';
import type { DatabasePool } from 'slonik';
import { findApiKeyByHash } from '../../db/api-keys.ts';
import { hashKey, KEY_PATTERN } from '../../core/api-keys.ts';
import { accessFor, allows, type Family } from '../../core/scopes.ts';
import { forbidden, unauthorized } from '../../errors.ts';

export type Auth = Readonly<{ keyId: string; orgId: string; environment: 'live' | 'test'; scopes: readonly string[] }>;

export function authOf(res: Response): Auth {
  const auth = res.locals.auth as Auth | undefined;
  if (!auth) throw new Error('authOf called on an unauthenticated route');
  return auth;
}

export function authenticate(pool: DatabasePool) {
  return async (req: Request, res: Response, next: NextFunction) => {
    const header = req.get('authorization');
    if (!header) throw unauthorized('Missing API key: send the header "Authorization: Bearer <API key>".');
    const match = /^Bearer +(\S+) *$/i.exec(header);
    if (!match) throw unauthorized('The Authorization header must have the form "Bearer <API key>".');
    const key = match[1] ?? '';
    if (!KEY_PATTERN.test(key)) throw unauthorized('Malformed API key.');
    const row = await findApiKeyByHash(pool, hashKey(key));
    if (!row) throw unauthorized('Invalid API key.');
    if (row.expired) throw unauthorized('This API key has expired.');
    res.locals.auth = { keyId: row.id, orgId: row.org_id, environment: row.environment, scopes: row.scopes } satisfies Auth;
    next();
  };
}

/** The one scope check: GET needs <family>:read, every other method <family>:write. */
export function authorize(family: Family) {
  return (req: Request, res: Response, next: NextFunction) => {
    const access = accessFor(req.method);
    if (!allows(authOf(res).scopes, family, access)) {
      throw forbidden(`This API key lacks the ${family}:${access} scope.`);
    }
    next();
  };
}
