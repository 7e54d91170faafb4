// Scopes (decisions section 4): GET needs <family>:read, any other method <family>:write;
// write implies read; '*' implies everything.

export const FAMILIES = ['webhooks', 'endpoints', 'applications', 'event-types', 'api-keys'] as const;
export type Family = (typeof FAMILIES)[number];
export type Access = 'read' | 'write';

export const SCOPES = ['*', ...FAMILIES.flatMap((f) => [`${f}:write`, `${f}:read`])] as const;
export type Scope = (typeof SCOPES)[number];

export function accessFor(method: string): Access {
  return method === 'GET' || method === 'HEAD' ? 'read' : 'write';
}

/** The scopes any one of which lets a key do `access` on `family` (the one rule, for SQL filters too). */
export function grantingScopes(family: Family, access: Access): string[] {
  return ['*', `${family}:write`, ...(access === 'read' ? [`${family}:read`] : [])];
}

export function allows(held: readonly string[], family: Family, access: Access): boolean {
  return grantingScopes(family, access).some((scope) => held.includes(scope));
}

/** Whether a key holding `held` may put `scope` on a key it creates or patches. */
export function canGrant(held: readonly string[], scope: string): boolean {
  if (held.includes('*')) return true;
  if (scope === '*') return false;
  const [family, access] = scope.split(':') as [Family, Access];
  return allows(held, family, access);
}

// Portal tokens (decisions sections 10 and 14) take the place of scopes with this table: what
// an application-scoped token may do, by the collection under /v1 (`endpoints` for
// /v1/endpoints/…), the method and the path segments after it. A collection without a rule
// (api-keys, stats, any added later) is refused; every operation under /v1/endpoints is allowed,
// so actions added there later are covered. Which rows it reaches is not decided here: every
// query limits a token to its application (src/db/tenant.ts), so another one's id is a 404.
type TokenRule = { allows: (method: string, rest: readonly string[]) => boolean; says: string };

export const TOKEN_RULES: Readonly<Record<string, TokenRule>> = {
  endpoints: { allows: () => true, says: 'every operation (create only with its application_id)' },
  'webhook-jobs': {
    allows: (method, rest) => !(method === 'POST' && rest.length === 0),
    says: 'read, list, retry and cancel; not create',
  },
  'event-types': { allows: (method) => accessFor(method) === 'read', says: 'read and list' },
  applications: {
    allows: (method, rest) => accessFor(method) === 'read' && rest.length === 1 && rest[0] !== 'by-uid',
    says: 'GET /v1/applications/{its id} only',
  },
  credential: { allows: (method) => accessFor(method) === 'read', says: 'read what it is (GET /v1/credential)' },
};

export type TokenVerdict = { allowed: true } | { allowed: false; reason: string };

/** Whether a portal token (read-only or not) may call `method` on /v1/<collection>/<rest…>. */
export function tokenAllows(readOnly: boolean, collection: string, method: string, rest: readonly string[]): TokenVerdict {
  const rule = TOKEN_RULES[collection];
  if (!rule || !rule.allows(method, rest)) return { allowed: false, reason: 'A portal token cannot use this operation.' };
  if (readOnly && (accessFor(method) !== 'read' || rest.includes('secret'))) {
    return { allowed: false, reason: 'This portal link is read-only.' };
  }
  return { allowed: true };
}
