// Resource identifiers: a type prefix and a 27-character KSUID (decisions section 2).
import KSUID from 'ksuid';

export type IdPrefix = 'org' | 'key' | 'app' | 'ep' | 'evt' | 'job' | 'opep' | 'opev';

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${KSUID.randomSync().string}`;
}

const KSUID_BODY = /^[0-9A-Za-z]{27}$/;

/** True when `value` is well-formed for this prefix; malformed ids become 404s without a query. */
export function isId(prefix: IdPrefix, value: string): boolean {
  return value.startsWith(`${prefix}_`) && KSUID_BODY.test(value.slice(prefix.length + 1));
}
