// What one API key may do to another (decisions section 4): the rules of /v1/api-keys
// (src/api/routes/api-keys.ts, which refuses with 403) and of the dashboard's API keys page
// (which turns off what the API would refuse), written once for both.
import { canGrant } from './scopes.ts';

type Holder = { environment: 'live' | 'test'; scopes: readonly string[] };

/** The scopes among `scopes` that a key holding `held` may not grant: none beyond its own. */
export const scopesBeyond = (held: readonly string[], scopes: readonly string[]) => scopes.filter((scope) => !canGrant(held, scope));

/**
 * Whether `self` may create, change or delete keys of `environment`: its own, or any when it is
 * a live key holding `*`, so a test key can never reach a live key's powers.
 */
export const reachesEnvironment = (self: Holder, environment: 'live' | 'test') =>
  environment === self.environment || (self.environment === 'live' && self.scopes.includes('*'));

/**
 * Whether a key that expires at `reach` (null: never) may give or leave a key the expiry
 * `expiresAt` (null: never): no key hands out more time than it holds.
 */
export const withinLifetime = (reach: string | null, expiresAt: string | null) =>
  reach === null || (expiresAt !== null && Date.parse(expiresAt) <= Date.parse(reach));
