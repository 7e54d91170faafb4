// The delivery state machine as a DBA calls it: the SQL functions of sql/ that decide a state
// change (accept, retry, cancel, record) and the CHECK that a job is finished exactly when it
// has completed_at. Jobs are made over HTTP (no worker runs: rows stay where they are put).
import { readFile } from 'node:fs/promises';
import test, { type ExecutionContext } from 'ava';
import pg from 'pg';
import { sql } from 'slonik';
import { z } from 'zod';
import { newId } from '../src/ids.ts';
import { startTestApp } from './helpers/app.ts';
import { createApplication, createEndpoint, createEventType, createJob } from './helpers/fixtures.ts';

const app = startTestApp();

/** An organization with one application, event types `order.paid` (with `endpoints` subscribers) and `order.nobody`. */
async function setup(t: ExecutionContext, endpoints: number) {
  const { key, orgId } = await app.createOrg();
  const by = { on: app, key, t };
  const appId: string = (await createApplication(by)).id;
  await createEventType(by, 'order.paid');
  await createEventType(by, 'order.nobody');
  const endpointIds: string[] = [];
  for (let i = 0; i < endpoints; i += 1) {
    endpointIds.push((await createEndpoint(by, { application_id: appId, url: `https://hooks.example.com/${i}`, event_types: ['order.paid'] })).id);
  }
  const job = async (eventType = 'order.paid'): Promise<string> =>
    (await createJob(by, { application_id: appId, event_type: eventType, payload: { n: 1 } })).id;
  return { key, orgId, appId, endpointIds, job };
}

const deliveryRow = z.object({ id: z.number(), endpoint_id: z.string(), round: z.number(), status: z.string() });
const deliveriesOf = (jobId: string) => app.pool.any(sql.type(deliveryRow)`
  select id, endpoint_id, round, status from deliveries where job_id = ${jobId} order by id`);

const jobState = z.object({ status: z.string(), completed_at: z.string().nullable() });
const jobOf = (jobId: string) => app.pool.one(sql.type(jobState)`select status, completed_at from webhook_jobs where id = ${jobId}`);

test('accept_webhook_job returns one row per delivery to enqueue, and one row without a delivery for a job with no target', async (t) => {
  const { orgId, appId, endpointIds } = await setup(t, 3);
  const row = z.object({ outcome: z.string(), id: z.string().nullable(), delivery_id: z.number().nullable(), round: z.number().nullable() });
  const accept = (jobId: string, eventType: string) => app.pool.transaction(async (tx) => {
    const type = await tx.one(sql.type(z.object({ id: z.string(), version: z.number() }))`
      select id, event_type_version(updated_at) as version from event_types where org_id = ${orgId} and name = ${eventType}`);
    return tx.any(sql.type(row)`select outcome, id, delivery_id, round from accept_webhook_job(
      ${orgId}, 'live', ${appId}, ${jobId}, ${eventType}, ${type.id}, ${type.version}, true, null, '{}', '{}'::jsonb, null)`);
  });
  const [fannedId, aloneId] = [newId('job'), newId('job')];
  const fanned = await accept(fannedId, 'order.paid');
  t.is(fanned.length, 3);
  t.true(fanned.every((r) => r.outcome === 'created' && r.id === fannedId && r.round === 1));
  t.deepEqual(fanned.map((r) => r.delivery_id), (await deliveriesOf(fannedId)).map((d) => d.id));
  t.deepEqual((await deliveriesOf(fannedId)).map((d) => d.endpoint_id).sort(), [...endpointIds].sort());

  const alone = await accept(aloneId, 'order.nobody');
  t.deepEqual(alone, [{ outcome: 'created', id: aloneId, delivery_id: null, round: null }]);
  t.is((await jobOf(aloneId)).status, 'succeeded');
});

const retried = z.object({
  outcome: z.string(), id: z.string().nullable(), status: z.string().nullable(), attempt_count: z.number().nullable(),
  delivery_id: z.number().nullable(), round: z.number().nullable(),
});
const retryCall = (orgId: string, jobId: string, environment = 'live') => app.pool.any(sql.type(retried)`
  select outcome, id, status, attempt_count, delivery_id, round from retry_webhook_job(${orgId}, ${environment}, ${jobId})`);
const cancelled = z.object({ outcome: z.string(), id: z.string().nullable(), status: z.string().nullable(), discarded_at: z.string().nullable() });
const cancelCall = (orgId: string, jobId: string, environment = 'live') => app.pool.one(sql.type(cancelled)`
  select outcome, id, status, discarded_at from cancel_webhook_job(${orgId}, ${environment}, ${jobId})`);

test('retry_webhook_job and cancel_webhook_job decide from the job status: not_found, invalid_state (naming it), or the change', async (t) => {
  const { orgId, job } = await setup(t, 2);
  const jobId = await job();

  t.deepEqual((await retryCall(orgId, newId('job'))).map((r) => r.outcome), ['not_found']);
  t.deepEqual((await retryCall(orgId, jobId, 'test')).map((r) => r.outcome), ['not_found'], 'another environment');
  t.is((await cancelCall(newId('org'), jobId)).outcome, 'not_found', 'another organization');

  // created: cannot be retried, can be cancelled.
  t.deepEqual(await retryCall(orgId, jobId), [{ outcome: 'invalid_state', id: null, status: 'created', attempt_count: null, delivery_id: null, round: null }]);
  const cancel = await cancelCall(orgId, jobId);
  t.like(cancel, { outcome: 'cancelled', id: jobId, status: 'discarded' });
  t.truthy(cancel.discarded_at);
  t.deepEqual((await deliveriesOf(jobId)).map((d) => d.status), ['cancelled', 'cancelled']);
  t.like(await cancelCall(orgId, jobId), { outcome: 'invalid_state', status: 'discarded' }, 'a discarded job cannot be cancelled');

  // discarded (cancelled): retried, one row per restarted delivery, in a new round.
  const rows = await retryCall(orgId, jobId);
  const deliveries = await deliveriesOf(jobId);
  t.deepEqual(rows.map((r) => [r.outcome, r.id, r.status, r.attempt_count]), [['retried', jobId, 'created', 0], ['retried', jobId, 'created', 0]]);
  t.deepEqual(rows.map((r) => [r.delivery_id, r.round]), deliveries.map((d) => [d.id, 2]));
  t.true(deliveries.every((d) => d.status === 'pending' && d.round === 2));
  t.deepEqual(await jobOf(jobId), { status: 'created', completed_at: null });
});

test('retry_webhook_job of a job without targets: one row without a delivery, and the job succeeds again at once', async (t) => {
  const { orgId, job } = await setup(t, 0);
  const jobId = await job('order.nobody');
  t.is((await jobOf(jobId)).status, 'succeeded');
  const rows = await retryCall(orgId, jobId);
  t.deepEqual(rows, [{ outcome: 'retried', id: jobId, status: 'succeeded', attempt_count: 0, delivery_id: null, round: null }]);
  t.truthy((await jobOf(jobId)).completed_at);
});

test('a job is finished exactly when it has completed_at: an UPDATE breaking either direction fails on the named CHECK', async (t) => {
  const { job } = await setup(t, 1);
  const open = await job();
  const finished = await job('order.nobody');
  const violation = async (statement: ReturnType<typeof sql.unsafe>) => {
    const error = await t.throwsAsync(app.pool.query(statement));
    return String((error as { cause?: { constraint?: string } }).cause?.constraint ?? error?.message);
  };
  t.regex(await violation(sql.unsafe`update webhook_jobs set completed_at = now() where id = ${open}`), /webhook_jobs_completed_at_check/);
  t.regex(await violation(sql.unsafe`update webhook_jobs set completed_at = null where id = ${finished}`), /webhook_jobs_completed_at_check/);
  t.regex(await violation(sql.unsafe`update webhook_jobs set status = 'archived', completed_at = null where id = ${finished}`), /webhook_jobs_completed_at_check/);
  t.deepEqual((await jobOf(open)).completed_at, null);
});

const recordedRow = z.object({
  delivery_id: z.number().nullable(), round: z.number().nullable(), circuit: z.string().nullable(),
  endpoint_id: z.string().nullable(), application_id: z.string().nullable(), org_id: z.string().nullable(),
});

/** Marks the job's deliveries in flight and records one attempt outcome for each (threshold 2, cooldown 30 s). */
async function record(jobId: string, success: boolean, attempt: number) {
  const deliveries = await deliveriesOf(jobId);
  await app.pool.query(sql.unsafe`update deliveries set status = 'in_flight' where job_id = ${jobId}`);
  const results = deliveries.map((d) => ({
    delivery_id: d.id, round: d.round, attempt, status_code: success ? 200 : 500, response_body: '', latency_ms: 5,
    attempted_at: new Date().toISOString(), success, error: success ? null : 'http_status',
    retry_at: success ? null : new Date(Date.now() + 60_000).toISOString(),
  }));
  return app.pool.any(sql.type(recordedRow)`
    select delivery_id, round, circuit, endpoint_id, application_id, org_id
    from record_attempts(${sql.jsonb(results)}, 2, 30)`);
}

test('record_attempts returns one row per endpoint whose circuit changed: disabled at the threshold, enabled by a good probe', async (t) => {
  const { orgId, appId, endpointIds, job } = await setup(t, 1);
  const endpointId = endpointIds[0] as string;
  const jobId = await job();

  const first = await record(jobId, false, 1);
  t.deepEqual(first.filter((r) => r.circuit !== null), [], 'one failure: below the threshold');
  t.deepEqual(first.map((r) => r.delivery_id), (await deliveriesOf(jobId)).map((d) => d.id), 'the retry is returned to enqueue');

  const second = await record(jobId, false, 2);
  t.deepEqual(second.filter((r) => r.circuit !== null),
    [{ delivery_id: null, round: null, circuit: 'disabled', endpoint_id: endpointId, application_id: appId, org_id: orgId }]);
  const endpoint = z.object({ status: z.string(), failure_count: z.number(), cooldown_seconds: z.number().nullable() });
  const endpointState = () => app.pool.one(sql.type(endpoint)`
    select status, failure_count, cooldown_seconds from endpoints where id = ${endpointId}`);
  t.deepEqual(await endpointState(), { status: 'disabled', failure_count: 2, cooldown_seconds: 30 });

  // A failed probe keeps the circuit open (no transition row) and doubles the cooldown.
  await app.pool.query(sql.unsafe`update deliveries set is_probe = true where job_id = ${jobId}`);
  t.deepEqual((await record(jobId, false, 3)).filter((r) => r.circuit !== null), []);
  t.deepEqual(await endpointState(), { status: 'disabled', failure_count: 3, cooldown_seconds: 60 });

  await app.pool.query(sql.unsafe`update deliveries set is_probe = true where job_id = ${jobId}`);
  t.deepEqual((await record(jobId, true, 4)).filter((r) => r.circuit !== null),
    [{ delivery_id: null, round: null, circuit: 'enabled', endpoint_id: endpointId, application_id: appId, org_id: orgId }]);
  t.deepEqual(await endpointState(), { status: 'active', failure_count: 0, cooldown_seconds: null });
});

const shownRow = z.object({ status: z.string(), current_status: z.string() });
const shownOf = (jobId: string) => app.pool.one(sql.type(shownRow)`
  select j.status, j.current_status from webhook_jobs j where j.id = ${jobId}`);

test('executing is derived when read: a claim leaves the stored status, retry and cancel refuse the job while an attempt is in flight', async (t) => {
  const { orgId, job } = await setup(t, 2);
  const jobId = await job();
  const [first, second] = await deliveriesOf(jobId) as [z.infer<typeof deliveryRow>, z.infer<typeof deliveryRow>];
  const claim = (id: number) => app.pool.query(sql.unsafe`update deliveries set status = 'in_flight' where id = ${id}`);

  await claim(first.id);
  t.deepEqual(await shownOf(jobId), { status: 'created', current_status: 'executing' }, 'first attempt in flight');
  t.like((await retryCall(orgId, jobId))[0], { outcome: 'invalid_state', status: 'executing' });
  t.like(await cancelCall(orgId, jobId), { outcome: 'invalid_state', status: 'executing' });
  t.deepEqual((await deliveriesOf(jobId)).map((d) => d.status), ['in_flight', 'pending'], 'the refusals changed nothing');

  // The first attempt failed with a retry scheduled; the other target is claimed meanwhile.
  await app.pool.query(sql.unsafe`update deliveries set status = 'pending', attempt_count = 1 where id = ${first.id}`);
  t.deepEqual(await shownOf(jobId), { status: 'awaiting_retry', current_status: 'awaiting_retry' });
  await claim(second.id);
  t.deepEqual(await shownOf(jobId), { status: 'awaiting_retry', current_status: 'executing' });
  await app.pool.query(sql.unsafe`update deliveries set status = 'succeeded', attempt_count = 1 where id = ${second.id}`);
  // The retry in flight.
  await claim(first.id);
  t.deepEqual(await shownOf(jobId), { status: 'awaiting_retry', current_status: 'executing' });
  await app.pool.query(sql.unsafe`update deliveries set status = 'succeeded', attempt_count = 2 where id = ${first.id}`);
  t.deepEqual(await shownOf(jobId), { status: 'succeeded', current_status: 'succeeded' });
});

test('the migration rewrites jobs stored as executing by an older version to the status the new rule stores', async (t) => {
  const { job } = await setup(t, 2);
  const [fresh, retrying] = [await job(), await job()];
  await app.pool.query(sql.unsafe`update deliveries set status = 'in_flight' where job_id = any(${sql.array([fresh, retrying], 'text')})`);
  await app.pool.query(sql.unsafe`update deliveries set attempt_count = 1
    where id = (select min(id) from deliveries where job_id = ${retrying})`);
  // What the version before stored while an attempt was in flight.
  await app.pool.query(sql.unsafe`update webhook_jobs set status = 'executing' where id = any(${sql.array([fresh, retrying], 'text')})`);
  t.deepEqual(await shownOf(fresh), { status: 'executing', current_status: 'executing' }, 'an old row still reads as executing');

  const file = await readFile(new URL('../migrations/1765200000000_executing-derived-when-read.sql', import.meta.url), 'utf8');
  const up = file.slice(file.indexOf('-- Up Migration'), file.indexOf('-- Down Migration'));
  const db = new pg.Client({ connectionString: app.databaseUrl });
  await db.connect();
  try { await db.query(up); } finally { await db.end(); }
  t.deepEqual(await shownOf(fresh), { status: 'created', current_status: 'executing' });
  t.deepEqual(await shownOf(retrying), { status: 'awaiting_retry', current_status: 'executing' });
});
