// API key values: generated here, shown once, stored only as a SHA-256 hash. Shared by the
// /v1/api-keys route and the admin CLI's create-org.
import { createHash, randomBytes } from 'node:crypto';
import type { CommonQueryMethods } from 'slonik';
import { confirmApiKeys, insertApiKey, type ApiKeyRow } from '../db/api-keys.ts';
import { forbidden, unauthorized, type AppError } from '../errors.ts';
import { newId } from '../ids.ts';
import { allows, type Access, type Family } from './scopes.ts';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const KEY_LENGTH = 32;
const PREFIX_LENGTH = 12;
export const KEY_PATTERN = /^sk_(live|test)_[0-9A-Za-z]{32}$/;

/** `length` uniformly random base62 characters (32: about 190 bits), by rejection sampling. */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62];
    }
  }
  return out;
}

export function hashKey(key: string): Buffer {
  return createHash('sha256').update(key).digest();
}

export type CreatedApiKey = ApiKeyRow & { key: string };

export async function createApiKey(
  db: CommonQueryMethods,
  input: { orgId: string; environment: 'live' | 'test'; name: string; scopes: readonly string[]; expiresAt: string | null },
): Promise<CreatedApiKey> {
  const key = `sk_${input.environment}_${randomBase62(KEY_LENGTH)}`;
  const row = await insertApiKey(db, {
    id: newId('key'),
    orgId: input.orgId,
    environment: input.environment,
    name: input.name,
    keyHash: hashKey(key),
    prefix: key.slice(0, PREFIX_LENGTH),
    scopes: input.scopes,
    expiresAt: input.expiresAt,
  });
  return { ...row, key };
}

/**
 * Why a key, as the database has it (null: no such key), may not make a request needing
 * `family`:`access` (null: any valid key), as the 401 or 403 to answer; null when it may.
 */
export function keyRefusal(row: { expired: boolean; scopes: readonly string[] } | null, family: Family | null, access: Access): AppError | null {
  if (!row) return unauthorized('Invalid API key.');
  if (row.expired) return unauthorized('This API key has expired.');
  if (family !== null && !allows(row.scopes, family, access)) return forbidden(`This API key lacks the ${family}:${access} scope.`);
  return null;
}

/**
 * Confirms a key a request went on with unconfirmed (a provisional one: the auth middleware's
 * recentKeys): throws the 401 or 403 a lookup would have given now. For the answers a route
 * gives without the transaction that confirms it (a refused body, say).
 */
export async function confirmKey(db: CommonQueryMethods, keyId: string, family: Family, access: Access): Promise<void> {
  const [row] = await confirmApiKeys(db, [keyId]);
  const refusal = keyRefusal(row ?? null, family, access);
  if (refusal) throw refusal;
}
