// /v1/api-keys: create (the only response that shows `key`), list, retrieve, patch, delete.
import { Router } from 'express';
import type { CommonQueryMethods, DatabasePool } from 'slonik';
import { z } from 'zod';
import { createApiKey } from '../../core/api-keys.ts';
import { reachesEnvironment, scopesBeyond, withinLifetime } from '../../core/key-reach.ts';
import { canGrant, SCOPES } from '../../core/scopes.ts';
import { deleteApiKey, findApiKey, listApiKeys, lockApiKeyLifetime, updateApiKey } from '../../db/api-keys.ts';
import { capPortalTokensAtKeyExpiry } from '../../db/portal-tokens.ts';
import { isId } from '../../ids.ts';
import { forbidden, notFound, unauthorized } from '../../errors.ts';
import { authOf, type Auth } from '../middleware/auth.ts';
import { enforceRateLimit, rateLimitRules } from '../middleware/rate-limit.ts';
import type { Config } from '../../config.ts';
import { apiKey, apiKeyCreated, deletedView, shaper, type apiKeyList } from '../responses.ts';
import { cursorQuery, environment, timestamp } from '../schemas.ts';
import { assertNoQuery, noInput, noQuery, parseBody, parseCursor, parseQuery } from '../validation.ts';

const name = z.string().trim().min(1, { message: 'must not be empty' }).max(255);
// A fixed message per unknown scope: no per-item string is built for a list of 100,000 bad ones.
const scopes = z.array(z.enum(SCOPES, { message: `must be one of ${SCOPES.join(', ')}` }), { message: 'must be an array of scope names' })
  .min(1, { message: 'must name at least one scope' })
  .max(SCOPES.length, { message: `must name at most ${SCOPES.length} scopes` })
  .transform((list) => [...new Set(list)]);
const futureTimestamp = timestamp.refine((at) => Date.parse(at) > Date.now(), { message: 'must be in the future' });

const createBody = z.strictObject({
  name,
  environment: environment.default('live'),
  scopes: scopes.default(['*']),
  // Absent: never, or the creating key's own expiry when it has one (lifetimeReach).
  expires_at: futureTimestamp.nullable().optional().meta({
    description: 'When the key stops working; null for never. Absent: never, or the creating key\'s own expiry when it has one. '
      + 'A key that expires may not create one that expires later (403).',
  }),
});

const patchBody = z.strictObject({
  name: name.optional(),
  scopes: scopes.optional(),
  expires_at: futureTimestamp.nullable().optional().meta({
    description: 'Null for never. A key that expires may set no later expiry than its own, and changes only keys that expire by then (403).',
  }),
});

const listQuery = z.strictObject({
  ...cursorQuery,
  environment: environment.optional().meta({ description: 'Only keys of this environment.' }),
});

/** What the OpenAPI document says this resource accepts. */
export const apiKeyRequests = { createBody, patchBody, listQuery };

const toApiKey = shaper(apiKey);
const toCreated = shaper(apiKeyCreated);

/** The scopes among `scopes` that `auth` may not grant (decisions section 4: none beyond its own). */
const beyondReach = (auth: Auth, scopes: readonly string[]) => scopesBeyond(auth.scopes, scopes);

/** No key can hand out more than it holds (decisions section 4). */
function assertGrantable(auth: Auth, requested: readonly string[]): void {
  const excess = beyondReach(auth, requested);
  if (excess.length > 0) throw forbidden(`This API key cannot grant scopes it does not hold: ${excess.join(', ')}.`);
}

/**
 * A key changes or deletes only a key that holds nothing it does not hold itself: a key with
 * api-keys:write alone could otherwise narrow, expire or delete the organization's "*" keys.
 */
function assertHoldsAllOf(auth: Auth, target: { scopes: readonly string[] }, doing: 'change' | 'delete'): void {
  const excess = beyondReach(auth, target.scopes);
  if (excess.length > 0) throw forbidden(`This API key cannot ${doing} a key holding scopes it does not hold itself: ${excess.join(', ')}.`);
}

/**
 * Nor more time than it holds: a key that expires at E creates keys that expire by E (its own
 * expiry when the body names none), and changes or deletes only keys that expire by E, leaving
 * them so. A probe made a key with api-keys:write and 15 s to live permanent (`expires_at: null`
 * on itself), and one with 2 minutes a permanent copy of itself. `reach`: the caller's expiry
 * as the database has it now, null for never.
 */
function assertWithinLifetime(reach: string | null, doing: 'create' | 'change' | 'delete', expiresAt: string | null): void {
  if (withinLifetime(reach, expiresAt)) return;
  const what = doing === 'create' ? 'create a key that outlives it' : `${doing} a key that outlives it`;
  throw forbidden(`This API key expires at ${reach}: it cannot ${what}${expiresAt === null ? ' (one that never expires)' : ''}.`);
}

/**
 * The calling key's expiry now (null: never), held (`for share`) until the transaction `tx` of
 * the write ends: read before it and unlocked, another request's shortening of the caller
 * committed in between, and the caller's own PATCH then set a key (itself) to the expiry it no
 * longer had (a probe, 13 of 40 rounds). A key deleted since its request was authenticated
 * reaches nothing.
 */
async function lifetimeReach(tx: CommonQueryMethods, auth: Auth): Promise<string | null> {
  if (auth.kind !== 'api_key') throw forbidden('Only an API key manages API keys.');
  const self = await lockApiKeyLifetime(tx, auth.orgId, auth.keyId);
  if (!self) throw unauthorized('This API key was deleted.');
  return self.expires_at;
}

/** The scopes `auth` may grant, for the write's own check (undefined: every scope, a "*" key). */
const grantableBy = (auth: Auth) => (auth.scopes.includes('*') ? undefined : SCOPES.filter((scope) => canGrant(auth.scopes, scope)));

/**
 * After a write that changed nothing: the key is gone (404), or another request widened it
 * past the caller's scopes or lifetime since the check (403, as the check would now say).
 */
async function refusalAfterWrite(db: CommonQueryMethods, auth: Auth, id: string, doing: 'change' | 'delete', reach: string | null): Promise<never> {
  const now = await findApiKey(db, auth.orgId, id);
  if (now) {
    assertHoldsAllOf(auth, now, doing);
    assertWithinLifetime(reach, doing, now.expires_at);
  }
  throw notFound('API key');
}

/**
 * Keys of the other environment (decisions section 4, and docs/): only a live key holding `*`
 * may create, change or delete them, so a test key can never reach a live key's powers.
 */
function assertEnvironmentReach(auth: Auth, environment: 'live' | 'test'): void {
  if (reachesEnvironment(auth, environment)) return;
  throw forbidden(`Only a live API key with the "*" scope can create, change or delete ${environment} API keys from a ${auth.environment} key.`);
}

export function makeApiKeysRouter(pool: DatabasePool, config: Config): Router {
  const router = Router();
  const { apiKeyCreation } = rateLimitRules(config);

  router.post('/', async (req, res) => {
    const auth = authOf(res);
    // A malformed request is refused before the limit counts it: a typo in a form must not use
    // up an hour's 10 creations. A key reaching past its own scopes (403) is counted.
    assertNoQuery(req);
    const body = parseBody(createBody, req.body);
    await enforceRateLimit(pool, res, apiKeyCreation, auth.orgId);
    assertGrantable(auth, body.scopes);
    assertEnvironmentReach(auth, body.environment);
    const created = await pool.transaction(async (tx) => {
      const reach = await lifetimeReach(tx, auth);
      const expiresAt = body.expires_at === undefined ? reach : body.expires_at;
      assertWithinLifetime(reach, 'create', expiresAt);
      return createApiKey(tx, {
        orgId: auth.orgId, environment: body.environment, name: body.name, scopes: body.scopes, expiresAt,
      });
    });
    res.status(201).json(toCreated(created));
  });

  router.get('/', async (req, res) => {
    const query = parseQuery(listQuery, req.query);
    const cursor = parseCursor(query.cursor, 'key');
    const page = await listApiKeys(pool, authOf(res).orgId, { limit: query.limit, cursor, environment: query.environment });
    res.json({ data: page.rows.map(toApiKey), next_cursor: page.nextCursor } satisfies z.output<typeof apiKeyList>);
  });

  router.get('/:id', noQuery, async (req, res) => {
    const key = isId('key', req.params.id) ? await findApiKey(pool, authOf(res).orgId, req.params.id) : null;
    if (!key) throw notFound('API key');
    res.json(toApiKey(key));
  });

  router.patch('/:id', noQuery, async (req, res) => {
    const auth = authOf(res);
    if (!isId('key', req.params.id)) throw notFound('API key');
    const body = parseBody(patchBody, req.body);
    if (body.scopes) assertGrantable(auth, body.scopes);
    const target = await findApiKey(pool, auth.orgId, req.params.id);
    if (!target) throw notFound('API key');
    assertEnvironmentReach(auth, target.environment);
    assertHoldsAllOf(auth, target, 'change');
    const id = req.params.id;
    const updated = await pool.transaction(async (tx) => {
      const reach = await lifetimeReach(tx, auth);
      assertWithinLifetime(reach, 'change', target.expires_at);
      if (body.expires_at !== undefined) assertWithinLifetime(reach, 'change', body.expires_at);
      const row = await updateApiKey(tx, auth.orgId, id, {
        name: body.name, scopes: body.scopes, expiresAt: body.expires_at,
      }, grantableBy(auth), reach);
      if (row?.expires_at) await capPortalTokensAtKeyExpiry(tx, id, row.expires_at);
      return row ?? refusalAfterWrite(tx, auth, id, 'change', reach);
    });
    res.json(toApiKey(updated));
  });

  router.delete('/:id', ...noInput, async (req, res) => {
    const auth = authOf(res);
    const target = isId('key', req.params.id) ? await findApiKey(pool, auth.orgId, req.params.id) : null;
    if (!target) throw notFound('API key');
    assertEnvironmentReach(auth, target.environment);
    assertHoldsAllOf(auth, target, 'delete');
    const deleted = await pool.transaction(async (tx) => {
      const reach = await lifetimeReach(tx, auth);
      assertWithinLifetime(reach, 'delete', target.expires_at);
      const row = await deleteApiKey(tx, auth.orgId, target.id, grantableBy(auth), reach);
      return row ?? refusalAfterWrite(tx, auth, target.id, 'delete', reach);
    });
    res.json(deletedView(deleted));
  });

  return router;
}
