// A delivery claimed ahead of its rate-limit slot is not sent once its endpoint stopped while it
// waited: paused, deleted, or disabled by a 410. A probe found such deliveries reaching the
// receiver up to two seconds after a delete had answered (42 of 200 at 50 per second), and 86
// of 91 attempts to a 410 endpoint made after it was disabled. A worker claims sends up to a
// second ahead of their slots; the stop is now notified at commit (sql/021-wakeup.sql) and the
// worker hands back what it has not started (src/worker/delivery-loop.ts); the next claim holds
// or drops it. At 2 per second, two of three jobs' deliveries are claimed at once, the second
// to start about 550 ms after the first; the stop is made when the first arrives.
//
// No attempt may start after the stop was answered (100 ms allowed for the notification to
// reach the worker); without the handing back, the second started about 450 ms after it.
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import pg from 'pg';
import { CONNECTIONS_PER_ORIGIN } from '../src/worker/attempt.ts';
import { STOPPED_CHANNEL } from '../src/worker/wakeup.ts';
import { startTestApp } from './helpers/app.ts';
import { createApplication, createEndpoint, createEventType, createJob, type By } from './helpers/fixtures.ts';
import { startReceiver } from './helpers/receiver.ts';
import { until } from './helpers/until.ts';

// Job creation unlimited: behindHangingRequests makes 134 jobs at once.
const app = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true', CIRCUIT_BREAKER_THRESHOLD: '50', RATE_LIMIT_JOBS_PER_SECOND: '100000' }, { worker: true });
const NOTIFIED_WITHIN_MS = 100;

async function stoppedOnFirstArrival(t: ExecutionContext, status: number, stop: (by: By, endpointId: string) => Promise<unknown>) {
  let stopping: Promise<number> | undefined;
  let by: By | undefined;
  let endpointId = '';
  let created: Promise<unknown> | undefined;
  const receiver = await startReceiver((_arrival, index) => {
    // At the first arrival, from outside the worker, without waiting for it; once the three
    // jobs are accepted (the first can arrive before the third is: a job accepted after a
    // delete has no delivery to the endpoint at all).
    if (index === 0) stopping = created!.then(() => stop(by!, endpointId)).then(() => Date.now());
    return { status, body: 'ok' };
  });
  t.teardown(() => receiver.close());
  const { key } = await app.createOrg();
  by = { on: app, key, t };
  await createEventType(by, 'order.created');
  const application = (await createApplication(by)).id as string;
  endpointId = (await createEndpoint(by, { application_id: application, url: receiver.at('/in'), event_types: ['order.created'], rate_limit_rps: 2 })).id as string;
  created = Promise.all([1, 2, 3].map((n) => createJob(by!, { application_id: application, event_type: 'order.created', payload: { n } })));
  const jobs = await created as Array<Record<string, unknown>>;
  await until('the stop made and answered', () => stopping !== undefined);
  let answeredAt = await stopping!;
  // Sorted: which job's delivery was sent first is the worker's order, not the ids' (KSUIDs made
  // in the same second sort at random), so the statuses are compared as a set.
  const statuses = async () => [...await app.pool.anyFirst(sql.type(z.object({ status: z.string() }))`
    select status from deliveries where endpoint_id = ${endpointId}`)].sort();
  await until('no delivery pending or claimed', async () => (await statuses()).every((s) => s !== 'pending' && s !== 'in_flight'));
  // A 410 stops the endpoint when its attempt is recorded: then, not when it was answered.
  if (status === 410) {
    answeredAt = await app.pool.oneFirst(sql.type(z.object({ at: z.number() }))`
      select extract(epoch from disabled_at) * 1000 as at from endpoints where id = ${endpointId}`);
  }
  const attempts = await app.pool.anyFirst(sql.type(z.object({ at: z.number() }))`
    select extract(epoch from attempted_at) * 1000 as at from delivery_attempts where endpoint_id = ${endpointId} order by attempted_at`);
  const late = attempts.filter((at) => at > answeredAt + NOTIFIED_WITHIN_MS).map((at) => `${Math.round(at - answeredAt)} ms after`);
  t.deepEqual(late, [], 'attempts started after the stop was answered');
  // Those started before it are the receiver's: the first, and on a machine too busy to make the
  // stop within 450 ms, the next too.
  const sent = attempts.length;
  t.true(sent >= 1);
  /** The deliveries' statuses expected, sorted: `sent` of them as sent, the others as `stopped`. */
  const expected = (done: string, stopped: string) => [1, 2, 3].map((n) => (n <= sent ? done : stopped)).sort();
  return { by, endpointId, jobs, receiver, statuses, expected };
}

test('paused while a claimed delivery waits for its slot: held, not sent; resumed, each job arrives once', async (t) => {
  const { by, endpointId, jobs, receiver, statuses, expected } = await stoppedOnFirstArrival(t, 200,
    (by, id) => by.on.request('PATCH', `/v1/endpoints/${id}`, { key: by.key, body: { status: 'paused' } }));
  t.deepEqual(await statuses(), expected('succeeded', 'held'));
  t.is((await app.request('PATCH', `/v1/endpoints/${endpointId}`, { key: by.key, body: { status: 'active' } })).status, 200);
  await until('every job delivered', async () => (await statuses()).every((s) => s === 'succeeded'));
  t.deepEqual(jobs.map((job) => receiver.forJob(job.id as string).length), [1, 1, 1]);
});

test('deleted while a claimed delivery waits for its slot: dropped, not sent', async (t) => {
  const { statuses, expected } = await stoppedOnFirstArrival(t, 200,
    (by, id) => by.on.request('DELETE', `/v1/endpoints/${id}`, { key: by.key }));
  t.deepEqual(await statuses(), expected('succeeded', 'dropped'));
});

test('disabled by a 410 while a claimed delivery waits for its slot: held, not sent', async (t) => {
  // The stop is the recording of the 410 itself (disabled_at).
  const { statuses, endpointId, by, expected } = await stoppedOnFirstArrival(t, 410, async () => {});
  t.deepEqual(await statuses(), expected('held', 'held'), 'the 410\'s own delivery is held too, for a reset');
  t.like((await app.request('GET', `/v1/endpoints/${endpointId}`, { key: by.key })).body, { status: 'disabled', disabled_reason: 'gone' });
});

/** Extra deliveries beyond the worker's connections to one origin and an organization's own: they wait for one. */
const EXTRA = 6;
const TOTAL = 2 * CONNECTIONS_PER_ORIGIN + EXTRA;

/**
 * An endpoint at a receiver that answers nothing until `release()`: once every delivery is
 * claimed, `sent` of them hang at the receiver and the rest (at least EXTRA) wait in the worker
 * for a connection. `statuses`: its deliveries counted by status.
 *
 * How many are sent is the worker's: its 64 connections to the origin, and once the organization
 * is slow (an exchange waited a second: src/worker/organization-share.ts) 64 more of its own. The
 * deliveries are released together (created while the endpoint is paused), but a busy machine
 * claims them 10 at a time and more than a second apart: the organization was slow before the
 * last were claimed, those went through its own connections, and a wait for exactly 64 arrivals
 * never ended (a fresh-clone CI run, once). So there are deliveries enough for both pools and
 * EXTRA more, and the count is read once nothing has arrived for a second with all claimed.
 */
async function behindHangingRequests(t: ExecutionContext) {
  const waiting: Array<() => void> = [];
  const release = () => { for (const free of waiting.splice(0)) free(); };
  const receiver = await startReceiver(() => new Promise((resolve) => waiting.push(() => resolve({ status: 200, body: 'late ok' }))));
  t.teardown(() => { release(); return receiver.close(); });
  const { key } = await app.createOrg();
  const by: By = { on: app, key, t };
  await createEventType(by, 'order.created');
  const application = (await createApplication(by)).id as string;
  const endpointId = (await createEndpoint(by, { application_id: application, url: receiver.at('/hangs'), event_types: ['order.created'], rate_limit_rps: 1000 })).id as string;
  // Created while the endpoint is paused and released together, so that most are claimed before
  // the organization is slow.
  t.is((await app.request('PATCH', `/v1/endpoints/${endpointId}`, { key, body: { status: 'paused' } })).status, 200);
  for (let n = 0; n < TOTAL; n += 10) {
    await Promise.all(Array.from({ length: Math.min(10, TOTAL - n) }, (_, i) => createJob(by, { application_id: application, event_type: 'order.created', payload: { n: n + i } })));
  }
  t.is((await app.request('PATCH', `/v1/endpoints/${endpointId}`, { key, body: { status: 'active' } })).status, 200);
  const statuses = async () => (await app.pool.anyFirst(sql.type(z.object({ status: z.string() }))`
    select status from deliveries where endpoint_id = ${endpointId}`)).reduce<Record<string, number>>((acc, s) => ({ ...acc, [s]: (acc[s] ?? 0) + 1 }), {});
  let seen = -1;
  let since = Date.now();
  await until('every delivery claimed, and nothing more arriving', async () => {
    const arrived = receiver.arrivals.length;
    if (arrived !== seen) [seen, since] = [arrived, Date.now()];
    return (await statuses()).in_flight === TOTAL && Date.now() - since >= 1000;
  });
  const sent = receiver.arrivals.length;
  t.log(`${sent} of ${TOTAL} sent (${sent > CONNECTIONS_PER_ORIGIN ? 'some through the organization\'s own connections: it was slow before all were claimed' : 'all through the shared connections'})`);
  t.true(sent >= CONNECTIONS_PER_ORIGIN && TOTAL - sent >= EXTRA, `${sent} of ${TOTAL} sent: the rest wait for a connection`);
  return { key, endpointId, receiver, release, statuses, sent, waiting: TOTAL - sent };
}

/**
 * Resolves once the stop of `endpointId` was notified (sql/021-wakeup.sql), and a moment more:
 * the worker, in this process, listens on the same channel. The notice reaches it after the
 * stop is answered; on a busy machine later than the release of the hanging requests, which
 * then sent 6 of the waiting ones (the full suite, once). A send is withdrawn once the worker
 * knows of the stop; how soon it knows is the notification's latency, not this test's subject.
 */
async function stopNoticed(t: ExecutionContext, endpointId: string): Promise<{ noticed: Promise<void> }> {
  const listener = new pg.Client({ connectionString: app.databaseUrl });
  await listener.connect();
  t.teardown(() => listener.end());
  await listener.query(`listen ${STOPPED_CHANNEL}`);
  // In an object: an async function's returned promise would be awaited with it.
  return {
    noticed: new Promise((resolve) => {
      listener.on('notification', (message) => {
        if (message.payload === endpointId) setTimeout(resolve, 100);
      });
    }),
  };
}

test(`paused while deliveries wait for one of the worker's ${CONNECTIONS_PER_ORIGIN} connections to a hanging receiver: not sent once one frees`, async (t) => {
  // The same probe saw a hanging receiver's connections go from 128 to 256 half a minute after
  // its application's delete: requests queued in the worker's pool for a connection, sent when
  // the hanging ones ended. They are withdrawn when they get one (before anything is sent).
  const { key, endpointId, receiver, release, statuses, sent, waiting } = await behindHangingRequests(t);
  const { noticed } = await stopNoticed(t, endpointId);
  const paused = await app.request('PATCH', `/v1/endpoints/${endpointId}`, { key, body: { status: 'paused' } });
  t.is(paused.status, 200, JSON.stringify(paused.body));
  await noticed;
  release();
  await until('the hanging ones recorded and the others held', async () => {
    const now = await statuses();
    return now.succeeded === sent && now.held === waiting;
  });
  t.is(receiver.arrivals.length, sent, 'no request sent after the pause');
  t.deepEqual(await statuses(), { succeeded: sent, held: waiting });
});

test('a restore right after a delete waits (409) while a worker still holds deliveries it claimed before; none is sent after the delete', async (t) => {
  // A probe restored an endpoint 6 ms after its delete: 170 of the 235 deliveries workers held
  // were sent to it after all, as the restore counted only the waiting ones.
  const { key, endpointId, receiver, release, statuses, sent, waiting } = await behindHangingRequests(t);
  const { noticed } = await stopNoticed(t, endpointId);
  t.is((await app.request('DELETE', `/v1/endpoints/${endpointId}`, { key })).status, 200);
  await noticed;
  const early = await app.request('POST', `/v1/endpoints/${endpointId}/restore`, { key });
  t.is(early.status, 409, 'held by the worker: not restorable yet');
  t.regex(early.body.error.message, /still being dropped or finished/);
  release();
  await until('the hanging ones recorded and the others dropped', async () => {
    const now = await statuses();
    return now.succeeded === sent && now.dropped === waiting;
  });
  t.is((await app.request('POST', `/v1/endpoints/${endpointId}/restore`, { key })).status, 200);
  await new Promise((resolve) => setTimeout(resolve, 500));
  t.is(receiver.arrivals.length, sent, 'nothing sent after the delete, nor after the restore');
  t.deepEqual(await statuses(), { succeeded: sent, dropped: waiting });
});

test('an attempt under way when its endpoint is deleted, then failed, is dropped when recorded: the job is discarded at once, and a restore sends nothing again', async (t) => {
  // A black-box probe (twice): the attempt in flight at the delete timed out, was recorded as a
  // retry (the job awaiting_retry though its endpoint was deleted), and a restore then answered
  // 200 and the same delivery was sent again, attempts 2 and 3. Without a restore the job waited
  // for its next attempt's claim to drop it (up to 10 h with the default schedule). Here the
  // receiver holds the attempt until the delete has been answered, then fails it with a 500.
  let fail: (() => void) | undefined;
  const receiver = await startReceiver(() => new Promise((resolve) => { fail = () => resolve({ status: 500, body: 'down' }); }));
  t.teardown(() => { fail?.(); return receiver.close(); });
  const { key } = await app.createOrg();
  const by: By = { on: app, key, t };
  await createEventType(by, 'order.created');
  const application = (await createApplication(by)).id as string;
  const endpointId = (await createEndpoint(by, { application_id: application, url: receiver.at('/hangs'), event_types: ['order.created'], timeout_ms: 60_000 })).id as string;
  const job = await createJob(by, { application_id: application, event_type: 'order.created', payload: { n: 1 } });
  await until('attempt 1 under way', () => receiver.arrivals.length === 1);

  t.is((await app.request('DELETE', `/v1/endpoints/${endpointId}`, { key })).status, 200);
  const early = await app.request('POST', `/v1/endpoints/${endpointId}/restore`, { key });
  t.is(early.status, 409, 'the attempt is still under way: not restorable yet');
  t.regex(early.body.error.message, /still being dropped or finished/);
  fail!();

  const getJob = async () => (await app.request('GET', `/v1/webhook-jobs/${job.id as string}`, { key })).body;
  await until('attempt 1 recorded', async () => (await getJob()).deliveries.length === 1);
  const delivery = async () => app.pool.one(sql.type(z.object({ id: z.number(), status: z.string() }))`
    select id::int as id, status from deliveries where job_id = ${job.id as string}`);
  const messages = async (id: number) => app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from pgboss.job where name = 'deliveries' and data->>'deliveryId' = ${String(id)}`);
  const recorded = await getJob();
  t.like(recorded, { status: 'discarded', attempt_count: 1 }, 'discarded when the attempt is recorded, not awaiting a retry');
  t.truthy(recorded.completed_at);
  t.truthy(recorded.discarded_at);
  t.like(recorded.deliveries[0], { attempt: 1, status_code: 500, success: false });
  const dropped = await delivery();
  t.is(dropped.status, 'dropped');
  t.is(await messages(dropped.id), 0, 'no queue message for a next attempt');
  const failed = await app.request('GET', `/v1/webhook-jobs?application_id=${application}&status=failed`, { key });
  t.deepEqual(failed.body.data.map((j: { id: string }) => j.id), [job.id], 'listed as failed');

  // A restore now brings the endpoint back, not the delivery its delete dropped.
  t.is((await app.request('POST', `/v1/endpoints/${endpointId}/restore`, { key })).status, 200);
  t.like(await getJob(), { status: 'discarded', attempt_count: 1 });
  t.like(await delivery(), { status: 'dropped' });
  t.is(await messages(dropped.id), 0);
  t.is(receiver.arrivals.length, 1, 'sent once, before the delete');
});
