// Job operations shared by POST /v1/webhook-jobs and the endpoint test action: creation with
// idempotency, schema validation, fan-out and enqueueing in one transaction; retry; cancel.
import type { CommonQueryMethods, DatabasePool } from 'slonik';
import { invalidState, notFound, validationError } from '../errors.ts';
import { findEventTypeForJob } from '../db/event-types.ts';
import type { Tenant } from '../db/tenant.ts';
import {
  acceptJob, cancelJob as cancelJobRow, queueItemsOf, retryJob as retryJobRows, type AcceptedRow, type JobRow,
} from '../db/webhook-jobs.ts';
import { isId, newId } from '../ids.ts';
import type { Queue } from '../queue.ts';
import { prepareValidator, validatePayload, type PayloadValidator, type SchemaProblem } from './json-schema.ts';

export const TEST_EVENT_TYPE = 'webhook.test';

// What accepting a job needs of an event type, by organization, environment and name: its id,
// version and compiled payload validator (compiling costs far more than validating). An entry
// is only a guess: accept_webhook_job checks the version under the insert's own snapshot and
// answers 'stale' when the event type changed, and then it is looked up again.
// A stored schema that no longer passes the schema limits refuses payloads with its problems.
type KnownEventType = { id: string; version: number; validator: PayloadValidator | null; refused: SchemaProblem[] | null };
const eventTypes = new Map<string, KnownEventType>();
const MAX_EVENT_TYPES = 1000;

const eventTypeKey = (tenant: Tenant, name: string) => `${tenant.orgId}/${tenant.environment}/${name}`;

async function lookUpEventType(db: CommonQueryMethods, tenant: Tenant, name: string): Promise<KnownEventType | null> {
  const key = eventTypeKey(tenant, name);
  const row = await findEventTypeForJob(db, tenant, name);
  if (!row) {
    eventTypes.delete(key);
    return null;
  }
  const prepared = row.schema ? await prepareValidator(row.schema, `${row.id}@${row.version}`) : null;
  const known = {
    id: row.id, version: row.version,
    validator: prepared && 'problems' in prepared ? null : prepared,
    refused: prepared && 'problems' in prepared ? prepared.problems : null,
  };
  eventTypes.delete(key);
  if (eventTypes.size >= MAX_EVENT_TYPES) eventTypes.delete(eventTypes.keys().next().value as string);
  eventTypes.set(key, known);
  return known;
}

export type NewJobInput = {
  applicationId: string;
  eventType: string;
  payload: Record<string, unknown>;
  eventId: string | null;
  headers: Record<string, string>;
  /** A test job: aimed at this endpoint alone, whatever its subscriptions. */
  endpointId?: string;
};

export type CreatedJob = Pick<JobRow, 'id' | 'application_id' | 'event_type' | 'status' | 'created_at' | 'expires_at' | 'attempt_count' | 'max_retries'>;

function createdJob(row: AcceptedRow): CreatedJob {
  const { id, application_id, event_type, status, created_at, expires_at, attempt_count, max_retries } = row;
  if (id === null || application_id === null || event_type === null || status === null || created_at === null
    || expires_at === null || attempt_count === null || max_retries === null) {
    throw new Error(`accept_webhook_job answered ${row.outcome} without a job`);
  }
  return { id, application_id, event_type, status, created_at, expires_at, attempt_count, max_retries };
}

/**
 * Creates a job with idempotency, schema validation, fan-out and enqueueing in one transaction:
 * usually one call of accept_webhook_job and pg-boss's insert.
 */
export async function createJob(
  pool: DatabasePool, queue: Queue, tenant: Tenant, input: NewJobInput,
): Promise<{ job: CreatedJob; replayed: boolean }> {
  if (!isId('app', input.applicationId)) throw notFound('Application');
  // accept_webhook_job takes the application from the input: a portal token's own only.
  if (tenant.applicationId !== undefined && tenant.applicationId !== input.applicationId) throw notFound('Application');
  const payloadText = JSON.stringify(input.payload);
  const id = newId('job');
  const testJob = input.endpointId !== undefined;
  const key = eventTypeKey(tenant, input.eventType);
  return pool.transaction(async (tx) => {
    let known = testJob ? null : eventTypes.get(key) ?? await lookUpEventType(tx, tenant, input.eventType);
    for (let tries = 0; tries < 3; tries += 1) {
      const problems = known?.refused
        ?? (known?.validator ? await validatePayload(known.validator, input.payload, payloadText) : null);
      const valid = problems === null;
      const rows = await acceptJob(tx, tenant, {
        id, applicationId: input.applicationId, eventType: input.eventType, eventId: input.eventId, payloadText, headers: input.headers,
        eventTypeId: known?.id ?? null, eventTypeVersion: known?.version ?? null, payloadValid: valid, endpointId: input.endpointId ?? null,
      });
      const row = rows[0] as AcceptedRow; // many() returns at least one
      switch (row.outcome) {
        case 'no_application':
          throw notFound('Application');
        case 'replayed':
          return { job: createdJob(row), replayed: true };
        case 'unknown_event_type':
          eventTypes.delete(key);
          throw validationError(`Unknown event type: ${input.eventType}.`, [{ path: 'event_type', message: 'no event type has this name' }]);
        case 'invalid':
          throw validationError('payload does not match the event type\'s schema.', problems ?? []);
        case 'stale':
          known = await lookUpEventType(tx, tenant, input.eventType);
          continue;
        case 'created':
          await queue.enqueue(tx, queueItemsOf(rows));
          return { job: createdJob(row), replayed: false };
      }
    }
    throw new Error(`event type ${input.eventType} kept changing while job ${id} was being accepted`);
  });
}

/** retry_webhook_job decides (sql/010-retry-cancel.sql); the deliveries it reopens are enqueued here. */
export async function retryJob(pool: DatabasePool, queue: Queue, tenant: Tenant, id: string) {
  if (!isId('job', id)) throw notFound('Webhook job');
  return pool.transaction(async (tx) => {
    const rows = await retryJobRows(tx, tenant, id);
    const row = rows[0] as (typeof rows)[number]; // many() returns at least one
    if (row.outcome === 'not_found') throw notFound('Webhook job');
    if (row.outcome === 'invalid_state') throw invalidState(`A job in status ${row.status} cannot be retried.`);
    await queue.enqueue(tx, queueItemsOf(rows));
    if (row.id === null || row.status === null || row.attempt_count === null) throw new Error(`retry_webhook_job answered ${row.outcome} without a job`);
    return { id: row.id, status: row.status, attempt_count: row.attempt_count };
  });
}

/** cancel_webhook_job decides (sql/010-retry-cancel.sql). */
export async function cancelJob(pool: DatabasePool, tenant: Tenant, id: string) {
  if (!isId('job', id)) throw notFound('Webhook job');
  const row = await pool.transaction((tx) => cancelJobRow(tx, tenant, id));
  if (row.outcome === 'not_found') throw notFound('Webhook job');
  if (row.outcome === 'invalid_state') throw invalidState(`A job in status ${row.status} cannot be cancelled.`);
  if (row.id === null || row.status === null || row.discarded_at === null) throw new Error(`cancel_webhook_job answered ${row.outcome} without a job`);
  return { id: row.id, status: row.status, discarded_at: row.discarded_at };
}
