// Authentication (a Bearer API key or portal token) and authorization: the scope table of
// decisions section 4 for API keys, the token rules of sections 10 and 14 for portal tokens
// (src/core/scopes.ts). Every /v1 request passes here; the one other check is job creation's
// confirmation of a recently seen key (`provisional`), with the same keyRefusal().
import type { NextFunction, Request, Response } from 'express';
import type { DatabasePool } from 'slonik';
import { findApiKeyByHash } from '../../db/api-keys.ts';
import { findPortalTokenByHash } from '../../db/portal-tokens.ts';
import type { RequestScope } from '../../db/request-scope.ts';
import { hashKey, keyRefusal, KEY_PATTERN } from '../../core/api-keys.ts';
import { TOKEN_PATTERN } from '../../core/portal-tokens.ts';
import { accessFor, allows, tokenAllows, type Access, type Family } from '../../core/scopes.ts';
import { forbidden, unauthorized } from '../../errors.ts';
import { headerCount } from './raw-headers.ts';

type Environment = 'live' | 'test';

/**
 * Who is calling. It is the Tenant every query takes: for a portal token `applicationId` is set,
 * which limits every query built with ownedBy() to that application.
 */
export type Auth = Readonly<
  | {
    kind: 'api_key'; keyId: string; orgId: string; environment: Environment; scopes: readonly string[]; applicationId?: undefined; readOnly: false;
    /** Taken from recentKeys without a lookup: the route must confirm the key before it answers (confirmKey). */
    provisional?: true;
  }
  | {
    kind: 'portal_token'; tokenId: number; orgId: string; environment: Environment; scopes: readonly string[]; applicationId: string; readOnly: boolean;
    /** The scopes of the API key that made its link, as they are now: the token does no more (null: a token older than that rule). */
    keyScopes: readonly string[] | null;
  }
>;

type ApiKeyAuth = Extract<Auth, { kind: 'api_key' }>;

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
    applicationId: row.application_id, readOnly: row.read_only, keyScopes: row.key_scopes,
  };
}

const RECENT_KEYS = 10_000;
const RECENT_KEY_MS = 600_000;

/**
 * The API keys this web process authenticated or confirmed in the last ten minutes, by the hash
 * of the key. Only a route that confirms the key in the transaction it writes in may skip the
 * lookup with it (POST /v1/webhook-jobs, where the lookup was most of a request's queries): an
 * entry is a guess, never an answer, so how long it stays decides how often a key is looked up,
 * not whether a revoked, expired or narrowed key is refused (the next confirmation refuses it,
 * and forgets the entry). Only keys the database found valid enter it, so a caller cannot fill
 * it with made-up keys; at most RECENT_KEYS entries, the oldest dropped first. A confirmation
 * renews its key's entry (renew). Kept for one minute until 2026-11-27: a tenant quiet for a
 * minute had its next job wait for a lookup outside its group, and bench/latency-ab.ts's 50
 * tenants all fell out at once during a pause, which made the web's first half second of load
 * 0.34-0.55 cores against 0.28-0.36 with ten minutes, and the first attempts of that second
 * 22.6-41.3 ms at the median against 17.2-24.0 (8 interleaved rounds after 75 s idle).
 */
export type RecentKeys = ReturnType<typeof makeRecentKeys>;
export function makeRecentKeys(now: () => number = Date.now) {
  const entries = new Map<string, { auth: ApiKeyAuth; until: number }>();
  return {
    get(hash: string): ApiKeyAuth | undefined {
      const entry = entries.get(hash);
      if (entry && entry.until > now()) return entry.auth;
      entries.delete(hash);
      return undefined;
    },
    /** The key of this entry was just confirmed by the database: it stays another RECENT_KEY_MS. */
    renew(hash: string): void {
      const entry = entries.get(hash);
      if (entry) entry.until = now() + RECENT_KEY_MS;
    },
    /** The key of this entry was refused at its confirmation: its next request looks it up. */
    forget(hash: string): void {
      entries.delete(hash);
    },
    set(hash: string, auth: ApiKeyAuth): void {
      entries.delete(hash);
      if (entries.size >= RECENT_KEYS) entries.delete(entries.keys().next().value as string);
      entries.set(hash, { auth, until: now() + RECENT_KEY_MS });
    },
    get size() { return entries.size; },
  };
}

export type AuthenticateOptions = {
  recentKeys?: RecentKeys;
  /**
   * Every request this middleware serves may go on with a recent key, unconfirmed
   * (`provisional`), when it held the family's scope for it: the route confirms it (confirmKey,
   * or in its own transaction). Mount such a middleware only on the routes that do.
   */
  provisional?: { family: Family };
};

/**
 * The request's credential; its organization also on the request's scope, where the pool holds
 * one organization's calls to its share of the connections (src/db/pool-guard.ts).
 */
function authenticated(res: Response, auth: Auth): void {
  res.locals.auth = auth;
  const scope = res.locals.requestScope as RequestScope | undefined;
  if (scope) {
    scope.organization = auth.orgId;
    scope.caller = auth.kind === 'api_key' ? auth.keyId : auth.applicationId; // key_… or app_…: never equal
    scope.customer = auth.kind === 'portal_token' ? auth.applicationId : undefined;
  }
}

export function authenticate(pool: DatabasePool, options: AuthenticateOptions = {}) {
  const { recentKeys, provisional } = options;
  return async (req: Request, res: Response, next: NextFunction) => {
    const header = req.get('authorization');
    if (!header) throw unauthorized('Missing API key: send the header "Authorization: Bearer <API key>".');
    // Node keeps the first of two Authorization headers and drops the other: a request that
    // named two credentials ran as the first without a word (a probe).
    const given = headerCount(req.rawHeaders, 'authorization');
    if (given > 1) throw unauthorized(`The Authorization header is given ${given} times: send one credential.`);
    const match = /^Bearer +(\S+) *$/i.exec(header);
    if (!match) throw unauthorized('The Authorization header must have the form "Bearer <API key>".');
    const key = match[1] ?? '';
    if (TOKEN_PATTERN.test(key)) {
      authenticated(res, await authenticateToken(pool, key));
      return next();
    }
    // A portal link cut short (copied in part) names itself as such, not as an API key.
    if (!KEY_PATTERN.test(key)) throw unauthorized(key.startsWith('pt_') ? 'Malformed portal token: the link may be incomplete.' : 'Malformed API key.');
    const hash = hashKey(key);
    const recentKey = hash.toString('base64');
    const recent = recentKeys && provisional ? recentKeys.get(recentKey) : undefined;
    if (recent && recentKeys && provisional && allows(recent.scopes, provisional.family, accessFor(req.method))) {
      authenticated(res, { ...recent, provisional: true } satisfies Auth);
      res.locals.renewRecentKey = () => recentKeys.renew(recentKey);
      res.locals.forgetRecentKey = () => recentKeys.forget(recentKey);
      return next();
    }
    const row = await findApiKeyByHash(pool, hash);
    const refusal = keyRefusal(row, null, 'read');
    if (refusal || !row) throw refusal;
    const auth: ApiKeyAuth = {
      kind: 'api_key', keyId: row.id, orgId: row.org_id, environment: row.environment, scopes: row.scopes, readOnly: false,
    };
    recentKeys?.set(recentKey, auth);
    authenticated(res, auth);
    next();
  };
}

/** After a route confirmed the provisional key its request went on with: that key stays recent. */
export function renewRecentKey(res: Response): void {
  (res.locals.renewRecentKey as (() => void) | undefined)?.();
}

/** After a route's confirmation refused the provisional key its request went on with: that key is looked up next time. */
export function forgetRecentKey(res: Response): void {
  (res.locals.forgetRecentKey as (() => void) | undefined)?.();
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
 * <family>:write (`null`: any valid key, as for GET /v1/credential); `alsoBy`, another family
 * whose scope grants it as well (the statistics, which the spec's scope table gives to
 * applications:read, and decisions to the endpoints). A portal token: the token rules, by the
 * collection it is mounted at.
 */
export function authorize(family: Family | null, alsoBy?: Family) {
  const lacks = (access: Access) => `${family}:${access}${alsoBy ? ` or ${alsoBy}:${access}` : ''}`;
  const granted = (scopes: readonly string[], access: Access) =>
    family === null || allows(scopes, family, access) || (alsoBy !== undefined && allows(scopes, alsoBy, access));
  return (req: Request, res: Response, next: NextFunction) => {
    const auth = authOf(res);
    const access = accessFor(req.method);
    if (auth.kind === 'portal_token') {
      const collection = req.baseUrl.split('/').pop() ?? '';
      const verdict = tokenAllows(auth.readOnly, collection, req.method, segments(req.path));
      if (!verdict.allowed) throw forbidden(verdict.reason);
      // Nor more than the key that made its link may do now (decisions section 4: no key hands
      // out more than it holds): a key with applications:write alone makes links, but their
      // tokens do not reach the endpoints and jobs that key cannot.
      if (auth.keyScopes && !granted(auth.keyScopes, access)) {
        throw forbidden(`The API key that made this portal link lacks the ${lacks(access)} scope.`);
      }
      if (auth.readOnly) withoutSecrets(res);
    } else {
      if (!granted(auth.scopes, access)) throw forbidden(`This API key lacks the ${lacks(access)} scope.`);
    }
    next();
  };
}

/** What a read-only portal link sees in place of each custom header's value. */
const HIDDEN_HEADER_VALUE = '********';

/**
 * A read-only portal link never receives a signing secret: `secret` is dropped from every
 * object the response sends (the body, or the items of its `data` list), whichever route sends it.
 * Nor the values of custom headers (an endpoint's or a job's `headers`), the documented place for
 * a receiver's credentials (an `Authorization` header): their names stay, each value is
 * HIDDEN_HEADER_VALUE (a probe read a Bearer credential through a read-only link).
 */
function withoutSecrets(res: Response): void {
  const send = res.json.bind(res);
  res.json = (body: unknown) => send(readOnlyView(body));
}

function strip(value: unknown): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  const { secret: _secret, old_secret: _old, ...rest } = value as Record<string, unknown>;
  const headers = rest.headers;
  if (headers !== null && typeof headers === 'object' && !Array.isArray(headers)) {
    rest.headers = Object.fromEntries(Object.keys(headers).map((name) => [name, HIDDEN_HEADER_VALUE]));
  }
  return rest;
}

/** `body` as a read-only portal link may see it: withoutSecrets' rule. */
function readOnlyView(body: unknown): unknown {
  const stripped = strip(body);
  if (stripped && typeof stripped === 'object' && Array.isArray((stripped as { data?: unknown }).data)) {
    (stripped as { data: unknown[] }).data = (stripped as { data: unknown[] }).data.map(strip);
  }
  return stripped;
}

/**
 * For a route that writes its answer itself instead of through res.json (a long answer streamed
 * in parts): `body` as this request's credential may see it. A probe read a job's header values
 * through a read-only link once the job had over 1,000 attempt records and was streamed.
 */
export function viewFor(res: Response, body: unknown): unknown {
  const auth = res.locals.auth as Auth | undefined;
  return auth?.kind === 'portal_token' && auth.readOnly ? readOnlyView(body) : body;
}
