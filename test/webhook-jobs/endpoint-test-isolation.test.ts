// The endpoint test action (with the real worker), and isolation between tenants and scopes.
import test from 'ava';
import { sql } from 'slonik';
import { newId } from '../../src/ids.ts';
import { assertError, startTestApp } from '../helpers/app.ts';
import { startReceiver } from '../helpers/receiver.ts';
import { until } from '../helpers/until.ts';
import {
  app, ISO_MS, JOB_ID, setup, ok, createEventType, createEndpoint, createKey, postJob, getJob, cancel, retry, list,
  createJob, deliveriesOf, messagesFor, jobRows, assertNothingCreated, setState, paths, ids,
} from './helpers.ts';

const worker = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true', RETRY_SCHEDULE: '1,1,1,1,1,1' }, { worker: true });

// ---------------------------------------------------------------- endpoint test action

test('endpoint test: 202 {job_id, status queued, message}; a webhook.test job to that endpoint alone, with the default payload', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  const endpointId = await createEndpoint(t, key, appId, []);
  const bystander = await createEndpoint(t, key, appId, ['invoice.paid']);
  const before = Date.now();
  const res = await app.request('POST', `/v1/endpoints/${endpointId}/test`, { key });
  const after = Date.now();
  t.is(res.status, 202, JSON.stringify(res.body));
  t.deepEqual(Object.keys(res.body).sort(), ['job_id', 'message', 'status']);
  t.regex(res.body.job_id, JOB_ID);
  t.is(res.body.status, 'queued');
  t.is(typeof res.body.message, 'string');
  t.true(res.body.message.length > 0);

  const got = await getJob(key, res.body.job_id);
  t.is(got.status, 200, JSON.stringify(got.body));
  t.is(got.body.event_type, 'webhook.test');
  t.is(got.body.application_id, appId);
  t.is(got.body.status, 'created');
  t.deepEqual(Object.keys(got.body.payload).sort(), ['endpoint_id', 'sent_at', 'type']);
  t.is(got.body.payload.type, 'webhook.test');
  t.is(got.body.payload.endpoint_id, endpointId);
  t.regex(got.body.payload.sent_at, ISO_MS);
  const sentAt = Date.parse(got.body.payload.sent_at);
  t.true(sentAt >= before - 1000 && sentAt <= after + 1000);

  const rows = await deliveriesOf(res.body.job_id);
  t.deepEqual(rows.map((r) => r.endpoint_id), [endpointId]);
  t.false(rows.some((r) => r.endpoint_id === bystander));
  t.is(await messagesFor(rows[0]?.id ?? 0), 1);
  t.deepEqual(ids(await list(key, `application_id=${appId}&event_type=webhook.test`)), [res.body.job_id]);
});

test('endpoint test uses a custom payload; a paused endpoint still gets its one delivery', async (t) => {
  const { key, appId } = await setup(t);
  const endpointId = await createEndpoint(t, key, appId, []);
  await app.pool.query(sql.unsafe`update endpoints set status = 'paused' where id = ${endpointId}`);
  const payload = { hello: 'world', nested: { n: [1, 2, 3] } };
  const res = await app.request('POST', `/v1/endpoints/${endpointId}/test`, { key, body: { payload } });
  t.is(res.status, 202, JSON.stringify(res.body));
  const got = await getJob(key, res.body.job_id);
  t.deepEqual(got.body.payload, payload);
  t.is(got.body.event_type, 'webhook.test');
  const rows = await deliveriesOf(res.body.job_id);
  t.deepEqual(rows.map((r) => r.endpoint_id), [endpointId]);

  const empty = await app.request('POST', `/v1/endpoints/${endpointId}/test`, { key, body: {} });
  t.is(empty.status, 202);
  t.is((await getJob(key, empty.body.job_id)).body.payload.type, 'webhook.test');
});

test('endpoint test refuses a payload that is not an object and unknown fields (400); unknown, foreign or deleted endpoints are 404', async (t) => {
  const { key, appId } = await setup(t);
  const endpointId = await createEndpoint(t, key, appId, []);
  for (const payload of [[1], 'text', null, 5, true]) {
    const res = await app.request('POST', `/v1/endpoints/${endpointId}/test`, { key, body: { payload } });
    assertError(t, res, 400, 'validation_error');
    t.deepEqual(paths(res), ['payload'], JSON.stringify(payload));
  }
  const unknown = await app.request('POST', `/v1/endpoints/${endpointId}/test`, { key, body: { payload: {}, extra: 1 } });
  assertError(t, unknown, 400, 'validation_error');
  t.deepEqual(paths(unknown), ['extra']);
  await assertNothingCreated(t, appId);

  const other = await setup(t);
  const foreign = await createEndpoint(t, other.key, other.appId, []);
  const deleted = await createEndpoint(t, key, appId, []);
  ok(t, await app.request('DELETE', `/v1/endpoints/${deleted}`, { key }), 200, 'delete an endpoint');
  const testKey = await createKey(t, key, { environment: 'test' });
  for (const id of [newId('ep'), 'ep_123', 'nope', foreign, deleted]) {
    assertError(t, await app.request('POST', `/v1/endpoints/${id}/test`, { key }), 404, 'not_found');
  }
  assertError(t, await app.request('POST', `/v1/endpoints/${endpointId}/test`, { key: testKey }), 404, 'not_found');
  await assertNothingCreated(t, appId);
  await assertNothingCreated(t, other.appId);
});

test('with the worker: the test webhook arrives at the receiver, signed with the job id, and the job succeeds', async (t) => {
  const receiver = await startReceiver(() => ({ status: 204 }));
  const { key, appId } = await setup(t, worker);
  const endpointId = await createEndpoint(t, key, appId, [], worker, receiver.at('/hooks'));
  const res = await worker.request('POST', `/v1/endpoints/${endpointId}/test`, { key });
  t.is(res.status, 202, JSON.stringify(res.body));
  const done = await until('the test job to succeed', async () => {
    const got = await getJob(key, res.body.job_id, worker);
    return got.body.status === 'succeeded' ? got.body : undefined;
  });
  t.is(receiver.arrivals.length, 1);
  const [request] = receiver.arrivals;
  t.is(request?.url, '/hooks');
  t.is(request?.headers['webhook-id'], res.body.job_id);
  t.regex(String(request?.headers['webhook-signature']), /^v1,[A-Za-z0-9+/]+=*$/);
  t.deepEqual(JSON.parse(request?.body.toString() ?? 'null'), done.payload);
  t.is(done.payload.endpoint_id, endpointId);
  t.is(done.deliveries.length, 1);
  t.like(done.deliveries[0], { endpoint_id: endpointId, attempt: 1, status_code: 204, success: true, error: null });
});

// ---------------------------------------------------------------- isolation and scopes

test('jobs of another organization or environment, and malformed ids, are 404 on retrieve, retry and cancel', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  await createEndpoint(t, key, appId, ['invoice.paid']);
  const job = await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: {} });
  const done = await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: {} });
  await setState(t, key, done.id, 'succeeded');
  const other = await app.createOrg();
  const testKey = await createKey(t, key, { environment: 'test' });
  for (const outsider of [other.key, testKey]) {
    assertError(t, await getJob(outsider, job.id), 404, 'not_found');
    assertError(t, await cancel(outsider, job.id), 404, 'not_found');
    assertError(t, await retry(outsider, done.id), 404, 'not_found');
  }
  t.is((await getJob(key, job.id)).body.status, 'created');
  t.is((await getJob(key, done.id)).body.status, 'succeeded');
  for (const id of [newId('job'), 'job_123', 'nope', newId('app'), `${job.id}x`, job.id.replace('job_', 'JOB_')]) {
    assertError(t, await getJob(key, id), 404, 'not_found');
    assertError(t, await cancel(key, id), 404, 'not_found');
    assertError(t, await retry(key, id), 404, 'not_found');
  }
});

test('webhooks:read lists and retrieves but may not create, retry or cancel (403); endpoints:write alone may not read jobs', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  await createEndpoint(t, key, appId, ['invoice.paid']);
  const job = await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: {} });
  const done = await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: {} });
  await setState(t, key, done.id, 'succeeded');
  const reader = await createKey(t, key, { scopes: ['webhooks:read'] });
  const listed = await list(reader, `application_id=${appId}`);
  t.is(listed.status, 200, JSON.stringify(listed.body));
  t.deepEqual(ids(listed), [done.id, job.id]);
  const got = await getJob(reader, job.id);
  t.is(got.status, 200);
  t.is(got.body.id, job.id);
  assertError(t, await postJob(reader, { application_id: appId, event_type: 'invoice.paid', payload: {} }), 403, 'forbidden');
  assertError(t, await cancel(reader, job.id), 403, 'forbidden');
  assertError(t, await retry(reader, done.id), 403, 'forbidden');
  t.is(await jobRows(appId), 2);
  t.is((await getJob(key, job.id)).body.status, 'created');
  t.is((await getJob(key, done.id)).body.status, 'succeeded');

  const endpointsWriter = await createKey(t, key, { scopes: ['endpoints:write'] });
  assertError(t, await list(endpointsWriter, `application_id=${appId}`), 403, 'forbidden');
  assertError(t, await getJob(endpointsWriter, job.id), 403, 'forbidden');
  assertError(t, await postJob(endpointsWriter, { application_id: appId, event_type: 'invoice.paid', payload: {} }), 403, 'forbidden');

  const writer = await createKey(t, key, { scopes: ['webhooks:write'] });
  t.is((await postJob(writer, { application_id: appId, event_type: 'invoice.paid', payload: {} })).status, 201);
  t.is((await getJob(writer, job.id)).status, 200);
  t.is((await cancel(writer, job.id)).status, 200);
});

test('cancel and retry racing on one awaiting_retry job: no 500, and the outcome is one of the two, whole', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'race.happened');
  await createEndpoint(t, key, appId, ['race.happened']);
  const job = await createJob(t, key, { application_id: appId, event_type: 'race.happened', payload: {} });
  await setState(t, key, job.id, 'awaiting_retry');
  const [cancelled, retried] = await Promise.all([cancel(key, job.id), retry(key, job.id)]);
  // Each request sees the job locked by the other, or after it: both may succeed in either
  // order (retry of a cancelled job is allowed), or cancel may find the retried job created.
  t.true([200, 409].includes(cancelled.status), JSON.stringify(cancelled.body));
  t.true([200, 409].includes(retried.status), JSON.stringify(retried.body));
  const final = await getJob(key, job.id);
  const [delivery] = await deliveriesOf(job.id);
  if (final.body.status === 'discarded') {
    // Cancel came last: it succeeded, and nothing may be waiting to be sent.
    t.is(cancelled.status, 200);
    t.is(delivery?.status, 'cancelled');
  } else {
    // Retry came last: it succeeded, and a fresh round is pending with one queue message.
    t.is(retried.status, 200);
    t.is(final.body.status, 'created');
    t.is(delivery?.status, 'pending');
    t.is(await messagesFor(delivery?.id ?? 0, delivery?.round), 1);
  }
});
