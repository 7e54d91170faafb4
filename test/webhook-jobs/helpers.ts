// Shared by the test files of this folder (one file split along its sections): the app, fixtures, checks.
// /v1/webhook-jobs over HTTP: create (shape, fan-out to deliveries and queue messages,
// validation, payload size, application lookup), event_id idempotency (replays, concurrency,
// expiry), retrieve, list (every filter, pagination), cancel and retry (state rules, effect on
// deliveries and the queue), the endpoint test action, isolation and scopes. Most tests run
// without a worker, so jobs stay where they are put; job states are set through `deliveries`
// rows (the job status is derived from them by a trigger). A few tests run the real worker
// against a real receiver.
import type { ExecutionContext } from 'ava';
import pg from 'pg';
import { sql } from 'slonik';
import { z } from 'zod';
import { startTestApp, type Response, type TestApp } from '../helpers/app.ts';
import * as fixtures from '../helpers/fixtures.ts';

export const app = startTestApp();

export const CREATE_FIELDS = ['application_id', 'attempt_count', 'created_at', 'event_type', 'expires_at', 'id', 'max_retries', 'status'];
export const FULL_FIELDS = [
  'application_id', 'attempt_count', 'completed_at', 'created_at', 'deliveries', 'discarded_at', 'event_id', 'event_type',
  'expires_at', 'headers', 'id', 'max_retries', 'payload', 'status',
];
export const SUMMARY_FIELDS = ['created_at', 'event_type', 'id', 'status'];
export const RECORD_FIELDS = ['attempt', 'attempted_at', 'endpoint_id', 'error', 'latency_ms', 'response_body', 'status_code', 'success'];
export const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
export const JOB_ID = /^job_[0-9A-Za-z]{27}$/;
export const URL_OK = 'https://hooks.example.com/webhooks';
export const HOURS_48 = 48 * 3600 * 1000;
export const PAYLOAD_LIMIT = 262_144;

export type Org = { key: string; orgId: string; appId: string };

// ---------------------------------------------------------------- helpers

export async function setup(t: ExecutionContext, on: TestApp = app): Promise<Org> {
  const { key, orgId } = await on.createOrg();
  const appId = await createApplication(t, key, on);
  return { key, orgId, appId };
}

export function ok(t: ExecutionContext, res: Response, status: number, what: string): void {
  t.is(res.status, status, `${what}: ${JSON.stringify(res.body)}`);
  if (res.status !== status) throw new Error(`could not ${what}: ${res.status} ${JSON.stringify(res.body)}`);
}

export async function createApplication(t: ExecutionContext, key: string, on: TestApp = app): Promise<string> {
  return (await fixtures.createApplication({ t, on, key })).id;
}

export async function createEventType(t: ExecutionContext, key: string, name: string, schema?: object, on: TestApp = app): Promise<string> {
  return (await fixtures.createEventType({ t, on, key }, schema ? { name, schema } : { name })).id;
}

export async function createEndpoint(
  t: ExecutionContext, key: string, appId: string, eventTypes: string[], on: TestApp = app, url = URL_OK,
): Promise<string> {
  return (await fixtures.createEndpoint({ t, on, key }, { application_id: appId, url, event_types: eventTypes })).id;
}

export async function createKey(t: ExecutionContext, byKey: string, body: { scopes?: string[]; environment?: 'live' | 'test' }): Promise<string> {
  return (await fixtures.createApiKey({ t, on: app, key: byKey }, body)).key;
}

export const postJob = (key: string, body: unknown, on: TestApp = app) => on.request('POST', '/v1/webhook-jobs', { key, body });
export const getJob = (key: string, id: string, on: TestApp = app) => on.request('GET', `/v1/webhook-jobs/${id}`, { key });
export const cancel = (key: string, id: string) => app.request('POST', `/v1/webhook-jobs/${id}/cancel`, { key });
export const retry = (key: string, id: string) => app.request('POST', `/v1/webhook-jobs/${id}/retry`, { key });
export const list = (key: string, query: string) => app.request('GET', `/v1/webhook-jobs?${query}`, { key });

export async function createJob(t: ExecutionContext, key: string, body: Record<string, unknown>, on: TestApp = app): Promise<any> {
  return fixtures.createJob({ t, on, key }, body);
}

export const deliveryRow = z.object({ id: z.number(), endpoint_id: z.string(), status: z.string(), round: z.number(), attempt_count: z.number() });
export type DeliveryRow = z.infer<typeof deliveryRow>;

/** A job with two targets, whose deliveries are then set to the given [status, attempt_count]. */
export async function twoTargetJob(t: ExecutionContext, key: string, appId: string, good: [string, number], bad: [string, number]) {
  await createEventType(t, key, 'invoice.paid');
  const goodId = await createEndpoint(t, key, appId, ['invoice.paid']);
  const badId = await createEndpoint(t, key, appId, ['invoice.paid']);
  const job = await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: {} });
  for (const [endpointId, [status, attempts]] of [[goodId, good], [badId, bad]] as const) {
    await app.pool.query(sql.unsafe`
      update deliveries set status = ${status}, attempt_count = ${attempts} where job_id = ${job.id} and endpoint_id = ${endpointId}`);
  }
  return { job, good: goodId, bad: badId };
}

export async function deliveriesOf(jobId: string, on: TestApp = app): Promise<readonly DeliveryRow[]> {
  return on.pool.any(sql.type(deliveryRow)`
    select id::int as id, endpoint_id, status, round, attempt_count from deliveries where job_id = ${jobId} order by id`);
}

export const count = z.object({ n: z.number() });

/** Queue messages carrying this delivery (of this round, when given). */
export async function messagesFor(deliveryId: number, round?: number, on: TestApp = app): Promise<number> {
  const ofRound = round === undefined ? sql.fragment`` : sql.fragment`and data->>'round' = ${String(round)}`;
  return on.pool.oneFirst(sql.type(count)`
    select count(*)::int as n from pgboss.job where name = 'deliveries' and data->>'deliveryId' = ${String(deliveryId)} ${ofRound}`);
}

/** Queue messages naming a delivery that does not exist: a rolled-back delivery whose message survived. */
export async function orphanMessages(on: TestApp = app): Promise<number> {
  return on.pool.oneFirst(sql.type(count)`
    select count(*)::int as n from pgboss.job j where j.name = 'deliveries'
      and not exists (select 1 from deliveries d where d.id = (j.data->>'deliveryId')::bigint)`);
}

export async function jobRows(appId: string, on: TestApp = app): Promise<number> {
  return on.pool.oneFirst(sql.type(count)`select count(*)::int as n from webhook_jobs where application_id = ${appId}`);
}

export async function deliveryRows(appId: string, on: TestApp = app): Promise<number> {
  return on.pool.oneFirst(sql.type(count)`select count(*)::int as n from deliveries where application_id = ${appId}`);
}

export async function assertNothingCreated(t: ExecutionContext, appId: string, on: TestApp = app): Promise<void> {
  t.is(await jobRows(appId, on), 0, 'no job row');
  t.is(await deliveryRows(appId, on), 0, 'no delivery row');
  t.is(await orphanMessages(on), 0, 'no queue message without its delivery');
}

export async function webhookJobsCount(t: ExecutionContext, key: string, appId: string): Promise<number> {
  const res = await app.request('GET', `/v1/applications/${appId}`, { key });
  ok(t, res, 200, 'retrieve the application');
  return res.body.webhook_jobs_count;
}

export type State = 'executing' | 'succeeded' | 'awaiting_retry' | 'failed' | 'archived';

/** Puts every delivery of a job in the state that makes the job `state`, and checks it took. */
export async function setState(t: ExecutionContext, key: string, jobId: string, state: State): Promise<void> {
  const set = {
    executing: sql.fragment`status = 'in_flight'`,
    succeeded: sql.fragment`status = 'succeeded', attempt_count = 1`,
    awaiting_retry: sql.fragment`status = 'pending', attempt_count = 1`,
    failed: sql.fragment`status = 'failed', attempt_count = 7`,
    archived: sql.fragment`status = 'succeeded', attempt_count = 1`,
  }[state];
  await app.pool.query(sql.unsafe`update deliveries set ${set} where job_id = ${jobId}`);
  if (state === 'archived') {
    await app.pool.query(sql.unsafe`
      update webhook_jobs set status = 'archived', completed_at = now() - interval '31 days' where id = ${jobId}`);
  }
  const res = await getJob(key, jobId);
  ok(t, res, 200, 'retrieve the job');
  const expected = state === 'failed' ? 'discarded' : state;
  if (res.body.status !== expected) throw new Error(`setting ${state} gave a job in ${res.body.status}`);
}

export const paths = (res: Response): string[] => (res.body?.error?.details ?? []).map((d: { path: string }) => d.path);
export const ids = (res: Response): string[] => res.body.data.map((j: { id: string }) => j.id);

/** An event type schema the create and idempotency tests validate payloads against. */
export const INVOICE_SCHEMA = {
  type: 'object',
  required: ['invoice_id'],
  properties: {
    invoice_id: { type: 'string' },
    amount: { type: 'integer', minimum: 0 },
    lines: { type: 'array', items: { type: 'object', properties: { sku: { type: 'string' } } } },
  },
};

/**
 * Holds the rows of these applications locked (for update) until the returned release() commits;
 * release() may be called again, and its `pid` is the holding backend's. A connection of its own
 * (node-postgres): the acceptor's queries must not run in a slonik transaction's context.
 */
export async function holdApplications(appIds: string[]): Promise<(() => Promise<void>) & { pid: number }> {
  const locker = new pg.Client({ connectionString: app.databaseUrl });
  await locker.connect();
  let pid: number;
  try {
    await locker.query('begin');
    await locker.query('select 1 from applications where id = any($1) order by id for update', [appIds]);
    pid = (await locker.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
  } catch (error) {
    await locker.end();
    throw error;
  }
  let released = false;
  return Object.assign(async () => {
    if (released) return;
    released = true;
    try {
      await locker.query('commit');
    } finally {
      await locker.end();
    }
  }, { pid });
}
