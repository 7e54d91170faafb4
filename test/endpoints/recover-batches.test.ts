// The batches behind POST /v1/endpoints/{id}/recover, run by hand here (no worker: the test
// decides when each batch runs, with the same function the workers' upkeep calls). Overlapping
// recoveries deliver the union, each delivery once, also with batches running concurrently; the
// set is fixed when the request runs (a later failure is not swept in, even inside the range);
// failed deliveries of a cancelled job are not recovered; the job reopens as after a retry.
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { makeLogger } from '../../src/logger.ts';
import { runRecoveries } from '../../src/worker/upkeep.ts';
import { startTestApp } from '../helpers/app.ts';
import * as fixtures from '../helpers/fixtures.ts';
import { ofItsRound } from '../helpers/queue.ts';

const app = startTestApp();
const logger = makeLogger('silent');
const HOURS_48 = 48 * 3600 * 1000;

type Ctx = { key: string; appId: string };

const setup = (t: ExecutionContext): Promise<Ctx> => fixtures.createOrgWithApplication(app, t, ['order.created']);

const createEndpoint = async (t: ExecutionContext, ctx: Ctx): Promise<string> =>
  (await fixtures.createEndpoint({ t, on: app, key: ctx.key }, { application_id: ctx.appId, url: 'https://hooks.example.com/in', event_types: ['order.created'] })).id;

const createJob = async (t: ExecutionContext, ctx: Ctx): Promise<string> =>
  (await fixtures.createJob({ t, on: app, key: ctx.key }, { application_id: ctx.appId, event_type: 'order.created', payload: {} })).id;

/** The job's deliveries give up (as after their last attempt). */
async function fail(jobIds: readonly string[], endpointId?: string): Promise<void> {
  const only = endpointId ? sql.fragment`and endpoint_id = ${endpointId}` : sql.fragment``;
  await app.pool.query(sql.unsafe`
    update deliveries set status = 'failed', attempt_count = 7, last_attempt_at = now(), updated_at = now()
    where job_id = any(${sql.array(jobIds, 'text')}) ${only}`);
}

const recover = async (t: ExecutionContext, ctx: Ctx, endpointId: string, body: Record<string, string>): Promise<number> => {
  const res = await app.request('POST', `/v1/endpoints/${endpointId}/recover`, { key: ctx.key, body });
  t.is(res.status, 202, JSON.stringify(res.body));
  return res.body.deliveries;
};

const deliveryRow = z.object({ job_id: z.string(), status: z.string(), round: z.number(), attempt_count: z.number(), messages: z.number() });
/** Each delivery of these jobs, with its queue messages of its current round. */
const deliveriesOf = (jobIds: readonly string[]) => app.pool.any(sql.type(deliveryRow)`
  select d.job_id, d.status, d.round, d.attempt_count,
         (select count(*)::int from pgboss.job q where ${ofItsRound}) as messages
  from deliveries d where d.job_id = any(${sql.array(jobIds, 'text')}) order by d.job_id`);

const recoveryRow = z.object({ deliveries: z.number(), recovered: z.number(), completed: z.boolean() });
const recoveriesOf = (endpointId: string) => app.pool.any(sql.type(recoveryRow)`
  select deliveries, recovered, completed_at is not null as completed from endpoint_recoveries where endpoint_id = ${endpointId} order by id`);

const batch = (limit: number) => runRecoveries({ pool: app.pool, queue: app.queue, logger }, limit);

/** Runs batches until every recovery is complete. */
async function drain(): Promise<void> {
  for (let i = 0; i < 100; i += 1) {
    await batch(1000);
    const open = await app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`select count(*)::int as n from endpoint_recoveries where completed_at is null`);
    if (open === 0) return;
  }
  throw new Error('recoveries did not complete');
}

test.serial('a recovery while a previous one runs: the union is delivered, each delivery once, with batches running concurrently', async (t) => {
  const ctx = await setup(t);
  const endpointId = await createEndpoint(t, ctx);
  const since = new Date(Date.now() - 60_000).toISOString();
  const first: string[] = [];
  for (let i = 0; i < 5; i += 1) first.push(await createJob(t, ctx));
  await fail(first);

  t.is(await recover(t, ctx, endpointId, { since }), 5);
  t.is(await batch(2), 2);
  t.deepEqual((await recoveriesOf(endpointId)).map((r) => [r.deliveries, r.recovered, r.completed]), [[5, 2, false]]);

  // Two more give up after the first recovery: the second covers them and the first's rest.
  const later: string[] = [];
  for (let i = 0; i < 2; i += 1) later.push(await createJob(t, ctx));
  await fail(later);
  t.is(await recover(t, ctx, endpointId, { since }), 5);

  // Many one-delivery batches at once (as several workers would run them).
  await Promise.all(Array.from({ length: 12 }, () => batch(1)));
  await drain();

  const rows = await deliveriesOf([...first, ...later]);
  t.is(rows.length, 7);
  for (const row of rows) t.deepEqual({ ...row, job_id: '' }, { job_id: '', status: 'pending', round: 2, attempt_count: 0, messages: 1 }, row.job_id);
  const recoveries = await recoveriesOf(endpointId);
  t.deepEqual(recoveries.map((r) => [r.deliveries, r.completed]), [[5, true], [5, true]]);
  t.is(recoveries[0]!.recovered + recoveries[1]!.recovered, 7);
  t.true(recoveries[0]!.recovered <= 5);
});

test.serial('the set is fixed when the request runs: a delivery giving up afterwards, inside the range, is not swept in', async (t) => {
  const ctx = await setup(t);
  const endpointId = await createEndpoint(t, ctx);
  const before = await createJob(t, ctx);
  const after = await createJob(t, ctx);
  await fail([before]);
  const range = { since: new Date(Date.now() - 60_000).toISOString(), until: new Date(Date.now() + 3_600_000).toISOString() };
  t.is(await recover(t, ctx, endpointId, range), 1);
  await fail([after]);
  await drain();
  const rows = await deliveriesOf([before, after]);
  t.deepEqual(rows.find((r) => r.job_id === before)?.round, 2);
  t.deepEqual(rows.find((r) => r.job_id === after)?.status, 'failed');
  t.deepEqual(rows.find((r) => r.job_id === after)?.round, 1);
  t.deepEqual(await recoveriesOf(endpointId), [{ deliveries: 1, recovered: 1, completed: true }]);
});

test.serial('a failed delivery of a cancelled job is not recovered; a recovered job reopens as after a retry', async (t) => {
  const ctx = await setup(t);
  const target = await createEndpoint(t, ctx);
  const other = await createEndpoint(t, ctx);
  const since = new Date(Date.now() - 60_000).toISOString();

  // Failed towards `target`, then cancelled while the other target still waited.
  const cancelled = await createJob(t, ctx);
  await fail([cancelled], target);
  t.is((await app.request('POST', `/v1/webhook-jobs/${cancelled}/cancel`, { key: ctx.key })).status, 200);
  // Failed towards `target`, succeeded towards `other`: the job is discarded.
  const failed = await createJob(t, ctx);
  await fail([failed], target);
  await app.pool.query(sql.unsafe`update deliveries set status = 'succeeded', attempt_count = 2 where job_id = ${failed} and endpoint_id = ${other}`);
  const discarded = (await app.request('GET', `/v1/webhook-jobs/${failed}`, { key: ctx.key })).body;
  t.is(discarded.status, 'discarded');

  t.is(await recover(t, ctx, target, { since }), 1);
  await drain();
  const job = (await app.request('GET', `/v1/webhook-jobs/${failed}`, { key: ctx.key })).body;
  t.is(job.status, 'created');
  t.is(job.attempt_count, 0);
  t.is(job.completed_at, null);
  t.is(job.discarded_at, null);
  t.true(Math.abs(Date.parse(job.expires_at) - (Date.now() + HOURS_48)) < 600_000, job.expires_at);
  const cancelledRows = await app.pool.any(sql.type(z.object({ status: z.string(), round: z.number() }))`
    select status, round from deliveries where job_id = ${cancelled} order by endpoint_id = ${target} desc`);
  t.deepEqual(cancelledRows, [{ status: 'failed', round: 1 }, { status: 'cancelled', round: 1 }]);
  t.is((await app.request('GET', `/v1/webhook-jobs/${cancelled}`, { key: ctx.key })).body.status, 'discarded');
});

test.serial('a recovered job leaves out the delivery of an endpoint deleted before: it succeeds once the recovered target does', async (t) => {
  // As after a retry (test/webhook-jobs/cancel-retry.test.ts): the deleted endpoint is no longer a
  // target, and its delivery, dropped by the delete, no longer makes the job discarded.
  const ctx = await setup(t);
  const target = await createEndpoint(t, ctx);
  const deleted = await createEndpoint(t, ctx);
  const since = new Date(Date.now() - 60_000).toISOString();
  const job = await createJob(t, ctx);
  await fail([job], target);
  t.is((await app.request('DELETE', `/v1/endpoints/${deleted}`, { key: ctx.key })).status, 200);
  const read = async () => (await app.request('GET', `/v1/webhook-jobs/${job}`, { key: ctx.key })).body;
  t.is((await read()).status, 'discarded');

  t.is(await recover(t, ctx, target, { since }), 1);
  await drain();
  t.is((await read()).status, 'created');
  // The recovered delivery's attempt succeeds (as the worker's recording would leave it).
  await app.pool.query(sql.unsafe`
    update deliveries set status = 'succeeded', attempt_count = 1 where job_id = ${job} and endpoint_id = ${target}`);
  const done = await read();
  t.like(done, { status: 'succeeded', attempt_count: 1, discarded_at: null });
  const statuses = await app.pool.any(sql.type(z.object({ status: z.string(), left_out: z.boolean() }))`
    select status, left_out from deliveries where job_id = ${job} order by endpoint_id = ${target} desc`);
  t.deepEqual(statuses, [{ status: 'succeeded', left_out: false }, { status: 'dropped', left_out: true }]);
});

test.serial('a delete stops its endpoint\'s recoveries: restored before a batch ran, the endpoint gets none of them', async (t) => {
  // The batches complete a deleted endpoint's recoveries; restored before the next batch (within
  // the second between two, or behind another recovery's batches), the endpoint was live again
  // and the recovery requested before its delete restarted its deliveries after all.
  const ctx = await setup(t);
  const endpointId = await createEndpoint(t, ctx);
  const since = new Date(Date.now() - 60_000).toISOString();
  const job = await createJob(t, ctx);
  await fail([job]);
  const failed = await deliveriesOf([job]);
  t.like(failed[0], { status: 'failed', round: 1 });
  t.is(await recover(t, ctx, endpointId, { since }), 1);
  t.is((await app.request('DELETE', `/v1/endpoints/${endpointId}`, { key: ctx.key })).status, 200);
  t.is((await app.request('POST', `/v1/endpoints/${endpointId}/restore`, { key: ctx.key })).status, 200);
  await drain();
  t.deepEqual(await deliveriesOf([job]), failed, 'not restarted: no new round, no message of one');
  t.deepEqual(await recoveriesOf(endpointId), [{ deliveries: 1, recovered: 0, completed: true }]);
  t.is((await app.request('GET', `/v1/webhook-jobs/${job}`, { key: ctx.key })).body.status, 'discarded');
});

test.serial('a batch writes each job it reopens once, with the state its deliveries then give it', async (t) => {
  const ctx = await setup(t);
  const target = await createEndpoint(t, ctx);
  const other = await createEndpoint(t, ctx);
  const since = new Date(Date.now() - 60_000).toISOString();
  // Gave up towards `target`; towards `other` one waits for its 4th attempt, one succeeded.
  const waiting = await createJob(t, ctx);
  const succeeded = await createJob(t, ctx);
  await fail([waiting, succeeded], target);
  await app.pool.query(sql.unsafe`update deliveries set attempt_count = 3, next_attempt_at = now() + interval '1 hour'
    where job_id = ${waiting} and endpoint_id = ${other}`);
  await app.pool.query(sql.unsafe`update deliveries set status = 'succeeded', attempt_count = 2 where job_id = ${succeeded} and endpoint_id = ${other}`);

  t.is(await recover(t, ctx, target, { since }), 2);
  // The backend's counts not yet reported to the statistics are in the figure too: the difference.
  const updated = sql.type(z.object({ n: z.number() }))`select pg_stat_get_xact_tuples_updated('webhook_jobs'::regclass)::int as n`;
  const writes = await app.pool.transaction(async (tx) => {
    const before = await tx.oneFirst(updated);
    const { rowCount } = await tx.query(sql.unsafe`select * from run_endpoint_recoveries(1000)`);
    t.is(rowCount, 2);
    return await tx.oneFirst(updated) - before;
  });
  t.is(writes, 2, 'one row version per job');
  const jobs = await app.pool.any(sql.type(z.object({ id: z.string(), status: z.string(), attempt_count: z.number(), completed_at: z.unknown() }))`
    select id, status, attempt_count, completed_at from webhook_jobs where id in (${waiting}, ${succeeded}) order by id = ${waiting} desc`);
  t.deepEqual(jobs, [
    { id: waiting, status: 'awaiting_retry', attempt_count: 3, completed_at: null },
    { id: succeeded, status: 'created', attempt_count: 0, completed_at: null },
  ]);
});

test.serial('recovered deliveries are fetched after every fresh one, of any tenant; parked for a busy tenant and put back, they stay behind', async (t) => {
  /** The deliveries of up to `limit` messages a fetch takes now (with these organizations passed over). */
  const fetchDue = async (limit: number, busy: string[] = []) => ((await app.pool.oneFirst(sql.type(z.object({ m: z.unknown() }))`
    select fetch_due_messages('deliveries', ${limit}, ${sql.array(busy, 'text')}) as m`)) as { delivery_id: number }[]).map((m) => m.delivery_id);
  const deliveryIds = async (jobIds: readonly string[]) => [...await app.pool.anyFirst(sql.type(z.object({ id: z.number() }))`
    select id from deliveries where job_id = any(${sql.array(jobIds, 'text')}) order by id`)];
  // A batch's messages share one created_on, so a fetch takes them in no particular order.
  const sorted = (ids: readonly number[]) => [...ids].sort((x, y) => x - y);
  await fetchDue(100_000); // earlier tests' messages out of the way

  // Tenant A: three deliveries that gave up, recovered (a batch re-queues them).
  const a = await setup(t);
  const endpointId = await createEndpoint(t, a);
  const failed = [await createJob(t, a), await createJob(t, a), await createJob(t, a)];
  await fetchDue(100_000); // their first attempts' messages
  await fail(failed);
  t.is(await recover(t, a, endpointId, { since: new Date(Date.now() - 3_600_000).toISOString() }), 3);
  t.is(await batch(1000), 3);
  const recovered = await deliveryIds(failed);

  // Then a fresh job of tenant B and one of tenant A itself: both go ahead of the recovery.
  const b = await setup(t);
  await createEndpoint(t, b);
  const fresh = [await createJob(t, b), await createJob(t, a)];
  t.deepEqual(sorted(await fetchDue(2)), await deliveryIds(fresh), 'the fresh deliveries first, though queued later');
  t.deepEqual(sorted(await fetchDue(1000)), recovered, 'then the recovered ones');

  // With an organization passed over: the recovered ones are read after every fresh one, and
  // those of the busy organization are parked (-3) and put back behind the fresh ones (-2).
  const busyOrg = await app.pool.oneFirst(sql.type(z.object({ org_id: z.string() }))`
    select org_id from endpoints where id = ${endpointId}`);
  await fail(failed);
  await recover(t, a, endpointId, { since: new Date(Date.now() - 3_600_000).toISOString() });
  await batch(1000);
  const again = await deliveryIds(failed);
  t.deepEqual(await fetchDue(1000, [busyOrg]), [], 'nothing but the busy organization\'s recovered deliveries is due');
  const priorities = () => app.pool.anyFirst(sql.type(z.object({ priority: z.number() }))`
    select priority from pgboss.job where name = 'deliveries' and state = 'created'
      and (data->>'deliveryId')::bigint = any(${sql.array(again, 'int8')}) order by priority`);
  t.deepEqual(await priorities(), [-3, -3, -3], 'parked as recovered deliveries');
  const newer = [await createJob(t, b)];
  await app.pool.query(sql.unsafe`select unpark_messages('deliveries', '{}')`);
  t.deepEqual(await priorities(), [-2, -2, -2], 'put back behind the fresh ones, not at 0');
  t.deepEqual(await fetchDue(1), await deliveryIds(newer), 'a newer fresh delivery still first');
  t.deepEqual(sorted(await fetchDue(1000)), again);
});

test.serial('an until the API showed (milliseconds) takes a delivery that gave up within that millisecond', async (t) => {
  // A probe: a job completed at 15:00:04.901Z (as GET shows it) whose delivery gave up at
  // 15:00:04.901486 (as stored) was not recovered by until = 15:00:04.901Z: 202, deliveries 0.
  const ctx = await setup(t);
  const endpointId = await createEndpoint(t, ctx);
  const job = await createJob(t, ctx);
  await fail([job]);
  const gaveUp = await app.pool.oneFirst(sql.type(z.object({ at: z.string() }))`
    update deliveries set gave_up_at = date_trunc('milliseconds', gave_up_at) + interval '486 microseconds'
    where job_id = ${job} returning to_char(gave_up_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as at`);
  t.is(await recover(t, ctx, endpointId, { since: new Date(Date.parse(gaveUp) - 60_000).toISOString(), until: gaveUp }), 1);
});
