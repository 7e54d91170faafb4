// POST /v1/endpoints/{id}/recover end to end: the real API and worker, a real receiver that is
// down (500) and then up. Only the deliveries that gave up in the range come again, as a new
// round (attempts from 1); cancelled ones and those outside the range do not; recovered
// deliveries of a paused endpoint are held until it is active. Validation and isolation too.
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import pg from 'pg';
import { assertError, startTestApp, type TestApp } from '../helpers/app.ts';
import * as fixtures from '../helpers/fixtures.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { until } from '../helpers/until.ts';

const app = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true', RETRY_SCHEDULE: '1,1,1,1,1,1', CIRCUIT_BREAKER_THRESHOLD: '1000' }, { worker: true });

const CAP_MS = 60_000;
const DAY_MS = 86_400_000;
const down = () => ({ status: 500, body: 'down' });
const up = () => ({ status: 200, body: 'ok' });

type Ctx = { on: TestApp; key: string; orgId: string; appId: string; eventType: string };

async function setup(t: ExecutionContext, on: TestApp = app): Promise<Ctx> {
  const { key, orgId } = await on.createOrg();
  const application = await fixtures.createApplication({ t, on, key }, { name: 'Recover Co' });
  await fixtures.createEventType({ t, on, key }, 'order.created');
  return { on, key, orgId, appId: application.id, eventType: 'order.created' };
}

async function createEndpoint(t: ExecutionContext, ctx: Ctx, url: string): Promise<string> {
  return (await fixtures.createEndpoint({ t, on: ctx.on, key: ctx.key }, { application_id: ctx.appId, url, event_types: [ctx.eventType] })).id;
}

async function createJob(t: ExecutionContext, ctx: Ctx): Promise<string> {
  return (await fixtures.createJob({ t, on: ctx.on, key: ctx.key }, { application_id: ctx.appId, event_type: ctx.eventType, payload: { n: 1 } })).id;
}

async function getJob(ctx: Ctx, id: string) {
  const res = await ctx.on.request('GET', `/v1/webhook-jobs/${id}`, { key: ctx.key });
  if (res.status !== 200) throw new Error(`GET job ${id}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

const waitStatus = async (ctx: Ctx, id: string, status: string) => {
  let last = '';
  try {
    return await until(`job ${id} to be ${status}`, async () => {
      const job = await getJob(ctx, id);
      last = `${job.status} after ${job.deliveries.length} attempt(s)`;
      return job.status === status ? job : undefined;
    }, CAP_MS);
  } catch (error) {
    throw new Error(`${(error as Error).message} (last seen: ${last})`);
  }
};

const recover = (ctx: Ctx, endpointId: string, body: unknown, key = ctx.key) =>
  ctx.on.request('POST', `/v1/endpoints/${endpointId}/recover`, { key, body });

const deliveryRow = z.object({ status: z.string(), round: z.number(), attempt_count: z.number() });
const deliveryOf = (ctx: Ctx, jobId: string) =>
  ctx.on.pool.one(sql.type(deliveryRow)`select status, round, attempt_count from deliveries where job_id = ${jobId}`);

const recoveryRow = z.object({ deliveries: z.number(), recovered: z.number(), completed: z.boolean() });
const recoveriesOf = (ctx: Ctx, endpointId: string) => ctx.on.pool.any(sql.type(recoveryRow)`
  select deliveries, recovered, completed_at is not null as completed from endpoint_recoveries where endpoint_id = ${endpointId} order by id`);

/** Jobs that failed at the receiver (down), each with all its attempts, one after the other. */
async function failedJobs(t: ExecutionContext, ctx: Ctx, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i += 1) ids.push(await createJob(t, ctx));
  for (const id of ids) await waitStatus(ctx, id, 'discarded');
  return ids;
}

test('after an outage, recover delivers again exactly the deliveries that gave up in the range: not cancelled ones, not earlier ones', async (t) => {
  const ctx = await setup(t);
  const receiver: Receiver = await startReceiver(down);
  const endpointId = await createEndpoint(t, ctx, receiver.at('/hook'));

  // Before the range: one job gives up.
  const [early] = await failedJobs(t, ctx, 1);
  const since = new Date(Date.now() + 5).toISOString();
  await new Promise((resolve) => setTimeout(resolve, 20));
  // In the range: one job is cancelled (while the endpoint is paused, so it cannot start
  // meanwhile), two jobs give up.
  const patch = (status: string) => ctx.on.request('PATCH', `/v1/endpoints/${endpointId}`, { key: ctx.key, body: { status } });
  t.is((await patch('paused')).status, 200);
  const cancelled = await createJob(t, ctx);
  const cancelRes = await ctx.on.request('POST', `/v1/webhook-jobs/${cancelled}/cancel`, { key: ctx.key });
  t.is(cancelRes.status, 200, JSON.stringify(cancelRes.body));
  t.is((await patch('active')).status, 200);
  const inRange = await failedJobs(t, ctx, 2);
  for (const id of inRange) t.is((await deliveryOf(ctx, id)).status, 'failed');
  t.is((await deliveryOf(ctx, cancelled)).status, 'cancelled');
  const arrivalsBefore = new Map([early!, cancelled, ...inRange].map((id) => [id, receiver.forJob(id).length]));
  t.is(arrivalsBefore.get(early!), 7);

  receiver.reply = up;
  const res = await recover(ctx, endpointId, { since });
  t.is(res.status, 202, JSON.stringify(res.body));
  t.deepEqual(res.body, { id: endpointId, status: 'recovering', deliveries: 2 });

  for (const id of inRange) {
    const job = await waitStatus(ctx, id, 'succeeded');
    // The new round's attempts count from 1 again, after the seven of the first round.
    t.deepEqual(job.deliveries.map((d: { attempt: number; success: boolean }) => [d.attempt, d.success]),
      [[1, false], [2, false], [3, false], [4, false], [5, false], [6, false], [7, false], [1, true]]);
    t.is(job.attempt_count, 1);
    t.is(receiver.forJob(id).length, 8);
  }
  const [recovery] = await until('the recovery to complete', async () => {
    const rows = await recoveriesOf(ctx, endpointId);
    return rows[0]?.completed ? rows : undefined;
  }, CAP_MS);
  t.deepEqual(recovery, { deliveries: 2, recovered: 2, completed: true });
  // The recovery is complete and did not touch these: nothing more can come for them.
  t.deepEqual(await deliveryOf(ctx, early!), { status: 'failed', round: 1, attempt_count: 7 });
  t.is((await deliveryOf(ctx, cancelled)).status, 'cancelled');
  t.is(receiver.forJob(early!).length, 7);
  t.is(receiver.forJob(cancelled).length, arrivalsBefore.get(cancelled) ?? -1);
  t.is((await getJob(ctx, early!)).status, 'discarded');

  // Recovering the same range again finds nothing: they are no longer given up.
  const again = await recover(ctx, endpointId, { since, until: new Date().toISOString() });
  t.deepEqual(again.body, { id: endpointId, status: 'recovering', deliveries: 0 });
});

test('recovered deliveries of a paused endpoint are held, and delivered once it is active again', async (t) => {
  const ctx = await setup(t);
  const receiver = await startReceiver(down);
  const endpointId = await createEndpoint(t, ctx, receiver.at('/hook'));
  const since = new Date(Date.now() - 60_000).toISOString();
  const [jobId] = await failedJobs(t, ctx, 1);
  receiver.reply = up;
  const paused = await ctx.on.request('PATCH', `/v1/endpoints/${endpointId}`, { key: ctx.key, body: { status: 'paused' } });
  t.is(paused.status, 200, JSON.stringify(paused.body));

  const res = await recover(ctx, endpointId, { since });
  t.deepEqual(res.body, { id: endpointId, status: 'recovering', deliveries: 1 });
  await until('the recovered delivery to be held', async () => (await deliveryOf(ctx, jobId!)).status === 'held', CAP_MS);
  t.is(receiver.forJob(jobId!).length, 7);
  t.deepEqual(await deliveryOf(ctx, jobId!), { status: 'held', round: 2, attempt_count: 0 });

  const active = await ctx.on.request('PATCH', `/v1/endpoints/${endpointId}`, { key: ctx.key, body: { status: 'active' } });
  t.is(active.status, 200, JSON.stringify(active.body));
  await waitStatus(ctx, jobId!, 'succeeded');
  t.is(receiver.forJob(jobId!).length, 8);
});

test('a delete stops a recovery whose batch it overtook: nothing is sent to the endpoint, not even once it is restored', async (t) => {
  // A recovery batch checks its endpoint when it starts and then waits for its jobs' locks (a
  // retry's, a recording's, another batch's: here a test transaction's). A delete and a restore
  // made while it waited both went through (the delivery was still failed: no check of the
  // restore saw it), and the batch then restarted the delivery, which the worker sent to the
  // restored endpoint although its delete came after the recover request.
  const ctx = await setup(t);
  // Gives up at its first attempt (a Retry-After past the job's window).
  const receiver = await startReceiver(() => ({ status: 503, body: 'later', headers: { 'retry-after': '999999' } }));
  const endpointId = await createEndpoint(t, ctx, receiver.at('/hook'));
  const since = new Date(Date.now() - 60_000).toISOString();
  const jobId = await createJob(t, ctx);
  await waitStatus(ctx, jobId, 'discarded');
  t.deepEqual(await deliveryOf(ctx, jobId), { status: 'failed', round: 1, attempt_count: 1 });
  receiver.reply = up;

  // The job held, the worker's batch of the recovery waits for it.
  const locker = new pg.Client({ connectionString: ctx.on.databaseUrl });
  await locker.connect();
  let released = false;
  const release = async () => {
    if (released) return;
    released = true;
    await locker.query('commit');
    await locker.end();
  };
  t.teardown(release);
  await locker.query('begin');
  await locker.query('select 1 from webhook_jobs where id = $1 for update', [jobId]);
  t.deepEqual((await recover(ctx, endpointId, { since })).body, { id: endpointId, status: 'recovering', deliveries: 1 });
  await until('the recovery batch waits for the job', async () => (await ctx.on.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from pg_stat_activity
    where wait_event_type = 'Lock' and query like '%run_endpoint_recoveries%'`)) > 0, CAP_MS);

  t.is((await ctx.on.request('DELETE', `/v1/endpoints/${endpointId}`, { key: ctx.key })).status, 200);
  const restoring = ctx.on.request('POST', `/v1/endpoints/${endpointId}/restore`, { key: ctx.key });
  await new Promise((resolve) => setTimeout(resolve, 300));
  await release();
  const restored = await restoring;
  t.is(restored.status, 200, JSON.stringify(restored.body));

  const recovery = await until('the recovery to complete', async () => {
    const rows = await recoveriesOf(ctx, endpointId);
    return rows[0]?.completed ? rows[0] : undefined;
  }, CAP_MS);
  t.deepEqual(recovery, { deliveries: 1, recovered: 0, completed: true }, 'stopped by the delete');
  // Time for a restarted delivery to be claimed and sent.
  await new Promise((resolve) => setTimeout(resolve, 1500));
  t.deepEqual(await deliveryOf(ctx, jobId), { status: 'failed', round: 1, attempt_count: 1 });
  t.is(receiver.forJob(jobId).length, 1, 'sent once, before the recover request');
  t.is((await getJob(ctx, jobId)).status, 'discarded');
});

test('bad ranges and bodies: 400 validation_error naming the field; nothing is recorded', async (t) => {
  const ctx = await setup(t);
  const endpointId = await createEndpoint(t, ctx, 'http://127.0.0.1:9/hook');
  const now = Date.now();
  const iso = (ms: number) => new Date(ms).toISOString();
  const cases: Array<[unknown, string]> = [
    [{}, 'since'],
    [{ since: 'yesterday' }, 'since'],
    [{ since: '2026-11-22T10:00:00' }, 'since'],
    [{ since: 12 }, 'since'],
    [{ since: iso(now - 15 * DAY_MS) }, 'since'],
    [{ since: iso(now - 60_000), until: iso(now - 60_000) }, 'until'],
    [{ since: iso(now - 60_000), until: iso(now - 120_000) }, 'until'],
    [{ since: iso(now - 60_000), until: 'later' }, 'until'],
    [{ since: iso(now + 3_600_000) }, 'since'],
    [{ since: iso(now - 60_000), extra: true }, 'extra'],
  ];
  for (const [body, path] of cases) {
    const res = await recover(ctx, endpointId, body);
    assertError(t, res, 400, 'validation_error');
    t.true(res.body.error.details.some((d: { path: string }) => d.path === path), `${JSON.stringify(body)}: ${JSON.stringify(res.body)}`);
  }
  const raw = await ctx.on.request('POST', `/v1/endpoints/${endpointId}/recover`, { key: ctx.key, rawBody: '{"since":', headers: { 'content-type': 'application/json' } });
  assertError(t, raw, 400, 'validation_error');
  // A day that does not exist is said to be no date, and only that (a probe read "must be at
  // most 14 days ago" beside it: 30 February was read as 2 March).
  const noDay = await recover(ctx, endpointId, { since: '2026-02-30T10:00:00Z' });
  assertError(t, noDay, 400, 'validation_error');
  t.deepEqual(noDay.body.error.details.map((d: { message: string }) => d.message), ['must be an ISO 8601 date-time with a time zone, e.g. 2026-11-22T10:00:00Z']);
  // Valid JSON that is not an object: said so, not "is not valid JSON" (a probe).
  for (const bare of ['null', '3', '"since"', 'true']) {
    const res = await ctx.on.request('POST', `/v1/endpoints/${endpointId}/recover`, { key: ctx.key, rawBody: bare, headers: { 'content-type': 'application/json' } });
    assertError(t, res, 400, 'validation_error');
    t.is(res.body.error.message, 'The request body must be a JSON object.', bare);
  }
  t.deepEqual(await recoveriesOf(ctx, endpointId), []);
  // 14 days ago, and an explicit until: fine.
  const okRes = await recover(ctx, endpointId, { since: iso(now - 14 * DAY_MS + 60_000), until: iso(now + DAY_MS) });
  t.deepEqual(okRes.body, { id: endpointId, status: 'recovering', deliveries: 0 });
});

test('another organization, another environment, a deleted or malformed endpoint: 404; a read-only key: 403', async (t) => {
  const ctx = await setup(t);
  const endpointId = await createEndpoint(t, ctx, 'http://127.0.0.1:9/hook');
  const body = { since: new Date(Date.now() - 60_000).toISOString() };
  const other = await app.createOrg();
  assertError(t, await recover(ctx, endpointId, body, other.key), 404, 'not_found');
  const testKey = (await fixtures.createApiKey({ t, on: app, key: ctx.key }, { environment: 'test', scopes: ['*'] })).key;
  assertError(t, await recover(ctx, endpointId, body, testKey), 404, 'not_found');
  const readOnly = (await fixtures.createApiKey({ t, on: app, key: ctx.key }, { scopes: ['endpoints:read'] })).key;
  assertError(t, await recover(ctx, endpointId, body, readOnly), 403, 'forbidden');
  const writer = (await fixtures.createApiKey({ t, on: app, key: ctx.key }, { scopes: ['endpoints:write'] })).key;
  t.is((await recover(ctx, endpointId, body, writer)).status, 202);
  assertError(t, await recover(ctx, 'ep_nope', body), 404, 'not_found');
  assertError(t, await recover(ctx, 'ep_3MRoiOGljZNTyxKbuM2hR2jeyER', body), 404, 'not_found');
  t.is((await ctx.on.request('DELETE', `/v1/endpoints/${endpointId}`, { key: ctx.key })).status, 200);
  assertError(t, await recover(ctx, endpointId, body), 404, 'not_found');
  t.is((await recoveriesOf(ctx, endpointId)).length, 1);
});
