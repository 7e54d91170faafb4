// Cancel and retry of a job: which states allow them, their effect on deliveries and the queue.
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import pg from 'pg';
import { dropDeliveriesOfDeletedEndpoints } from '../../src/db/endpoints.ts';
import { assertError, startTestApp } from '../helpers/app.ts';
import { startReceiver, type Reply } from '../helpers/receiver.ts';
import { until } from '../helpers/until.ts';
import {
  app, ISO_MS, HOURS_48, setup, ok, createEventType, createEndpoint, getJob, cancel, retry, list, createJob,
  twoTargetJob, deliveriesOf, messagesFor, setState, ids, holdApplications,
} from './helpers.ts';

// The real worker and receivers, for the retries whose outcome is the attempts' (below). A
// failed attempt's retry waits an hour: a failing receiver gets one attempt per round.
const worker = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true', RETRY_SCHEDULE: '3600,3600,3600,3600,3600,3600' }, { worker: true });

// ---------------------------------------------------------------- cancel

test('cancel from created: 200 exactly {id, status discarded, discarded_at}; its deliveries are cancelled', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  await createEndpoint(t, key, appId, ['invoice.paid']);
  await createEndpoint(t, key, appId, ['invoice.paid']);
  const job = await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: {} });
  const before = Date.now();
  const res = await cancel(key, job.id);
  const after = Date.now();
  t.is(res.status, 200, JSON.stringify(res.body));
  t.deepEqual(Object.keys(res.body).sort(), ['discarded_at', 'id', 'status']);
  t.is(res.body.id, job.id);
  t.is(res.body.status, 'discarded');
  t.regex(res.body.discarded_at, ISO_MS);
  const at = Date.parse(res.body.discarded_at);
  t.true(at >= before - 1000 && at <= after + 1000, res.body.discarded_at);
  const rows = await deliveriesOf(job.id);
  t.is(rows.length, 2);
  for (const row of rows) t.is(row.status, 'cancelled');
  const got = await getJob(key, job.id);
  t.is(got.body.status, 'discarded');
  t.is(got.body.discarded_at, res.body.discarded_at);
  t.regex(got.body.completed_at ?? '', ISO_MS);
  t.deepEqual(got.body.deliveries, []);

  // Cancelled, not failed.
  t.deepEqual(ids(await list(key, `application_id=${appId}&status=discarded`)), [job.id]);
  t.deepEqual(ids(await list(key, `application_id=${appId}&status=failed`)), []);
});

test('cancel from awaiting_retry: 200; waiting deliveries are cancelled, succeeded ones stay', async (t) => {
  const { key, appId } = await setup(t);
  const { job, good, bad } = await twoTargetJob(t, key, appId, ['succeeded', 1], ['pending', 2]);
  t.is((await getJob(key, job.id)).body.status, 'awaiting_retry');
  const res = await cancel(key, job.id);
  t.is(res.status, 200, JSON.stringify(res.body));
  t.deepEqual(Object.keys(res.body).sort(), ['discarded_at', 'id', 'status']);
  t.is(res.body.status, 'discarded');
  const rows = await deliveriesOf(job.id);
  t.is(rows.find((r) => r.endpoint_id === good)?.status, 'succeeded');
  t.is(rows.find((r) => r.endpoint_id === bad)?.status, 'cancelled');
  t.is((await getJob(key, job.id)).body.status, 'discarded');
  t.deepEqual(ids(await list(key, `application_id=${appId}&status=failed`)), []);
});

test('cancel from executing, succeeded, discarded (failed or cancelled) or archived: 409 invalid_state, nothing changes', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  await createEndpoint(t, key, appId, ['invoice.paid']);
  const make = async () => (await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: {} })).id;
  const cases: Array<[string, string, string]> = [];
  for (const state of ['executing', 'succeeded', 'failed', 'archived'] as const) {
    const id = await make();
    await setState(t, key, id, state);
    cases.push([state, id, state === 'failed' ? 'discarded' : state]);
  }
  const cancelled = await make();
  ok(t, await cancel(key, cancelled), 200, 'cancel');
  cases.push(['cancelled', cancelled, 'discarded']);
  for (const [label, id, status] of cases) {
    const before = await getJob(key, id);
    const res = await cancel(key, id);
    assertError(t, res, 409, 'invalid_state');
    const after = await getJob(key, id);
    t.is(after.body.status, status, label);
    t.deepEqual(after.body, before.body, label);
  }
  t.is((await deliveriesOf(cases[0]?.[1] ?? '')).at(0)?.status, 'in_flight');
});

// ---------------------------------------------------------------- retry

const RETRY_STATES = ['succeeded', 'failed', 'awaiting_retry', 'archived', 'cancelled'] as const;

for (const state of RETRY_STATES) {
  test(`retry from ${state === 'failed' ? 'discarded (gave up)' : state === 'cancelled' ? 'discarded (cancelled)' : state}: 200 {id, status created, attempt_count 0}, a new 48 h window, a new queue message per restarted delivery`, async (t) => {
    const { key, appId } = await setup(t);
    await createEventType(t, key, 'invoice.paid');
    await createEndpoint(t, key, appId, ['invoice.paid']);
    const job = await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: {} });
    if (state === 'cancelled') ok(t, await cancel(key, job.id), 200, 'cancel');
    else await setState(t, key, job.id, state);
    await app.pool.query(sql.unsafe`update webhook_jobs set expires_at = now() - interval '1 hour' where id = ${job.id}`);
    const [delivery] = await deliveriesOf(job.id);
    if (!delivery) throw new Error('no delivery');

    const before = Date.now();
    const res = await retry(key, job.id);
    const after = Date.now();
    t.is(res.status, 200, JSON.stringify(res.body));
    t.deepEqual(res.body, { id: job.id, status: 'created', attempt_count: 0 });

    const got = await getJob(key, job.id);
    t.is(got.body.status, 'created');
    t.is(got.body.attempt_count, 0);
    t.is(got.body.completed_at, null);
    t.is(got.body.discarded_at, null);
    const expires = Date.parse(got.body.expires_at);
    t.true(expires >= before + HOURS_48 && expires <= after + HOURS_48, `${got.body.expires_at} not 48 h after the retry`);
    t.is(got.body.created_at, job.created_at);

    const [restarted] = await deliveriesOf(job.id);
    t.like(restarted, { id: delivery.id, status: 'pending', round: 2, attempt_count: 0 });
    t.is(await messagesFor(delivery.id, 2), 1);
    t.deepEqual(ids(await list(key, `application_id=${appId}&status=created`)), [job.id]);
  });
}

test('retry re-delivers only the targets that have not succeeded', async (t) => {
  const { key, appId } = await setup(t);
  const { job, good, bad } = await twoTargetJob(t, key, appId, ['succeeded', 1], ['failed', 7]);
  const gaveUp = await getJob(key, job.id);
  t.is(gaveUp.body.status, 'discarded');
  t.deepEqual(ids(await list(key, `application_id=${appId}&status=failed`)), [job.id]);

  const res = await retry(key, job.id);
  t.is(res.status, 200, JSON.stringify(res.body));
  const rows = await deliveriesOf(job.id);
  const goodRow = rows.find((r) => r.endpoint_id === good);
  const badRow = rows.find((r) => r.endpoint_id === bad);
  // Not re-delivered, but its counter restarts too: the job's attempt_count is 0 after a retry.
  t.like(goodRow, { status: 'succeeded', round: 1, attempt_count: 0 });
  t.like(badRow, { status: 'pending', round: 2, attempt_count: 0 });
  t.is(await messagesFor(goodRow?.id ?? 0, 2), 0);
  t.is(await messagesFor(badRow?.id ?? 0, 2), 1);
  t.is((await getJob(key, job.id)).body.status, 'created');
  t.deepEqual(ids(await list(key, `application_id=${appId}&status=failed`)), []);
});

test('retry resets attempt_count to 0 even when a target that succeeded is not re-delivered', async (t) => {
  const { key, appId } = await setup(t);
  const { job, good, bad } = await twoTargetJob(t, key, appId, ['succeeded', 3], ['failed', 7]);
  t.is((await getJob(key, job.id)).body.attempt_count, 7);
  const res = await retry(key, job.id);
  t.is(res.status, 200, JSON.stringify(res.body));
  t.deepEqual(res.body, { id: job.id, status: 'created', attempt_count: 0 });
  t.is((await getJob(key, job.id)).body.attempt_count, 0);
});

test('retry when every target had succeeded re-delivers to all of them', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  await createEndpoint(t, key, appId, ['invoice.paid']);
  await createEndpoint(t, key, appId, ['invoice.paid']);
  const job = await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: {} });
  await setState(t, key, job.id, 'succeeded');
  ok(t, await retry(key, job.id), 200, 'retry');
  const rows = await deliveriesOf(job.id);
  t.is(rows.length, 2);
  for (const row of rows) {
    t.like(row, { status: 'pending', round: 2, attempt_count: 0 });
    t.is(await messagesFor(row.id, 2), 1);
  }
});

test('retry counts no delivery to a deleted endpoint: with none left it is a 409 that changes nothing; with one restored it delivers again', async (t) => {
  // A probe: a succeeded job whose only endpoint was deleted answered 200 to a retry and, once
  // the claim dropped the delivery, became discarded and listed as failed, with no attempt; as
  // often as it was retried.
  const { key, appId } = await setup(t);
  const { job, good, bad } = await twoTargetJob(t, key, appId, ['succeeded', 1], ['failed', 7]);
  ok(t, await app.request('DELETE', `/v1/endpoints/${bad}`, { key }), 200, 'delete the failed target');
  // The failed target gone, the one left had succeeded: it is sent again, and only it.
  ok(t, await retry(key, job.id), 200, 'retry');
  const rows = await deliveriesOf(job.id);
  t.like(rows.find((r) => r.endpoint_id === good), { status: 'pending', round: 2 });
  t.not(rows.find((r) => r.endpoint_id === bad)?.status, 'pending');

  await setState(t, key, job.id, 'succeeded');
  ok(t, await app.request('DELETE', `/v1/endpoints/${good}`, { key }), 200, 'delete the other');
  const before = await getJob(key, job.id);
  const res = await retry(key, job.id);
  assertError(t, res, 409, 'invalid_state');
  t.regex(res.body.error.message, /endpoint this job was sent to has been deleted/);
  t.deepEqual((await getJob(key, job.id)).body, before.body, 'nothing changed');
  t.deepEqual(ids(await list(key, `application_id=${appId}&status=failed`)), []);

  ok(t, await app.request('POST', `/v1/endpoints/${good}/restore`, { key }), 200, 'restore');
  ok(t, await retry(key, job.id), 200, 'retry after the restore');
  t.like((await deliveriesOf(job.id)).find((r) => r.endpoint_id === good), { status: 'pending', round: 3 });
});

test('retry while a deleted endpoint\'s delivery still waits to be dropped: it is left out, and the job succeeds once its live target has', async (t) => {
  // A delete drops its endpoint's waiting deliveries in its own transaction, but not those past
  // its first 1,000, nor one whose job another transaction holds at that moment (left to the
  // claim or the upkeep, sql/003-soft-delete.sql). Such a delivery, still pending when a retry
  // began a new round without it (its endpoint deleted: not a target), was dropped afterwards
  // and then made the job discarded, listed as failed, although its one target had succeeded:
  // what a dropped or failed one left out by the retry no longer does.
  const { key, appId } = await setup(t);
  const { job, good, bad } = await twoTargetJob(t, key, appId, ['failed', 7], ['failed', 7]);
  const waitingFor = (pid: number) => until('a statement waiting for the test\'s lock', async () =>
    (await app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
      select count(*)::int as n from pg_stat_activity where ${pid}::int = any(pg_blocking_pids(pid))`)) > 0);

  // The delete waits for the application; a retry meanwhile makes both deliveries pending
  // (round 2), and the job is held when the delete's trigger comes to drop `bad`'s.
  const releaseApplication = await holdApplications([appId]);
  t.teardown(releaseApplication);
  const deleting = app.request('DELETE', `/v1/endpoints/${bad}`, { key });
  await waitingFor(releaseApplication.pid);
  ok(t, await retry(key, job.id), 200, 'retry while the delete waits');
  const jobLocker = new pg.Client({ connectionString: app.databaseUrl });
  await jobLocker.connect();
  t.teardown(() => jobLocker.end());
  await jobLocker.query('begin');
  await jobLocker.query('select 1 from webhook_jobs where id = $1 for update', [job.id]);
  await releaseApplication();
  ok(t, await deleting, 200, 'delete');
  await jobLocker.query('commit');
  const left = (await deliveriesOf(job.id)).find((r) => r.endpoint_id === bad);
  t.like(left, { status: 'pending', round: 2 }, 'left to the claim or the upkeep');

  // `good` failed an attempt and waits for its retry: the job is retried now, `bad` still waiting.
  await app.pool.query(sql.unsafe`update deliveries set attempt_count = 1 where job_id = ${job.id} and endpoint_id = ${good}`);
  t.is((await getJob(key, job.id)).body.status, 'awaiting_retry');
  ok(t, await retry(key, job.id), 200, 'retry');
  const rows = await deliveriesOf(job.id);
  t.like(rows.find((r) => r.endpoint_id === good), { status: 'pending', round: 3 });
  t.like(rows.find((r) => r.endpoint_id === bad), { status: 'pending', round: 2 }, 'not a target of the new round');

  // Its one target succeeds: the job is succeeded, and stays so once the upkeep drops `bad`'s.
  await app.pool.query(sql.unsafe`
    update deliveries set status = 'succeeded', attempt_count = 1 where job_id = ${job.id} and endpoint_id = ${good}`);
  t.like((await getJob(key, job.id)).body, { status: 'succeeded', attempt_count: 1, discarded_at: null });
  t.true(await dropDeliveriesOfDeletedEndpoints(app.pool, 1000) >= 1);
  t.like((await deliveriesOf(job.id)).find((r) => r.endpoint_id === bad), { status: 'dropped', round: 2 });
  const done = (await getJob(key, job.id)).body;
  t.like(done, { status: 'succeeded', attempt_count: 1, discarded_at: null });
  t.regex(done.completed_at ?? '', ISO_MS);
  t.deepEqual(ids(await list(key, `application_id=${appId}&status=failed`)), []);
  t.deepEqual(ids(await list(key, `application_id=${appId}&status=succeeded`)), [job.id]);
});

test('retry from created or executing: 409 invalid_state, nothing changes', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  await createEndpoint(t, key, appId, ['invoice.paid']);
  const created = await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: {} });
  const executing = await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: {} });
  await setState(t, key, executing.id, 'executing');
  for (const [id, status] of [[created.id, 'created'], [executing.id, 'executing']] as const) {
    const before = await getJob(key, id);
    assertError(t, await retry(key, id), 409, 'invalid_state');
    const after = await getJob(key, id);
    t.is(after.body.status, status);
    t.deepEqual(after.body, before.body);
    const [row] = await deliveriesOf(id);
    t.is(row?.round, 1);
    t.is(await messagesFor(row?.id ?? 0), 1);
  }
});

// ---------------------------------------------------------------- retry, with the worker

/** A job of a new event type fanned out to one endpoint per reply, each at its own receiver. */
async function jobToReceivers(t: ExecutionContext, replies: Reply[]) {
  const { key, appId } = await setup(t, worker);
  await createEventType(t, key, 'invoice.paid', undefined, worker);
  const receivers = [];
  const endpoints = [];
  for (const reply of replies) {
    const receiver = await startReceiver(reply);
    t.teardown(() => receiver.close());
    receivers.push(receiver);
    endpoints.push(await createEndpoint(t, key, appId, ['invoice.paid'], worker, receiver.at('/hooks')));
  }
  const job = await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: { n: 1 } }, worker);
  const read = async (): Promise<any> => (await getJob(key, job.id, worker)).body;
  const listed = async (status: string): Promise<string[]> =>
    ids(await worker.request('GET', `/v1/webhook-jobs?application_id=${appId}&status=${status}`, { key }));
  return { key, appId, job, receivers, endpoints, read, listed };
}

/** The job once `n` attempts are recorded and nothing is in flight or about to start; `status` is asserted. */
async function settled(t: ExecutionContext, read: () => Promise<any>, n: number, status: string): Promise<any> {
  const job = await until(`${n} attempts recorded and the job neither created nor executing`, async () => {
    const now = await read();
    return now.deliveries.length === n && !['created', 'executing'].includes(now.status) ? now : undefined;
  });
  t.is(job.status, status, `after ${n} attempts`);
  return job;
}

/** Deletes `deleted`, one of the job's endpoints, then retries the job: 200 `created`. */
async function retriedAfterDelete(t: ExecutionContext, key: string, jobId: string, deleted: string) {
  ok(t, await worker.request('DELETE', `/v1/endpoints/${deleted}`, { key }), 200, 'delete the failing endpoint');
  const res = await worker.request('POST', `/v1/webhook-jobs/${jobId}/retry`, { key });
  ok(t, res, 200, 'retry');
  t.deepEqual(res.body, { id: jobId, status: 'created', attempt_count: 0 });
}

test('retry after a failing endpoint was deleted: the job succeeds once every live target has, and is not listed as failed', async (t) => {
  // A black-box probe (twice): A answers 200, C 500; after attempt 1, C deleted (the job
  // discarded: its delivery to C dropped). The retry re-sent the job to A, which answered 200,
  // and the job stayed discarded, listed by ?status=failed, though its one target had succeeded.
  const { key, job, receivers: [a, c], endpoints: [aId, cId], read, listed } = await jobToReceivers(t, [
    () => ({ status: 200, body: 'ok' }),
    () => ({ status: 500, body: 'down' }),
  ]);
  await settled(t, read, 2, 'awaiting_retry');
  ok(t, await worker.request('DELETE', `/v1/endpoints/${cId}`, { key }), 200, 'delete C');
  const discarded = await read();
  t.is(discarded.status, 'discarded', 'C\'s delivery dropped by its delete: the job gave up');
  t.deepEqual(await listed('failed'), [job.id]);

  const res = await worker.request('POST', `/v1/webhook-jobs/${job.id}/retry`, { key });
  ok(t, res, 200, 'retry');
  t.deepEqual(res.body, { id: job.id, status: 'created', attempt_count: 0 });
  const done = await settled(t, read, 3, 'succeeded');
  t.is(done.attempt_count, 1);
  t.regex(done.completed_at ?? '', ISO_MS);
  t.is(done.discarded_at, null);
  t.deepEqual(await listed('failed'), []);
  t.deepEqual(await listed('succeeded'), [job.id]);
  // The records stay what happened: A's two attempts and C's one.
  t.deepEqual(done.deliveries.map((d: any) => [d.endpoint_id, d.attempt, d.status_code]).sort(),
    [[aId, 1, 200], [aId, 1, 200], [cId, 1, 500]].sort());
  t.is(a!.arrivals.length, 2);
  t.is(c!.arrivals.length, 1, 'nothing sent to the deleted endpoint');
  // Only a deleted endpoint's delivery is left out: the job's timeline ends in its completion.
  const timeline = await worker.pool.any(sql.type(z.object({ kind: z.string() }))`
    select kind from job_timeline where job_id = ${job.id} order by seq`);
  t.deepEqual(timeline.map((e) => e.kind), ['created', 'attempt', 'attempt', 'attempt', 'completed']);
});

test('retry after a given-up endpoint of three was deleted: both live targets are sent again and the job succeeds', async (t) => {
  // The three-endpoint variant: C gave up at once (a Retry-After past the job's window), so
  // the job was discarded before the delete; the two others had succeeded.
  const { key, job, receivers: [a, b, c], endpoints: [, , cId], read, listed } = await jobToReceivers(t, [
    () => ({ status: 200, body: 'ok' }),
    () => ({ status: 200, body: 'ok' }),
    () => ({ status: 503, body: 'later', headers: { 'retry-after': '999999' } }),
  ]);
  await settled(t, read, 3, 'discarded');
  await retriedAfterDelete(t, key, job.id, cId!);
  const done = await settled(t, read, 5, 'succeeded');
  t.is(done.discarded_at, null);
  t.deepEqual(await listed('failed'), []);
  t.deepEqual([a!.arrivals.length, b!.arrivals.length, c!.arrivals.length], [2, 2, 1]);
});

test('retry leaves out only deleted endpoints: a live target that gives up in the new round still discards the job', async (t) => {
  const { key, job, endpoints: [, , cId], read, listed } = await jobToReceivers(t, [
    () => ({ status: 200, body: 'ok' }),
    () => ({ status: 503, body: 'later', headers: { 'retry-after': '999999' } }),
    () => ({ status: 500, body: 'down' }),
  ]);
  await settled(t, read, 3, 'awaiting_retry');
  await retriedAfterDelete(t, key, job.id, cId!);
  const done = await settled(t, read, 4, 'discarded');
  t.regex(done.discarded_at ?? '', ISO_MS);
  t.deepEqual(await listed('failed'), [job.id]);
});
