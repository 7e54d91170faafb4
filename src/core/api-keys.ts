// API key values: generated here, shown once, stored only as a SHA-256 hash. Shared by the
// /v1/api-keys route and the admin CLI's create-org.
import { createHash, randomBytes } from 'node:crypto';
import type { CommonQueryMethods } from 'slonik';
import { insertApiKey, type ApiKeyRow } from '../db/api-keys.ts';
import { newId } from '../ids.ts';

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
