// Endpoint operations that span several statements: create (application locked against a
// concurrent delete, subscriptions resolved by name) and patch (state rules under a row lock).
import { randomBytes } from 'node:crypto';
import { ForeignKeyIntegrityConstraintViolationError, type DatabasePool, type DatabaseTransactionConnection } from 'slonik';
import { invalidState, MAX_DETAILS, moreProblems, notFound, validationError } from '../errors.ts';
import { endpointsOfApplicationOf, lockApplication } from '../db/applications.ts';
import {
  findEndpoint, insertEndpoint, lockEndpoint, resetCircuit, restoreEndpoint, updateEndpoint, type EndpointPatch, type EndpointRow,
} from '../db/endpoints.ts';
import { setSubscriptions } from '../db/endpoint-event-types.ts';
import { releaseHeld } from '../db/webhook-jobs.ts';
import { BACKLOG_PRIORITY, type Queue } from '../queue.ts';
import { findEventTypesByName } from '../db/event-types.ts';
import type { Tenant } from '../db/tenant.ts';
import { isId, newId } from '../ids.ts';

/** `whsec_` + 64 hex characters (32 random bytes), which signing reads as base64 text: a 48-byte key (src/worker/signing.ts). */
export function newSecret(): string {
  return `whsec_${randomBytes(32).toString('hex')}`;
}

/**
 * Subscribes the endpoint to exactly these event type names. An event type deleted between
 * the lookup and the insert (a concurrent force delete) fails the foreign key: that is the
 * client's unknown name, not a server error.
 */
async function subscribe(tx: DatabaseTransactionConnection, tenant: Tenant, endpointId: string, names: readonly string[]) {
  const ids = await resolveEventTypes(tx, tenant, names);
  try {
    await setSubscriptions(tx, tenant, endpointId, ids);
  } catch (error) {
    if (!(error instanceof ForeignKeyIntegrityConstraintViolationError)) throw error;
    throw validationError('An event type was deleted while subscribing to it.', [
      { path: 'event_types', message: 'names an event type that no longer exists' },
    ]);
  }
}

/**
 * Event type ids for these names, or a 400 naming the unknown ones (the first MAX_DETAILS, each
 * at its first place in the request, and how many more). One pass over the names (at most
 * MAX_ENDPOINT_EVENT_TYPES since the request's schema says so; before that bound, a lookup of
 * each unknown name's place by indexOf blocked the event loop for 12.9 s at 90,000 of them).
 */
async function resolveEventTypes(tx: DatabaseTransactionConnection, tenant: Tenant, names: readonly string[]): Promise<string[]> {
  const firstAt = new Map<string, number>();
  names.forEach((name, at) => { if (!firstAt.has(name)) firstAt.set(name, at); });
  const found = await findEventTypesByName(tx, tenant, [...firstAt.keys()]);
  const known = new Set(found.map((e) => e.name));
  const unknown = [...firstAt.keys()].filter((n) => !known.has(n));
  if (unknown.length > 0) {
    const listed = unknown.slice(0, MAX_DETAILS);
    const more = unknown.length - listed.length;
    throw validationError(`Unknown event types: ${listed.join(', ')}${more > 0 ? ` and ${more} more` : ''}.`, [
      ...listed.map((n) => ({ path: `event_types.${firstAt.get(n)}`, message: `no event type named "${n}"` })),
      ...(more > 0 ? [moreProblems(more)] : []),
    ]);
  }
  return found.map((e) => e.id);
}

export type NewEndpoint = {
  applicationId: string; url: string; eventTypes: readonly string[]; headers: Record<string, string>; rateLimitRps: number; timeoutMs: number;
};

/**
 * An application's live endpoints are at most `maxEndpoints` (MAX_ENDPOINTS_PER_APPLICATION): a
 * job is fanned out to each subscribed one inside its accept, so an unbounded application made
 * every job of it as costly as its endpoints (README, "Limits").
 */
export async function createEndpoint(pool: DatabasePool, tenant: Tenant, input: NewEndpoint, maxEndpoints: number): Promise<EndpointRow> {
  if (!isId('app', input.applicationId)) throw notFound('Application');
  return pool.transaction(async (tx) => {
    const live = await lockApplication(tx, tenant, input.applicationId);
    if (live === null) throw notFound('Application');
    if (live >= maxEndpoints) throw applicationFull(maxEndpoints, 'before creating another');
    const id = newId('ep');
    await insertEndpoint(tx, tenant, { id, ...input, secret: newSecret() });
    await subscribe(tx, tenant, id, input.eventTypes);
    return mustFind(tx, tenant, id);
  });
}

export type EndpointChanges = EndpointPatch & { eventTypes?: readonly string[] };

/**
 * Status rules (decisions section 6): PATCH sets `active` or `paused`; a disabled endpoint's
 * status changes only through reset-circuit or automatic recovery.
 */
export async function patchEndpoint(
  pool: DatabasePool, queue: Queue, tenant: Tenant, id: string, changes: EndpointChanges,
): Promise<EndpointRow> {
  if (!isId('ep', id)) throw notFound('Endpoint');
  return pool.transaction(async (tx) => {
    const current = await lockEndpoint(tx, tenant, id);
    if (!current) throw notFound('Endpoint');
    if (changes.status !== undefined && current.status === 'disabled') {
      // A 410's is said as such: "by its circuit breaker" sent a probe's reader looking at failure counts.
      throw invalidState(current.disabled_reason === 'gone'
        ? 'This endpoint is disabled: its receiver answered 410 Gone; re-enable it with POST /v1/endpoints/{id}/reset-circuit.'
        : 'This endpoint is disabled by its circuit breaker; re-enable it with POST /v1/endpoints/{id}/reset-circuit.');
    }
    const { eventTypes, ...fields } = changes;
    await updateEndpoint(tx, id, fields);
    if (eventTypes !== undefined) await subscribe(tx, tenant, id, eventTypes);
    if (current.status === 'paused' && changes.status === 'active') await releaseHeldDeliveries(tx, queue, id);
    return mustFind(tx, tenant, id);
  });
}

/**
 * Deliveries held while the endpoint was paused or disabled go back on the queue: the oldest
 * 10,000 in this transaction, the rest by the workers' upkeep, 10,000 a second (releasing a
 * million in the request took 70 s). The request stays short however long the outage was.
 * Queued behind fresh work, of every tenant (BACKLOG_PRIORITY).
 * Returns how many it released.
 */
export async function releaseHeldDeliveries(tx: DatabaseTransactionConnection, queue: Queue, endpointId: string): Promise<number> {
  const released = await releaseHeld(tx, [endpointId], RELEASE_BATCH);
  await queue.enqueue(tx, released, { priority: BACKLOG_PRIORITY });
  return released.length;
}

export const RELEASE_BATCH = 10_000;

/**
 * reset-circuit: the circuit of an active or disabled endpoint closes and held deliveries
 * resume. A paused endpoint is refused (409): un-pausing is PATCH's job.
 */
export async function closeCircuit(pool: DatabasePool, queue: Queue, tenant: Tenant, id: string) {
  if (!isId('ep', id)) throw notFound('Endpoint');
  return pool.transaction(async (tx) => {
    const current = await lockEndpoint(tx, tenant, id);
    if (!current) throw notFound('Endpoint');
    if (current.status === 'paused') throw invalidState('This endpoint is paused; set its status to active with PATCH instead.');
    const reset = await resetCircuit(tx, id);
    await releaseHeldDeliveries(tx, queue, id);
    return { ...reset, previous_status: current.status };
  });
}

/**
 * restore: a soft-deleted endpoint (at most 30 days ago, its application live) comes back as it
 * was, subscribed again to the event types of its list that exist now (decisions 13/14).
 */
export async function restore(pool: DatabasePool, tenant: Tenant, id: string, maxEndpoints: number): Promise<EndpointRow> {
  if (!isId('ep', id)) throw notFound('Endpoint');
  return pool.transaction(async (tx) => {
    const outcome = await restoreEndpoint(tx, tenant, id);
    if (outcome === 'not_found') throw notFound('Endpoint');
    if (outcome === 'not_deleted') throw invalidState('This endpoint is not deleted; only a deleted endpoint can be restored.');
    if (outcome === 'application_deleted') {
      throw invalidState('The application of this endpoint was deleted; its endpoints cannot be restored.');
    }
    if (outcome === 'deliveries_dropping') {
      throw invalidState('The deliveries this endpoint\'s delete stopped are still being dropped or finished; try again in a minute.');
    }
    // Counted after the restore, which locked the application row first: the transaction rolls
    // back whole when it went past the limit.
    if ((await endpointsOfApplicationOf(tx, id)) > maxEndpoints) throw applicationFull(maxEndpoints, 'before restoring this one');
    return mustFind(tx, tenant, id);
  });
}

function applicationFull(maxEndpoints: number, when: string) {
  return invalidState(`This application already has ${maxEndpoints} endpoints, the most an application may have; delete one ${when}.`);
}

async function mustFind(tx: DatabaseTransactionConnection, tenant: Tenant, id: string): Promise<EndpointRow> {
  const row = await findEndpoint(tx, tenant, id);
  if (!row) throw new Error(`endpoint ${id} vanished inside its own transaction`);
  return row;
}
