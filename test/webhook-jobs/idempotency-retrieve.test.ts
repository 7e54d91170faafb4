// event_id idempotency (replays, concurrency, expiry) and GET /v1/webhook-jobs/{id},
// with the real worker for the delivery records.
import test from 'ava';
import { sql } from 'slonik';
import { startTestApp } from '../helpers/app.ts';
import { startReceiver } from '../helpers/receiver.ts';
import { until } from '../helpers/until.ts';
import {
  app, CREATE_FIELDS, FULL_FIELDS, RECORD_FIELDS, ISO_MS, setup, createApplication, createEventType, createEndpoint,
  postJob, getJob, retry, createJob, deliveriesOf, messagesFor, jobRows, deliveryRows, webhookJobsCount, setState,
  INVOICE_SCHEMA,
} from './helpers.ts';

const worker = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true', RETRY_SCHEDULE: '1,1,1,1,1,1' }, { worker: true });

// ---------------------------------------------------------------- idempotency

test('a repeated event_id within 24 h: 200, Idempotent-Replayed, the first job in its current status, even for a different or invalid body', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid', INVOICE_SCHEMA);
  await createEventType(t, key, 'invoice.voided');
  await createEndpoint(t, key, appId, ['invoice.paid', 'invoice.voided']);
  const first = await postJob(key, { application_id: appId, event_type: 'invoice.paid', payload: { invoice_id: 'in_1' }, event_id: 'evt-42' });
  t.is(first.status, 201);
  t.is(first.headers.get('idempotent-replayed'), null);

  const same = await postJob(key, { application_id: appId, event_type: 'invoice.paid', payload: { invoice_id: 'in_1' }, event_id: 'evt-42' });
  t.is(same.status, 200, JSON.stringify(same.body));
  t.is(same.headers.get('idempotent-replayed'), 'true');
  t.deepEqual(same.body, first.body);

  await setState(t, key, first.body.id, 'succeeded');
  const replays = [
    { application_id: appId, event_type: 'invoice.voided', payload: { other: true }, event_id: 'evt-42', headers: { 'X-A': 'b' } },
    { application_id: appId, event_type: 'invoice.paid', payload: { amount: 'not a number' }, event_id: 'evt-42' },
  ];
  for (const body of replays) {
    const res = await postJob(key, body);
    t.is(res.status, 200, JSON.stringify(res.body));
    t.is(res.headers.get('idempotent-replayed'), 'true');
    t.deepEqual(Object.keys(res.body).sort(), CREATE_FIELDS);
    t.is(res.body.id, first.body.id);
    t.is(res.body.event_type, 'invoice.paid');
    t.is(res.body.status, 'succeeded');
    t.is(res.body.attempt_count, 1);
    t.is(res.body.created_at, first.body.created_at);
  }
  t.is(await jobRows(appId), 1);
  t.is(await deliveryRows(appId), 1);
  const got = await getJob(key, first.body.id);
  t.deepEqual(got.body.payload, { invoice_id: 'in_1' });
  t.deepEqual(got.body.headers, {});
});

test('the same event_id for another application creates another job; without event_id every request is a new job', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  const otherApp = await createApplication(t, key);
  const a = await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: {}, event_id: 'evt-1' });
  const b = await postJob(key, { application_id: otherApp, event_type: 'invoice.paid', payload: {}, event_id: 'evt-1' });
  t.is(b.status, 201, JSON.stringify(b.body));
  t.is(b.headers.get('idempotent-replayed'), null);
  t.not(b.body.id, a.id);
  t.is(b.body.application_id, otherApp);

  const other = await setup(t);
  await createEventType(t, other.key, 'invoice.paid');
  const c = await postJob(other.key, { application_id: other.appId, event_type: 'invoice.paid', payload: {}, event_id: 'evt-1' });
  t.is(c.status, 201);
  t.not(c.body.id, a.id);

  const x = await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: {} });
  const y = await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: {} });
  t.not(x.id, y.id);
  t.is(await jobRows(appId), 3);
});

test('20 concurrent requests with the same event_id: one 201, nineteen replays of the same job, its deliveries once', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  await createEndpoint(t, key, appId, ['invoice.paid']);
  await createEndpoint(t, key, appId, ['invoice.paid']);
  const body = { application_id: appId, event_type: 'invoice.paid', payload: { n: 1 }, event_id: 'evt-race' };
  const results = await Promise.all(Array.from({ length: 20 }, () => postJob(key, body)));
  const statuses = results.map((r) => r.status).sort();
  t.deepEqual(statuses, [...Array<number>(19).fill(200), 201], JSON.stringify(results.map((r) => r.body)));
  t.is(results.filter((r) => r.status === 201).length, 1);
  t.is(results.filter((r) => r.status === 200 && r.headers.get('idempotent-replayed') === 'true').length, 19);
  const jobIds = new Set(results.map((r) => r.body.id));
  t.is(jobIds.size, 1);
  t.is(await jobRows(appId), 1);
  const [jobId] = [...jobIds];
  const rows = await deliveriesOf(jobId ?? '');
  t.is(rows.length, 2);
  for (const row of rows) t.is(await messagesFor(row.id), 1);
  t.is(await webhookJobsCount(t, key, appId), 1);
});

test('after the idempotency key expires, the same event_id creates a new job, which later replays return', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  const body = { application_id: appId, event_type: 'invoice.paid', payload: {}, event_id: 'evt-old' };
  const first = await createJob(t, key, body);
  await app.pool.query(sql.unsafe`
    update webhook_job_keys set expires_at = now() - interval '1 second' where application_id = ${appId} and event_id = 'evt-old'`);
  const second = await postJob(key, body);
  t.is(second.status, 201, JSON.stringify(second.body));
  t.is(second.headers.get('idempotent-replayed'), null);
  t.not(second.body.id, first.id);
  const third = await postJob(key, body);
  t.is(third.status, 200);
  t.is(third.body.id, second.body.id);
  t.is(await jobRows(appId), 2);
});

// ---------------------------------------------------------------- retrieve

test('retrieve: every field, the payload and headers as sent, no delivery records before any attempt', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'order.shipped');
  await createEndpoint(t, key, appId, ['order.shipped']);
  const payload = {
    order: { id: 'o_1', lines: [{ sku: 'A-1', qty: 2, price: 19.99 }], tags: [] },
    note: 'Ünïcødé ✓ "quoted" \\ back',
    flag: false,
    nothing: null,
    big: 12345678901234,
  };
  const headers = { 'X-Tenant': 'acme', Authorization: 'Bearer t' };
  const job = await createJob(t, key, { application_id: appId, event_type: 'order.shipped', payload, event_id: 'ord-1', headers });
  const res = await getJob(key, job.id);
  t.is(res.status, 200);
  t.deepEqual(Object.keys(res.body).sort(), FULL_FIELDS);
  t.is(res.body.id, job.id);
  t.is(res.body.application_id, appId);
  t.is(res.body.event_type, 'order.shipped');
  t.is(res.body.event_id, 'ord-1');
  t.is(res.body.status, 'created');
  t.is(res.body.attempt_count, 0);
  t.is(res.body.max_retries, 6);
  t.deepEqual(res.body.payload, payload);
  t.is(JSON.stringify(res.body.payload), JSON.stringify(payload));
  t.deepEqual(res.body.headers, headers);
  t.is(res.body.created_at, job.created_at);
  t.is(res.body.expires_at, job.expires_at);
  t.is(res.body.completed_at, null);
  t.is(res.body.discarded_at, null);
  t.deepEqual(res.body.deliveries, []);

  const bare = await createJob(t, key, { application_id: appId, event_type: 'order.shipped', payload: {} });
  const got = await getJob(key, bare.id);
  t.is(got.body.event_id, null);
  t.deepEqual(got.body.headers, {});
  t.deepEqual(got.body.payload, {});
});

test('with the worker: delivery records after a failed and a successful attempt, exactly their fields, oldest first', async (t) => {
  const receiver = await startReceiver((_arrival, i) => (i === 0 ? { status: 500, body: 'not yet' } : { status: 200, body: 'thanks' }));
  const { key, appId } = await setup(t, worker);
  await createEventType(t, key, 'invoice.paid', undefined, worker);
  const endpointId = await createEndpoint(t, key, appId, ['invoice.paid'], worker, receiver.at('/hooks'));
  const payload = { invoice_id: 'in_1', amount: 4200 };
  const job = await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload }, worker);

  const done = await until('the job to succeed after a retry', async () => {
    const res = await getJob(key, job.id, worker);
    return res.body.status === 'succeeded' ? res.body : undefined;
  });
  t.is(done.attempt_count, 2);
  t.regex(done.completed_at ?? '', ISO_MS);
  t.is(done.discarded_at, null);
  t.is(done.deliveries.length, 2, JSON.stringify(done.deliveries));
  for (const record of done.deliveries) {
    t.deepEqual(Object.keys(record).sort(), RECORD_FIELDS);
    t.is(record.endpoint_id, endpointId);
    t.regex(record.attempted_at, ISO_MS);
    t.true(Number.isInteger(record.latency_ms) && record.latency_ms >= 0, String(record.latency_ms));
  }
  const [failed, succeeded] = done.deliveries;
  t.like(failed, { attempt: 1, status_code: 500, response_body: 'not yet', success: false, error: 'http_status' });
  t.like(succeeded, { attempt: 2, status_code: 200, response_body: 'thanks', success: true, error: null });
  t.true(Date.parse(failed.attempted_at) <= Date.parse(succeeded.attempted_at));

  t.is(receiver.arrivals.length, 2);
  for (const request of receiver.arrivals) {
    t.is(request.headers['webhook-id'], job.id);
    t.is(request.body.toString(), JSON.stringify(payload));
  }

  // A retry of the succeeded job delivers it once more.
  const retried = await worker.request('POST', `/v1/webhook-jobs/${job.id}/retry`, { key });
  t.is(retried.status, 200, JSON.stringify(retried.body));
  t.deepEqual(retried.body, { id: job.id, status: 'created', attempt_count: 0 });
  const again = await until('the retried job to be delivered again', async () => {
    const res = await getJob(key, job.id, worker);
    return res.body.status === 'succeeded' && res.body.deliveries.length === 3 ? res.body : undefined;
  });
  t.is(receiver.arrivals.length, 3);
  t.is(receiver.arrivals[2]?.headers['webhook-id'], job.id);
  t.like(again.deliveries[2], { endpoint_id: endpointId, status_code: 200, success: true, error: null });
});
