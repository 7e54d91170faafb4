// Deletes and restores that run at the same time as other writes to the same rows: each race of
// the probe in one fixed interleaving, made with a row lock this test holds itself (its own
// pg.Client) and released once the app's statements wait for it (pg_stat_activity), never a sleep.
//
// - A restore racing a forced delete of one of its event types failed the foreign key (a 500):
//   it now leaves that event type out, as a restore does for any event type that is gone.
// - Row locks taken in opposite orders deadlocked (an application delete and an endpoint delete,
//   a forced event type delete and an endpoint PATCH or delete, two restores in one application).
//   PostgreSQL would break such a cycle after deadlock_timeout (1 s) and slonik would retry the
//   victim, which hides most of them (the probe's 500s were the retries running out): this file's
//   sessions, the app's included, wait 10 minutes before that check (PGOPTIONS, read by pg), so
//   that a cycle stays for the test to find (pg_blocking_pids), and to break by cancelling it.
import test, { type ExecutionContext } from 'ava';
import pg from 'pg';
import { startTestApp, type Response } from './helpers/app.ts';
import { answeredOrCycle, twoSessions, waitingOn } from './helpers/sessions.ts';
import { until } from './helpers/until.ts';
import { createApplication, createEndpoint, createEventType, createJob } from './helpers/fixtures.ts';
import { translateDatabaseError } from '../src/errors.ts';
import { makeLogger } from '../src/logger.ts';
import { runDeletionBatches } from '../src/worker/upkeep.ts';

process.env.PGOPTIONS = '-c deadlock_timeout=10min';
const app = startTestApp();

async function clients(t: ExecutionContext) {
  const [holder, watcher] = await twoSessions(t, app.databaseUrl);
  const timeout = await watcher.query<{ deadlock_timeout: string }>('show deadlock_timeout');
  t.is(timeout.rows[0]?.deadlock_timeout, '10min', 'the sessions of this file leave lock cycles for the test to find');
  return { holder, watcher };
}

/**
 * Waits until every answer is in, or until the app's statements wait for each other in a
 * cycle: then cancels them (each answers 503) and says so.
 */
async function settle(t: ExecutionContext, watcher: pg.Client, answers: Promise<Response>[]): Promise<Response[]> {
  const all = Promise.all(answers);
  t.is(await answeredOrCycle(watcher, all), 'answered', 'the requests waited for each other in a cycle (a deadlock)');
  return all;
}

/**
 * A new organization's application, the test's two sessions (one holds locks, one watches), and
 * makers of an endpoint subscribed to `eventTypes` and of a job of `eventType` in that application.
 */
async function setup(t: ExecutionContext) {
  const org = await app.createOrg();
  const by = { on: app, key: org.key, t };
  const application = await createApplication(by);
  const subscriber = (eventTypes = ['order.created']) => createEndpoint(by, { application_id: application.id, event_types: eventTypes });
  const newJob = (eventType = 'order.created') => createJob(by, { application_id: application.id, event_type: eventType, payload: { n: 1 } });
  return { by, key: org.key, application, subscriber, newJob, ...await clients(t) };
}

/**
 * The job's stored status, and whether it is deleted, as a DBA reads them. An application's
 * delete leaves its jobs and its endpoints' waiting deliveries to the worker's upkeep: its
 * steps are run first (no worker here).
 */
async function storedJob(watcher: pg.Client, id: string) {
  for (;;) {
    const done = await runDeletionBatches({ pool: app.pool, logger: makeLogger('silent') });
    if (done.deliveries === 0 && done.jobs === 0) break;
  }
  return (await watcher.query<{ status: string; deleted: boolean }>(
    'select status, deleted_at is not null as deleted from webhook_jobs where id = $1', [id])).rows[0];
}

test.serial('a restore racing a forced delete of one of its event types subscribes to the others: 200, not a 500', async (t) => {
  const { by, key, application, subscriber, holder, watcher } = await setup(t);
  const gone = await createEventType(by, 'order.gone');
  const kept = await createEventType(by, 'order.kept');
  const endpoint = await subscriber(['order.gone', 'order.kept']);
  t.is((await app.request('DELETE', `/v1/endpoints/${endpoint.id}`, { key })).status, 200);

  // What a forced delete does, stopped before its commit: the event type's row locked and deleted.
  await holder.query('begin');
  await holder.query('select 1 from event_types where id = $1 for update', [gone.id]);
  await holder.query('delete from event_types where id = $1', [gone.id]);
  const restore = app.request('POST', `/v1/endpoints/${endpoint.id}/restore`, { key });
  await waitingOn(watcher, 'restore_endpoint');
  await holder.query('commit');

  const [res] = await settle(t, watcher, [restore]);
  t.is(res?.status, 200, JSON.stringify(res?.body));
  t.deepEqual(res?.body.event_types, ['order.kept'], 'subscribed again to the event type that still exists');
  const read = await app.request('GET', `/v1/endpoints/${endpoint.id}`, { key });
  t.deepEqual(read.body.event_types, ['order.kept']);
  t.is((await app.request('GET', `/v1/event-types/${kept.id}`, { key })).body.subscriber_count, 1);
  t.is((await app.request('GET', `/v1/event-types/${gone.id}`, { key })).status, 404);
  t.is((await app.request('GET', `/v1/applications/${application.id}`, { key })).body.endpoints_count, 1);
});

/**
 * An endpoint subscribed to a new event type, and its delete sent and stopped at its
 * subscriptions: the holder session locks the event type (as their count trigger does) until it
 * rolls back.
 */
async function endpointDeleteStoppedAtSubscriptions(s: Awaited<ReturnType<typeof setup>>) {
  const eventType = await createEventType(s.by, 'order.created');
  const endpoint = await s.subscriber();
  await s.holder.query('begin');
  await s.holder.query('select 1 from event_types where id = $1 for no key update', [eventType.id]);
  const endpointDelete = app.request('DELETE', `/v1/endpoints/${endpoint.id}`, { key: s.key });
  await waitingOn(s.watcher, 'update endpoints set deleted_at');
  return { eventType, endpoint, endpointDelete };
}

test.serial('an endpoint delete racing its application\'s delete: both answer 200, no deadlock', async (t) => {
  const s = await setup(t);
  const { key, application, holder, watcher } = s;
  // Before the fix the endpoint delete held the endpoint there, and wanted the application only after.
  const { eventType, endpoint, endpointDelete } = await endpointDeleteStoppedAtSubscriptions(s);
  const applicationDelete = app.request('DELETE', `/v1/applications/${application.id}`, { key });
  await waitingOn(watcher, 'update applications set deleted_at');
  await holder.query('rollback');

  const [a, b] = await settle(t, watcher, [endpointDelete, applicationDelete]);
  t.is(a?.status, 200, JSON.stringify(a?.body));
  t.is(b?.status, 200, JSON.stringify(b?.body));
  t.is((await app.request('GET', `/v1/endpoints/${endpoint.id}`, { key })).status, 404);
  t.is((await app.request('GET', `/v1/applications/${application.id}`, { key })).status, 404);
  t.is((await app.request('GET', `/v1/event-types/${eventType.id}`, { key })).body.subscriber_count, 0);
});

test.serial('a PATCH queued behind an endpoint delete, and the application\'s delete behind it: no deadlock', async (t) => {
  // The probe's three-way cycle: the PATCH, first in line for the endpoint, held the application
  // delete back, which held the application the endpoint delete wanted.
  const s = await setup(t);
  const { key, application, holder, watcher } = s;
  const { endpoint, endpointDelete } = await endpointDeleteStoppedAtSubscriptions(s);
  const patch = app.request('PATCH', `/v1/endpoints/${endpoint.id}`, { key, body: { status: 'paused' } });
  await waitingOn(watcher, 'for update');
  const applicationDelete = app.request('DELETE', `/v1/applications/${application.id}`, { key });
  await waitingOn(watcher, 'update applications set deleted_at');
  await holder.query('rollback');

  const [deleted, patched, applicationDeleted] = await settle(t, watcher, [endpointDelete, patch, applicationDelete]);
  t.is(deleted?.status, 200, JSON.stringify(deleted?.body));
  t.is(patched?.status, 404, 'the endpoint was deleted before the PATCH got to it');
  t.is(applicationDeleted?.status, 200, JSON.stringify(applicationDeleted?.body));
});

test.serial('a forced event type delete racing a PATCH of a subscriber\'s event types: no deadlock', async (t) => {
  const { by, key, subscriber, holder, watcher } = await setup(t);
  const dropped = await createEventType(by, 'order.dropped');
  const deleted = await createEventType(by, 'order.deleted');
  const endpoint = await subscriber(['order.deleted', 'order.dropped']);

  // The PATCH stops at the subscription it removes (the count trigger locks that event type),
  // its endpoint locked; the forced delete comes then.
  await holder.query('begin');
  await holder.query('select 1 from event_types where id = $1 for no key update', [dropped.id]);
  const patch = app.request('PATCH', `/v1/endpoints/${endpoint.id}`, { key, body: { event_types: ['order.deleted'] } });
  await waitingOn(watcher, 'delete from endpoint_event_types');
  const forced = app.request('DELETE', `/v1/event-types/${deleted.id}?force=true`, { key });
  await waitingOn(watcher, '', 2);
  await holder.query('rollback');

  const [patched, forcedDelete] = await settle(t, watcher, [patch, forced]);
  t.is(patched?.status, 200, JSON.stringify(patched?.body));
  t.deepEqual(patched?.body.event_types, ['order.deleted'], 'the PATCH came first');
  t.is(forcedDelete?.status, 200, JSON.stringify(forcedDelete?.body));
  const read = await app.request('GET', `/v1/endpoints/${endpoint.id}`, { key });
  t.deepEqual(read.body.event_types, [], 'the forced delete took the subscription the PATCH kept');
  t.is((await app.request('GET', `/v1/event-types/${dropped.id}`, { key })).body.subscriber_count, 0);
});

test.serial('a forced event type delete racing an endpoint delete: no deadlock', async (t) => {
  const { by, key, application, subscriber, newJob, holder, watcher } = await setup(t);
  const eventType = await createEventType(by, 'order.created');
  const endpoint = await subscriber();
  await newJob();

  // The endpoint delete stops at its subscription (its rows locked, its deliveries dropped,
  // its subscriptions not yet).
  await holder.query('begin');
  await holder.query('select 1 from endpoint_event_types where endpoint_id = $1 for update', [endpoint.id]);
  const endpointDelete = app.request('DELETE', `/v1/endpoints/${endpoint.id}`, { key });
  await waitingOn(watcher, 'update endpoints set deleted_at');
  const forced = app.request('DELETE', `/v1/event-types/${eventType.id}?force=true`, { key });
  await waitingOn(watcher, '', 2);
  await holder.query('rollback');

  const [a, b] = await settle(t, watcher, [endpointDelete, forced]);
  t.is(a?.status, 200, JSON.stringify(a?.body));
  t.is(b?.status, 200, JSON.stringify(b?.body));
  t.is((await app.request('GET', `/v1/event-types/${eventType.id}`, { key })).status, 404);
  t.is((await app.request('GET', `/v1/applications/${application.id}`, { key })).body.endpoints_count, 0);
});

/** Until `answered` or `count` statements of this database wait for a lock (the app's, racing). */
async function answeredOrWaiting(watcher: pg.Client, answered: () => boolean, count: number) {
  await until(`an answer, or ${count} statements waiting for a lock`, async () => answered() || (await watcher.query<{ n: number }>(
    `select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and pid <> pg_backend_pid()`,
  )).rows[0]!.n >= count);
}

test.serial('an endpoint test whose endpoint is deleted after the route found it: 404 and no job (it was a 202 and a job succeeded unsent)', async (t) => {
  const { by, key, application, subscriber, holder, watcher } = await setup(t);
  await createEventType(by, 'order.created');
  const endpoint = await subscriber();

  // The test stops at its rate limit, after the route found the endpoint; the delete runs whole meanwhile.
  await holder.query('begin');
  await holder.query('lock table rate_limit_counters in exclusive mode');
  const sent = app.request('POST', `/v1/endpoints/${endpoint.id}/test`, { key, body: {} });
  await waitingOn(watcher, 'take_rate_limit');
  const deleted = await app.request('DELETE', `/v1/endpoints/${endpoint.id}`, { key });
  t.is(deleted.status, 200, JSON.stringify(deleted.body));
  await holder.query('rollback');

  const [res] = await settle(t, watcher, [sent]);
  t.is(res?.status, 404, JSON.stringify(res?.body));
  t.is(res?.body.error?.message, 'Endpoint not found.');
  const jobs = await watcher.query<{ n: number }>('select count(*)::int as n from webhook_jobs where application_id = $1', [application.id]);
  t.is(jobs.rows[0]?.n, 0, 'no job written');
});

test.serial('a job with an event_id beside a forced delete of its event type: the delete waits for the job, which keeps its delivery (it was succeeded with none)', async (t) => {
  const { by, key, application, subscriber, holder, watcher } = await setup(t);
  const eventType = await createEventType(by, 'order.created');
  await subscriber();

  // The job stops at its event_id's claim, its event type read (an event_id takes it through accept_webhook_job).
  await holder.query('begin');
  await holder.query('lock table webhook_job_keys in exclusive mode');
  const job = app.request('POST', '/v1/webhook-jobs', {
    key, body: { application_id: application.id, event_type: 'order.created', payload: { n: 1 }, event_id: 'evt-race' },
  });
  await waitingOn(watcher, 'accept');
  let forcedAnswered = false;
  const forced = app.request('DELETE', `/v1/event-types/${eventType.id}?force=true`, { key }).finally(() => { forcedAnswered = true; });
  await answeredOrWaiting(watcher, () => forcedAnswered, 2);
  t.false(forcedAnswered, 'the forced delete waits for the job that read its event type');
  await holder.query('rollback');

  const [created, deleted] = await settle(t, watcher, [job, forced]);
  t.is(created?.status, 201, JSON.stringify(created?.body));
  t.is(deleted?.status, 200, JSON.stringify(deleted?.body));
  const stored = await watcher.query<{ status: string; deliveries: number }>(`
    select j.status, (select count(*)::int from deliveries d where d.job_id = j.id) as deliveries from webhook_jobs j where j.id = $1`,
  [created?.body.id]);
  t.deepEqual(stored.rows[0], { status: 'created', deliveries: 1 }, 'accepted before the delete: its subscriber\'s delivery');
  t.is((await app.request('GET', `/v1/event-types/${eventType.id}`, { key })).status, 404);
});

test.serial('two restores in one application: both answer 200, no deadlock', async (t) => {
  const { by, key, application, subscriber, holder, watcher } = await setup(t);
  await createEventType(by, 'order.created');
  const endpoints = [
    await subscriber(),
    await subscriber(),
  ];
  for (const endpoint of endpoints) t.is((await app.request('DELETE', `/v1/endpoints/${endpoint.id}`, { key })).status, 200);

  // A share lock on the application, as each restore took before the fix: both restores then
  // got theirs beside it and waited to update the row (the count), each for the other's.
  await holder.query('begin');
  await holder.query('select 1 from applications where id = $1 for share', [application.id]);
  const restores = endpoints.map((endpoint) => app.request('POST', `/v1/endpoints/${endpoint.id}/restore`, { key }));
  await waitingOn(watcher, 'restore_endpoint', 2);
  await holder.query('rollback');

  const answers = await settle(t, watcher, restores);
  for (const res of answers) t.is(res.status, 200, JSON.stringify(res.body));
  t.is((await app.request('GET', `/v1/applications/${application.id}`, { key })).body.endpoints_count, 2);
});

test.serial('a forced delete that finds a subscriber added between its locks starts again, and takes it too', async (t) => {
  const { by, key, subscriber, holder, watcher } = await setup(t);
  const deleted = await createEventType(by, 'order.deleted');
  const later = await createEventType(by, 'order.later'); // a greater id: locked after order.deleted
  await createEventType(by, 'order.before');
  const endpoint = await subscriber(['order.before']);

  // The PATCH subscribing to order.deleted stops at order.later, holding order.deleted; the
  // forced delete finds no subscriber to lock yet and waits for order.deleted.
  await holder.query('begin');
  await holder.query('select 1 from event_types where id = $1 for no key update', [later.id]);
  const patch = app.request('PATCH', `/v1/endpoints/${endpoint.id}`, { key, body: { event_types: ['order.deleted', 'order.later'] } });
  await waitingOn(watcher, 'insert into endpoint_event_types');
  const forced = app.request('DELETE', `/v1/event-types/${deleted.id}?force=true`, { key });
  await waitingOn(watcher, '', 2);
  await holder.query('rollback');

  const [patched, forcedDelete] = await settle(t, watcher, [patch, forced]);
  t.is(patched?.status, 200, JSON.stringify(patched?.body));
  t.is(forcedDelete?.status, 200, JSON.stringify(forcedDelete?.body));
  t.deepEqual((await app.request('GET', `/v1/endpoints/${endpoint.id}`, { key })).body.event_types, ['order.later']);
  t.is((await app.request('GET', `/v1/event-types/${later.id}`, { key })).body.subscriber_count, 1);
});

test.serial('an application delete beside a worker\'s recording of one of its jobs: the delete waits for none of its locks', async (t) => {
  const { by, key, application, subscriber, newJob, holder, watcher } = await setup(t);
  await createEventType(by, 'order.created');
  const endpoint = await subscriber();
  const job = await newJob();
  await watcher.query(`update deliveries set status = 'in_flight' where job_id = $1`, [job.id]); // what a claim does

  // What a recording does, in its order: the delivery's outcome (its job refreshed and locked),
  // stopped there while the application's delete comes. The delete locks no job and no
  // delivery (it took the job, the application and the endpoints in an order that could meet
  // a recording's in a cycle): it answers while the recording still holds them.
  await holder.query('begin');
  await holder.query(`update deliveries set status = 'failed', attempt_count = 1 where job_id = $1`, [job.id]);
  const [res] = await settle(t, watcher, [app.request('DELETE', `/v1/applications/${application.id}`, { key })]);
  t.is(res?.status, 200, JSON.stringify(res?.body));
  // The rest of the recording: the failing endpoint's count, the application's success rate.
  await holder.query('update endpoints set failure_count = failure_count + 1 where id = $1', [endpoint.id]);
  await holder.query('update applications set success_rate = success_rate where id = $1', [application.id]);
  await holder.query('commit');
  t.is((await app.request('GET', `/v1/applications/${application.id}`, { key })).status, 404);
  t.deepEqual(await storedJob(watcher, job.id), { status: 'discarded', deleted: true }, 'the recorded outcome and the delete both kept');
});

/**
 * A worker's claim of two deliveries, stopped after its first row lock (a claim locks its
 * deliveries in id order), `request` sent meanwhile until it waits, then the claim's second lock:
 * granted, or the two wait for each other (a deadlock, which fails the test). The request's answer.
 */
async function requestBesideClaim(
  t: ExecutionContext, s: { holder: pg.Client; watcher: pg.Client }, [first, second]: [string, string], what: string,
  request: () => Promise<Response>,
): Promise<Response | undefined> {
  await s.holder.query('begin');
  await s.holder.query('select 1 from deliveries where id = $1 for update', [first]);
  const answer = request();
  await waitingOn(s.watcher, '');
  const claimed = s.holder.query('select 1 from deliveries where id = $1 for update', [second]);
  t.is(await answeredOrCycle(s.watcher, claimed), 'answered', `the claim and ${what} waited for each other (a deadlock)`);
  await s.holder.query('commit');
  const [res] = await settle(t, s.watcher, [answer]);
  return res;
}

/**
 * A worker's recording stopped after its update of a delivery (`recorded`, which refreshes the
 * delivery's job and so locks it), an endpoint delete sent meanwhile, then the rest of the
 * recording (the application's success rate) and its commit: the delete's answer.
 */
async function deleteBesideRecording(
  t: ExecutionContext, s: { key: string; application: { id: string }; holder: pg.Client; watcher: pg.Client },
  endpointId: string, recorded: string, values: unknown[],
): Promise<Response | undefined> {
  await s.holder.query('begin');
  await s.holder.query(recorded, values);
  const deleted = app.request('DELETE', `/v1/endpoints/${endpointId}`, { key: s.key });
  await waitingOn(s.watcher, '', 1);
  const recording = (async () => {
    await s.holder.query('update applications set success_rate = success_rate where id = $1', [s.application.id]);
    await s.holder.query('commit');
  })();
  recording.catch(() => {}); // cancelled if it is part of a cycle: settle() says so
  const [res] = await settle(t, s.watcher, [deleted]);
  await recording;
  return res;
}

test.serial('an endpoint delete beside a worker\'s recording of the same job\'s other delivery: no deadlock', async (t) => {
  const { by, key, application, subscriber, newJob, holder, watcher } = await setup(t);
  await createEventType(by, 'order.created');
  const dropped = await subscriber();
  const recorded = await subscriber();
  const job = await newJob();
  await watcher.query(`update deliveries set status = 'in_flight' where job_id = $1 and endpoint_id = $2`, [job.id, recorded.id]);

  // A recording of the in-flight delivery, stopped after its job was refreshed (and locked).
  const res = await deleteBesideRecording(t, { key, application, holder, watcher }, dropped.id,
    `update deliveries set status = 'succeeded', attempt_count = 1 where job_id = $1 and endpoint_id = $2`, [job.id, recorded.id]);
  t.is(res?.status, 200, JSON.stringify(res?.body));
  t.is((await storedJob(watcher, job.id))?.status, 'discarded', 'one delivery succeeded, the other dropped: the job is finished');
});

test.serial('an endpoint delete beside a worker\'s recording of a failure to that endpoint (a retry): no deadlock', async (t) => {
  const { by, key, application, subscriber, newJob, holder, watcher } = await setup(t);
  await createEventType(by, 'order.created');
  const endpoint = await subscriber();
  const job = await newJob();
  await watcher.query(`update deliveries set status = 'in_flight' where job_id = $1`, [job.id]);

  // A recording of the in-flight delivery's failure, stopped after the delivery went back to
  // pending for its retry and its job was refreshed (and locked).
  const res = await deleteBesideRecording(t, { key, application, holder, watcher }, endpoint.id,
    `update deliveries set status = 'pending', attempt_count = 1 where job_id = $1`, [job.id]);
  t.is(res?.status, 200, JSON.stringify(res?.body));
  t.like(await storedJob(watcher, job.id), { status: 'discarded' }, 'the retry was dropped with its endpoint: the job is finished');
});

test.serial('an application delete beside a claim holding its endpoints\' deliveries: the delete waits for none, the upkeep drops them after', async (t) => {
  const { by, key, application, subscriber, newJob, holder, watcher } = await setup(t);
  await createEventType(by, 'order.a');
  await createEventType(by, 'order.b');
  // The older endpoint's delivery is the first by id. The cascade once read the newer endpoint
  // first (and each endpoint's drop locked only its own deliveries in id order), then locked
  // them all in id order; it now leaves them to the upkeep.
  const older = await subscriber(['order.a']);
  const newer = await subscriber(['order.b']);
  const jobA = await newJob('order.a');
  await newJob('order.b');
  const { rows } = await watcher.query<{ id: string }>(
    'select d.id::text as id from deliveries d where d.endpoint_id = any($1) order by d.id', [[older.id, newer.id]]);
  const [first, second] = rows.map((r) => r.id) as [string, string];
  await holder.query('begin');
  await holder.query('select 1 from deliveries where id = $1 for update', [first]);
  const [res] = await settle(t, watcher, [app.request('DELETE', `/v1/applications/${application.id}`, { key })]);
  t.is(res?.status, 200, JSON.stringify(res?.body));
  await holder.query('select 1 from deliveries where id = $1 for update', [second]);
  await holder.query('commit');
  t.like(await storedJob(watcher, jobA.id), { status: 'discarded' });
  const { rows: after } = await watcher.query<{ status: string }>('select status from deliveries where id = any($1) order by id', [[first, second]]);
  t.deepEqual(after.map((r) => r.status), ['dropped', 'dropped']);
});

test.serial('an endpoint delete and its application\'s delete, both with a pending delivery to drop: no deadlock', async (t) => {
  const { by, key, application, subscriber, newJob, holder, watcher } = await setup(t);
  await createEventType(by, 'order.created');
  const endpoint = await subscriber();
  const job = await newJob();

  // The application's delete stops at the endpoint (its cascade), the application locked; the
  // endpoint's delete comes then, and takes the job it will refresh.
  await holder.query('begin');
  await holder.query('select 1 from endpoints where id = $1 for no key update', [endpoint.id]);
  const applicationDelete = app.request('DELETE', `/v1/applications/${application.id}`, { key });
  await waitingOn(watcher, '', 1);
  const endpointDelete = app.request('DELETE', `/v1/endpoints/${endpoint.id}`, { key });
  await waitingOn(watcher, '', 2);
  await holder.query('rollback');

  const [a, e] = await settle(t, watcher, [applicationDelete, endpointDelete]);
  t.is(a?.status, 200, JSON.stringify(a?.body));
  t.true(e?.status === 404 || e?.status === 200, JSON.stringify(e?.body));
  t.deepEqual(await storedJob(watcher, job.id), { status: 'discarded', deleted: true });
});

/**
 * Two deliveries of one endpoint (two jobs), the first in id order moved behind the second in
 * the table and its index (two non-HOT updates of its status, as a pause and an un-pause make),
 * so that a statement that locks them in the order it reads them takes the second first.
 */
async function twoDeliveriesOutOfOrder(t: ExecutionContext, s: Awaited<ReturnType<typeof setup>>, finalStatus: 'pending' | 'held') {
  await createEventType(s.by, 'order.created');
  const endpoint = await s.subscriber();
  await s.newJob();
  await s.newJob();
  const { rows } = await s.watcher.query<{ id: string }>('select d.id::text as id from deliveries d where d.endpoint_id = $1 order by d.id', [endpoint.id]);
  const [first, second] = rows.map((r) => r.id) as [string, string];
  await s.watcher.query(`update deliveries set status = 'held' where id = $1`, [first]);
  await s.watcher.query(`update deliveries set status = 'pending' where id = $1`, [first]);
  if (finalStatus === 'held') {
    for (const id of [second, first]) await s.watcher.query(`update deliveries set status = 'held' where id = $1`, [id]);
  }
  const { rows: order } = await s.watcher.query<{ id: string }>(
    'select d.id::text as id from deliveries d where d.endpoint_id = $1 order by d.ctid', [endpoint.id]);
  t.deepEqual(order.map((r) => r.id), [second, first], 'the second delivery comes first in the table');
  return { endpoint, first, second };
}

test.serial('an endpoint delete passes over a delivery a claim holds: it waits for no claim, so no cycle with one', async (t) => {
  const s = await setup(t);
  const { endpoint, first, second } = await twoDeliveriesOutOfOrder(t, s, 'pending');
  const { rows: [job] } = await s.watcher.query<{ job_id: string }>('select job_id from deliveries where id = $1', [first]);
  // A claim holds the first delivery. The delete locks the jobs of the endpoint's waiting
  // deliveries first; waiting then for the claim's delivery, it held a job that the claim's drop
  // of another delivery of that job refreshes next: a cycle (the lock probe).
  await s.holder.query('begin');
  await s.holder.query('select 1 from deliveries where id = $1 for update', [first]);
  const [res] = await settle(t, s.watcher, [app.request('DELETE', `/v1/endpoints/${endpoint.id}`, { key: s.key })]);
  t.is(res?.status, 200, JSON.stringify(res?.body));
  const statuses = async () => (await s.watcher.query<{ status: string }>(
    'select status from deliveries where id = any($1) order by id', [[first, second]])).rows.map((r) => r.status);
  t.deepEqual(await statuses(), ['pending', 'dropped'], 'the delivery the claim holds is passed over');
  await s.holder.query('commit'); // the claim took nothing (it would have sent it: it read the endpoint live)
  t.like(await storedJob(s.watcher, job!.job_id), { status: 'discarded' }, 'the upkeep drops the one passed over');
  t.deepEqual(await statuses(), ['dropped', 'dropped']);
});

test.serial('an un-pause releases held deliveries in id order, as a claim locks them: no deadlock with a claim', async (t) => {
  const s = await setup(t);
  const { endpoint, first, second } = await twoDeliveriesOutOfOrder(t, s, 'held');
  t.is((await app.request('PATCH', `/v1/endpoints/${endpoint.id}`, { key: s.key, body: { status: 'paused' } })).status, 200);
  const res = await requestBesideClaim(t, s, [first, second], 'the un-pause',
    () => app.request('PATCH', `/v1/endpoints/${endpoint.id}`, { key: s.key, body: { status: 'active' } }));
  t.is(res?.status, 200, JSON.stringify(res?.body));
  const { rows } = await s.watcher.query<{ status: string }>('select status from deliveries where id = any($1)', [[first, second]]);
  t.deepEqual(rows.map((r) => r.status), ['pending', 'pending'], 'both released');
});

/**
 * An endpoint delete stopped at its application's lock (after it locked the jobs of the
 * endpoint's open deliveries: none), while a job's delivery to the endpoint opens (`opened`: a
 * retry, or a job accepted meanwhile), and a recording of the job's other delivery then holds the
 * job and waits for the application (its success rate). Once the application is let go, the
 * delete drops the endpoint's deliveries, that one too: locking its job to refresh it waited for
 * the recording, which waited for the delete (the most frequent deadlock of `npm run
 * bench:locks`). The delete's answer, and that delivery.
 */
async function deleteBesideOpenedDelivery(t: ExecutionContext, opened: 'pending' | 'held') {
  const s = await setup(t);
  await createEventType(s.by, 'order.created');
  const endpoint = await s.subscriber();
  const other = await s.subscriber();
  const job = await s.newJob();
  await s.watcher.query(`update deliveries set status = 'failed', attempt_count = 1 where job_id = $1 and endpoint_id = $2`, [job.id, endpoint.id]);
  await s.watcher.query(`update deliveries set status = 'in_flight' where job_id = $1 and endpoint_id = $2`, [job.id, other.id]);
  const [gate] = await twoSessions(t, app.databaseUrl);
  await gate.query('begin');
  await gate.query('select 1 from applications where id = $1 for no key update', [s.application.id]);
  const sentAt = (await s.watcher.query<{ now: Date }>('select clock_timestamp() as now')).rows[0]?.now;
  const deleted = app.request('DELETE', `/v1/endpoints/${endpoint.id}`, { key: s.key });
  await waitingOn(s.watcher, 'applications');
  await s.watcher.query(`update deliveries set status = $3, attempt_count = 0 where job_id = $1 and endpoint_id = $2`, [job.id, endpoint.id, opened]);
  await s.holder.query('begin');
  await s.holder.query(`update deliveries set status = 'succeeded', attempt_count = 1 where job_id = $1 and endpoint_id = $2`, [job.id, other.id]);
  const recording = s.holder.query('update applications set success_rate = success_rate where id = $1', [s.application.id])
    .then(() => s.holder.query('commit'));
  recording.catch(() => {}); // cancelled if it is part of a cycle: settle() says so
  await waitingOn(s.watcher, 'applications', 2);
  await gate.query('commit');
  const [res] = await settle(t, s.watcher, [deleted]);
  await recording;
  const { rows: [delivery] } = await s.watcher.query<{ id: string; status: string }>(
    'select id::text, status from deliveries where job_id = $1 and endpoint_id = $2', [job.id, endpoint.id]);
  return { res, delivery, watcher: s.watcher, sentAt };
}

test.serial('an endpoint delete that waited for its application while a delivery of a job the delete never locked opened: no deadlock with that job\'s recording; the claim drops it', async (t) => {
  const { res, delivery, watcher } = await deleteBesideOpenedDelivery(t, 'pending');
  t.is(res?.status, 200, JSON.stringify(res?.body));
  t.is(delivery?.status, 'pending', 'left to the claim that takes it');
  const { rows: [claimed] } = await watcher.query<{ action: string }>(`
    select c.action from claim_deliveries(
      (select jsonb_agg(jsonb_build_object('delivery_id', d.id, 'round', d.round)) from deliveries d where d.id = $1::bigint),
      1000, 100, 10000000) c`, [delivery?.id]);
  t.is(claimed?.action, 'drop', 'which drops it: its endpoint is deleted');
  const { rows: [after] } = await watcher.query<{ status: string }>('select status from deliveries where id = $1::bigint', [delivery?.id]);
  t.is(after?.status, 'dropped');
});

test.serial('the same with a held delivery: it is made pending and queued, so that a claim drops it; nothing is left held for a deleted endpoint', async (t) => {
  const { res, delivery, watcher, sentAt } = await deleteBesideOpenedDelivery(t, 'held');
  t.is(res?.status, 200, JSON.stringify(res?.body));
  t.is(delivery?.status, 'pending');
  const { rows } = await watcher.query<{ n: number }>(`
    select count(*)::int as n from pgboss.job
    where name = 'deliveries' and (data->>'deliveryId')::bigint = $1 and state = 'created' and start_after <= now() and created_on >= $2`,
  [delivery?.id, sentAt]);
  t.is(rows[0]?.n, 1, 'a queue message for it, due now, from the delete');
});

test.serial('an application delete beside the upkeep\'s release of its endpoint\'s held deliveries: no deadlock', async (t) => {
  // The release (run_delivery_upkeep) locks an active endpoint with held deliveries, then the
  // deliveries; the application's delete once locked the deliveries of its endpoints first, then
  // waited for the endpoint the release held, while the release waited for a delivery it held
  // (the lock probe). It now locks the endpoints and no delivery. The holder session does what
  // the release does, one lock at a time.
  const { key, application, subscriber, newJob, holder, watcher } = await setup(t);
  await createEventType({ on: app, key, t }, 'order.created');
  const endpoint = await subscriber();
  const job = await newJob();
  const { rows: [delivery] } = await watcher.query<{ id: string }>('select id from deliveries where endpoint_id = $1', [endpoint.id]);
  await watcher.query(`update deliveries set status = 'held' where id = $1`, [delivery?.id]);

  await holder.query('begin');
  await holder.query('select 1 from endpoints where id = $1 for no key update', [endpoint.id]);
  const applicationDelete = app.request('DELETE', `/v1/applications/${application.id}`, { key });
  await waitingOn(watcher, 'update applications set deleted_at');
  const release = holder.query(`update deliveries set status = 'pending', next_attempt_at = now() where id = $1 and status = 'held'`, [delivery?.id]);
  t.is(await answeredOrCycle(watcher, release), 'answered', 'the release waited for the delete, which waited for it');
  await holder.query('commit');

  const [res] = await settle(t, watcher, [applicationDelete]);
  t.is(res?.status, 200, JSON.stringify(res?.body));
  await storedJob(watcher, job.id); // the upkeep's steps after the delete
  const { rows: [after] } = await watcher.query<{ status: string }>('select status from deliveries where id = $1', [delivery?.id]);
  t.is(after?.status, 'dropped', 'released, then dropped by the upkeep (an application delete leaves its endpoints\' waiting deliveries to it)');
});

test('a deadlock or a serialization failure left over answers 503 with Retry-After, not a 500', (t) => {
  for (const code of ['40P01', '40001']) {
    const error = translateDatabaseError(Object.assign(new Error('deadlock detected'), { code }));
    t.is(error?.status, 503, code);
    t.is(error?.code, 'service_unavailable');
    t.is(error?.retryAfterHeader, 5);
    t.regex(error?.message ?? '', /conflicted with a concurrent request .* rolled back/);
    const wrapped = translateDatabaseError(Object.assign(new Error('wrapped'), { cause: { code } }));
    t.is(wrapped?.status, 503, `${code} wrapped by slonik`);
  }
  t.is(translateDatabaseError(Object.assign(new Error('other'), { code: '40003' })), null, 'other rollbacks are not guessed at');
});
