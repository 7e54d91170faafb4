// Job operations shared by POST /v1/webhook-jobs and the endpoint test action: creation with
// idempotency, schema validation, fan-out and enqueueing in one transaction; retry; cancel.
import type { ValidateFunction } from 'ajv';
import type { DatabasePool } from 'slonik';
import { invalidState, notFound, validationError } from '../api/errors.ts';
import { lockApplication } from '../db/applications.ts';
import { findEventTypeForJob } from '../db/event-types.ts';
import type { Tenant } from '../db/tenant.ts';
import {
  cancelJob as cancelJobRows, claimEventId, findJob, insertDeliveries, insertJob, lockJob, refreshJobs, restartJob, type JobRow,
} from '../db/webhook-jobs.ts';
import { isId, newId } from '../ids.ts';
import type { Queue } from '../queue.ts';
import { compileSchema } from './json-schema.ts';

export const TEST_EVENT_TYPE = 'webhook.test';

// Compiled payload validators by event type id and version; compiling costs far more than validating.
const validators = new Map<string, ValidateFunction>();
const MAX_VALIDATORS = 1000;

function validatorFor(eventType: { id: string; schema: Record<string, unknown>; updated_at: string }): ValidateFunction {
  const key = `${eventType.id}@${eventType.updated_at}`;
  let validate = validators.get(key);
  if (!validate) {
    const compiled = compileSchema(eventType.schema);
    if ('problems' in compiled) throw new Error(`stored schema of ${eventType.id} does not compile`);
    validate = compiled.validate;
    if (validators.size >= MAX_VALIDATORS) validators.delete(validators.keys().next().value as string);
    validators.set(key, validate);
  }
  return validate;
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

export async function createJob(
  pool: DatabasePool, queue: Queue, tenant: Tenant, input: NewJobInput,
): Promise<{ job: JobRow; replayed: boolean }> {
  if (!isId('app', input.applicationId)) throw notFound('Application');
  const payloadText = JSON.stringify(input.payload);
  return pool.transaction(async (tx) => {
    if (!(await lockApplication(tx, tenant, input.applicationId))) throw notFound('Application');
    // A duplicate event_id returns the first job even when this body differs (or is invalid).
    const id = newId('job');
    if (input.eventId !== null) {
      const owner = await claimEventId(tx, input.applicationId, input.eventId, id);
      if (owner !== id) {
        const existing = await findJob(tx, tenant, owner);
        if (existing) return { job: existing, replayed: true };
      }
    }
    let eventTypeId: string | null = null;
    if (!input.endpointId) {
      const eventType = await findEventTypeForJob(tx, tenant, input.eventType);
      if (!eventType) {
        throw validationError(`Unknown event type: ${input.eventType}.`, [{ path: 'event_type', message: 'no event type has this name' }]);
      }
      if (eventType.schema) {
        const validate = validatorFor({ ...eventType, schema: eventType.schema });
        if (!validate(input.payload)) {
          throw validationError('payload does not match the event type\'s schema.', (validate.errors ?? []).map((e) => ({
            path: `payload${e.instancePath.replaceAll('/', '.')}`, message: e.message ?? 'is invalid',
          })));
        }
      }
      eventTypeId = eventType.id;
    }
    await insertJob(tx, tenant, { id, applicationId: input.applicationId, eventType: input.eventType, eventId: input.eventId, payloadText, headers: input.headers });
    const queued = await insertDeliveries(tx, { id, applicationId: input.applicationId, eventTypeId, endpointId: input.endpointId ?? null });
    if (queued.length === 0) await refreshJobs(tx, [id]); // no targets: succeeded at once
    await queue.enqueue(tx, queued.map((q) => ({ deliveryId: q.delivery_id, round: q.round })));
    const job = await findJob(tx, tenant, id);
    if (!job) throw new Error(`job ${id} vanished inside its own transaction`);
    return { job, replayed: false };
  });
}

const RETRYABLE = new Set(['succeeded', 'discarded', 'awaiting_retry', 'archived']);
const CANCELLABLE = new Set(['created', 'awaiting_retry']);

export async function retryJob(pool: DatabasePool, queue: Queue, tenant: Tenant, id: string) {
  if (!isId('job', id)) throw notFound('Webhook job');
  return pool.transaction(async (tx) => {
    const job = await lockJob(tx, tenant, id);
    if (!job) throw notFound('Webhook job');
    if (!RETRYABLE.has(job.status)) throw invalidState(`A job in status ${job.status} cannot be retried.`);
    const queued = await restartJob(tx, id);
    await queue.enqueue(tx, queued.map((q) => ({ deliveryId: q.delivery_id, round: q.round })));
    const restarted = await findJob(tx, tenant, id);
    if (!restarted) throw new Error(`job ${id} vanished inside its own transaction`);
    return { id: restarted.id, status: restarted.status, attempt_count: restarted.attempt_count };
  });
}

export async function cancelJob(pool: DatabasePool, tenant: Tenant, id: string) {
  if (!isId('job', id)) throw notFound('Webhook job');
  return pool.transaction(async (tx) => {
    const job = await lockJob(tx, tenant, id);
    if (!job) throw notFound('Webhook job');
    if (!CANCELLABLE.has(job.status)) throw invalidState(`A job in status ${job.status} cannot be cancelled.`);
    return cancelJobRows(tx, id);
  });
}
