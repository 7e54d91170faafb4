// Resource identifiers: a type prefix and a 27-character KSUID (decisions section 2).
import { randomBytes } from 'node:crypto';
import baseX from 'base-x';
import KSUID from 'ksuid';

export type IdPrefix = 'org' | 'key' | 'app' | 'ep' | 'evt' | 'job' | 'opep' | 'opev';

const PAYLOAD_BYTES = 16;
const POOL_IDS = 256;
let pool = Buffer.alloc(0);
let offset = 0;

/**
 * A KSUID's 16 random bytes, cut from a pool filled 256 ids at a time (as Node's randomUUID
 * caches its random data): KSUID.randomSync asks the CSPRNG for 16 bytes per id, about 5 of the
 * 17 us an id cost. fromParts copies the bytes.
 */
function randomPayload(): Buffer {
  if (offset === pool.length) {
    pool = randomBytes(PAYLOAD_BYTES * POOL_IDS);
    offset = 0;
  }
  offset += PAYLOAD_BYTES;
  return pool.subarray(offset - PAYLOAD_BYTES, offset);
}

/** KSUID's alphabet: its string form is the 20 bytes in base 62, left-padded with '0' to 27 characters. */
const base62 = baseX('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz');
const KSUID_LENGTH = 27;

/**
 * A KSUID's 20 bytes as its 27 characters, written in base 62 by base-x: the string KSUID's own
 * `.string` gives (test/ids.test.ts compares them). That getter converts through
 * base-convert-int-array, which cost ~10 us and ~20 KB of garbage an id, a fifth of all the web's
 * allocation on the job creation path; base-x costs ~4 us and one small array.
 */
export function ksuidString(raw: Uint8Array): string {
  return base62.encode(raw).padStart(KSUID_LENGTH, '0');
}

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${ksuidString(KSUID.fromParts(Date.now(), randomPayload()).raw)}`;
}

const KSUID_BODY = /^[0-9A-Za-z]{27}$/;

/** True when `value` is well-formed for this prefix; malformed ids become 404s without a query. */
export function isId(prefix: IdPrefix, value: string): boolean {
  return value.startsWith(`${prefix}_`) && KSUID_BODY.test(value.slice(prefix.length + 1));
}
