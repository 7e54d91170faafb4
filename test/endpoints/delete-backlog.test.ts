// An endpoint's delete drops at most 1,000 of its waiting deliveries in the request, an
// application's none; the worker's upkeep drops the rest in batches
// (drop_deliveries_of_deleted_endpoints), so a delete's cost does not grow with a backlog (a
// receiver down for two days holds hundreds of thousands). A restore waits until they are all
// dropped. No worker here: each test runs the upkeep's step itself, with the function the
// upkeep calls. The backlog is written in bulk, as the held deliveries of an endpoint that was
// paused while jobs came.
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { makeLogger } from '../../src/logger.ts';
import { runDeletionBatches, runReleasesAndProbes } from '../../src/worker/upkeep.ts';
import { assertError, startTestApp } from '../helpers/app.ts';
import * as fixtures from '../helpers/fixtures.ts';
import { session } from '../helpers/sessions.ts';

const app = startTestApp();
const logger = makeLogger('silent');
const sweep = async (limit: number) => (await runDeletionBatches({ pool: app.pool, logger }, { deliveries: limit, jobs: 1000 })).deliveries;

let jobNumber = 0;

/** `count` jobs of the application, each with a held delivery to each of `endpoints`. */
async function heldBacklog(orgId: string, appId: string, endpoints: readonly string[], count: number): Promise<void> {
  const first = jobNumber + 1;
  jobNumber += count;
  await app.pool.query(sql.unsafe`
    insert into webhook_jobs (id, org_id, environment, application_id, event_type, payload, expires_at)
    select 'job_' || lpad(i::text, 27, '0'), ${orgId}, 'live', ${appId}, 'order.created', '{}', now() + interval '48 hours'
    from generate_series(${first}::int, ${jobNumber}::int) i`);
  await app.pool.query(sql.unsafe`
    insert into deliveries (job_id, endpoint_id, org_id, application_id, status, next_attempt_at)
    select 'job_' || lpad(i::text, 27, '0'), e.id, ${orgId}, ${appId}, 'held', now()
    from generate_series(${first}::int, ${jobNumber}::int) i cross join unnest(${sql.array(endpoints, 'text')}::text[]) e(id)`);
}

/** Deliveries of these endpoints by status, and the endpoints' deliveries_dropped_at. */
async function stored(endpoints: readonly string[]) {
  const deliveries = Object.fromEntries((await app.pool.any(sql.type(z.object({ status: z.string(), n: z.number() }))`
    select status, count(*)::int as n from deliveries where endpoint_id = any(${sql.array(endpoints, 'text')}) group by status`))
    .map((r) => [r.status, r.n]));
  const marks = await app.pool.anyFirst(sql.type(z.object({ deliveries_dropped_at: z.string().nullable() }))`
    select deliveries_dropped_at from endpoints where id = any(${sql.array(endpoints, 'text')}) order by id`);
  return { deliveries, done: marks.every((m) => m !== null) };
}

/** The stored status of every job with a delivery to these endpoints, counted. */
async function jobStatuses(endpoints: readonly string[]) {
  return Object.fromEntries((await app.pool.any(sql.type(z.object({ status: z.string(), n: z.number() }))`
    select j.status, count(*)::int as n from webhook_jobs j
    where j.id in (select d.job_id from deliveries d where d.endpoint_id = any(${sql.array(endpoints, 'text')}))
    group by j.status`)).map((r) => [r.status, r.n]));
}

/** An organization with an application, its endpoint and a second one of the same application. */
async function setup(t: ExecutionContext) {
  while (await sweep(10_000) > 0); // what an earlier test left, so that each test counts its own
  const { key, orgId, appId } = await fixtures.createOrgWithApplication(app, t, ['order.created']);
  const by = { on: app, key, t };
  const endpoint = (await fixtures.createEndpoint(by, { application_id: appId, event_types: ['order.created'] })).id as string;
  const other = (await fixtures.createEndpoint(by, { application_id: appId, event_types: ['order.created'] })).id as string;
  return { key, orgId, appId, endpoint, other };
}

test.serial('an endpoint delete drops 1,000 of its held deliveries, the upkeep the rest in batches; a restore waits for them', async (t) => {
  const { key, orgId, appId, endpoint, other } = await setup(t);
  await heldBacklog(orgId, appId, [endpoint], 1_500);
  await heldBacklog(orgId, appId, [other], 10);

  t.is((await app.request('DELETE', `/v1/endpoints/${endpoint}`, { key })).status, 200);
  t.deepEqual(await stored([endpoint]), { deliveries: { dropped: 1_000, held: 500 }, done: false });
  t.deepEqual(await jobStatuses([endpoint]), { discarded: 1_000, created: 500 }, 'each job follows its own delivery');
  const refused = await app.request('POST', `/v1/endpoints/${endpoint}/restore`, { key });
  assertError(t, refused, 409, 'invalid_state');
  t.regex(refused.body.error.message, /still being dropped/);

  t.is(await sweep(300), 300);
  t.deepEqual(await stored([endpoint]), { deliveries: { dropped: 1_300, held: 200 }, done: false });
  t.is(await sweep(300), 200);
  t.is(await sweep(300), 0, 'nothing left: the endpoint is marked');
  t.deepEqual(await stored([endpoint]), { deliveries: { dropped: 1_500 }, done: true });
  t.deepEqual(await jobStatuses([endpoint]), { discarded: 1_500 });
  t.deepEqual((await stored([other])).deliveries, { held: 10 }, 'the other endpoint\'s deliveries are not touched');

  const restored = await app.request('POST', `/v1/endpoints/${endpoint}/restore`, { key });
  t.is(restored.status, 200, JSON.stringify(restored.body));
  t.deepEqual(await stored([endpoint]), { deliveries: { dropped: 1_500 }, done: false }, 'live again: no mark; its deliveries stay dropped');
});

test.serial('an application delete leaves all its endpoints\' waiting deliveries to the upkeep', async (t) => {
  const { key, orgId, appId, endpoint, other } = await setup(t);
  await heldBacklog(orgId, appId, [endpoint, other], 1_100);
  t.is((await app.request('DELETE', `/v1/applications/${appId}`, { key })).status, 200);
  t.deepEqual(await stored([endpoint, other]), { deliveries: { held: 2_200 }, done: false }, 'the delete drops none itself');
  t.is(await sweep(2_000), 2_000);
  t.is(await sweep(2_000), 200);
  t.is(await sweep(10_000), 0);
  t.deepEqual(await stored([endpoint, other]), { deliveries: { dropped: 2_200 }, done: true });
  t.deepEqual(await jobStatuses([endpoint, other]), { discarded: 1_100 });
});

test.serial('the upkeep passes over a delivery whose job another transaction holds, and marks the endpoint only once it is dropped too', async (t) => {
  const { key, orgId, appId, endpoint } = await setup(t);
  await heldBacklog(orgId, appId, [endpoint], 1_003);
  const holder = await session(t, app.databaseUrl);
  t.is((await app.request('DELETE', `/v1/endpoints/${endpoint}`, { key })).status, 200);
  const { rows } = await holder.query<{ job_id: string }>(
    `select job_id from deliveries where endpoint_id = $1 and status = 'held' order by id limit 1`, [endpoint]);
  await holder.query('begin');
  await holder.query('select 1 from webhook_jobs where id = $1 for no key update', [rows[0]?.job_id]);

  t.is(await sweep(100), 2, 'the two nobody holds');
  t.is(await sweep(100), 0);
  t.deepEqual(await stored([endpoint]), { deliveries: { dropped: 1_002, held: 1 }, done: false });
  await holder.query('commit');
  t.is(await sweep(100), 1);
  t.is(await sweep(100), 0);
  t.deepEqual(await stored([endpoint]), { deliveries: { dropped: 1_003 }, done: true });
});

test.serial('a held delivery a delete left, whose job\'s window ends before the upkeep drops it, is dropped, not failed', async (t) => {
  const { key, orgId, appId, endpoint } = await setup(t);
  await heldBacklog(orgId, appId, [endpoint], 1_002);
  t.is((await app.request('DELETE', `/v1/endpoints/${endpoint}`, { key })).status, 200);
  await app.pool.query(sql.unsafe`
    update webhook_jobs set expires_at = now() - interval '1 second'
    where id in (select job_id from deliveries where endpoint_id = ${endpoint} and status = 'held')`);
  await runReleasesAndProbes({ pool: app.pool, queue: app.queue, logger });
  t.deepEqual((await stored([endpoint])).deliveries, { dropped: 1_002 });
  t.deepEqual(await jobStatuses([endpoint]), { discarded: 1_002 });
});
