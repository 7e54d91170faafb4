// POST /v1/webhook-jobs: the created job, fan-out to deliveries and queue messages, validation,
// payload size and application lookup.
import test from 'ava';
import { sql } from 'slonik';
import { newId } from '../../src/ids.ts';
import { assertError } from '../helpers/app.ts';
import {
  app, CREATE_FIELDS, ISO_MS, JOB_ID, HOURS_48, PAYLOAD_LIMIT, setup, ok, createApplication, createEventType,
  createEndpoint, createKey, postJob, getJob, createJob, deliveriesOf, messagesFor, orphanMessages, jobRows,
  deliveryRows, assertNothingCreated, webhookJobsCount, paths, INVOICE_SCHEMA,
} from './helpers.ts';

// ---------------------------------------------------------------- create

test('create: 201 with exactly the create fields, status created, 0 attempts, 6 retries, a 48 h window', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  await createEndpoint(t, key, appId, ['invoice.paid']);
  const res = await postJob(key, { application_id: appId, event_type: 'invoice.paid', payload: { invoice_id: 'in_1' } });
  t.is(res.status, 201, JSON.stringify(res.body));
  t.deepEqual(Object.keys(res.body).sort(), CREATE_FIELDS);
  t.regex(res.body.id, JOB_ID);
  t.is(res.body.application_id, appId);
  t.is(res.body.event_type, 'invoice.paid');
  t.is(res.body.status, 'created');
  t.is(res.body.attempt_count, 0);
  t.is(res.body.max_retries, 6);
  t.regex(res.body.created_at, ISO_MS);
  t.regex(res.body.expires_at, ISO_MS);
  t.is(Date.parse(res.body.expires_at) - Date.parse(res.body.created_at), HOURS_48);
  t.is(res.headers.get('idempotent-replayed'), null);

  const second = await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: {} });
  t.not(second.id, res.body.id);
});

test('create fans out to every live subscribed endpoint of the application, whatever its status: a queue message for each pending one, paused and disabled ones held', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  await createEventType(t, key, 'invoice.voided');
  const active = await createEndpoint(t, key, appId, ['invoice.paid']);
  const paused = await createEndpoint(t, key, appId, ['invoice.paid', 'invoice.voided']);
  const disabled = await createEndpoint(t, key, appId, ['invoice.paid']);
  const deleted = await createEndpoint(t, key, appId, ['invoice.paid']);
  const otherType = await createEndpoint(t, key, appId, ['invoice.voided']);
  const nothing = await createEndpoint(t, key, appId, []);
  const otherAppId = await createApplication(t, key);
  const otherApps = await createEndpoint(t, key, otherAppId, ['invoice.paid']);
  await app.pool.query(sql.unsafe`update endpoints set status = 'paused' where id = ${paused}`);
  await app.pool.query(sql.unsafe`update endpoints set status = 'disabled', disabled_reason = 'circuit_breaker', disabled_at = now(), failure_count = 10 where id = ${disabled}`);
  ok(t, await app.request('DELETE', `/v1/endpoints/${deleted}`, { key }), 200, 'delete an endpoint');

  const job = await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: { n: 1 } });
  t.is(job.status, 'created');
  const rows = await deliveriesOf(job.id);
  t.deepEqual(rows.map((r) => r.endpoint_id).sort(), [active, paused, disabled].sort());
  for (const row of rows) {
    // Held from the accept, as a claim would hold them: no queue message (test/held-unqueued.test.ts).
    const held = row.endpoint_id !== active;
    t.is(row.status, held ? 'held' : 'pending');
    t.is(row.round, 1);
    t.is(row.attempt_count, 0);
    t.is(await messagesFor(row.id), held ? 0 : 1, `queue messages for the delivery to ${row.endpoint_id}`);
    t.is(await messagesFor(row.id, 1), held ? 0 : 1);
  }
  for (const excluded of [deleted, otherType, nothing, otherApps]) {
    t.false(rows.some((r) => r.endpoint_id === excluded), `no delivery to ${excluded}`);
  }
  t.is(await deliveryRows(otherAppId), 0);
  t.is(await orphanMessages(), 0);
});

test('create with no subscriber: 201, succeeded at once, completed, with no delivery', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  await createEventType(t, key, 'invoice.voided');
  await createEndpoint(t, key, appId, ['invoice.voided']);
  const res = await postJob(key, { application_id: appId, event_type: 'invoice.paid', payload: {} });
  t.is(res.status, 201, JSON.stringify(res.body));
  t.deepEqual(Object.keys(res.body).sort(), CREATE_FIELDS);
  t.is(res.body.status, 'succeeded');
  t.is(res.body.attempt_count, 0);
  t.deepEqual(await deliveriesOf(res.body.id), []);
  const got = await getJob(key, res.body.id);
  t.is(got.body.status, 'succeeded');
  t.regex(got.body.completed_at ?? '', ISO_MS);
  t.is(got.body.discarded_at, null);
  t.deepEqual(got.body.deliveries, []);
});

test('webhook_jobs_count of the application counts created jobs, not replays nor refused requests', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  t.is(await webhookJobsCount(t, key, appId), 0);
  await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: {}, event_id: 'e-1' });
  t.is(await webhookJobsCount(t, key, appId), 1);
  await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: {} });
  t.is(await webhookJobsCount(t, key, appId), 2);
  const replay = await postJob(key, { application_id: appId, event_type: 'invoice.paid', payload: {}, event_id: 'e-1' });
  t.is(replay.status, 200);
  const refused = await postJob(key, { application_id: appId, event_type: 'nope.happened', payload: {} });
  t.is(refused.status, 400);
  t.is(await webhookJobsCount(t, key, appId), 2);
});

// ---------------------------------------------------------------- validation

const invalidCreates: Array<[string, Record<string, unknown>, string[]]> = [
  ['an empty body', { application_id: undefined, event_type: undefined, payload: undefined }, ['application_id', 'event_type', 'payload']],
  ['a missing application_id', { application_id: undefined }, ['application_id']],
  ['a missing event_type', { event_type: undefined }, ['event_type']],
  ['a missing payload', { payload: undefined }, ['payload']],
  ['an empty event_type', { event_type: '' }, ['event_type']],
  ['an unknown event type', { event_type: 'nope.happened' }, ['event_type']],
  ['a payload that is an array', { payload: [1, 2] }, ['payload']],
  ['a payload that is a string', { payload: '{"a":1}' }, ['payload']],
  ['a payload that is null', { payload: null }, ['payload']],
  ['a payload that is a number', { payload: 42 }, ['payload']],
  ['an empty event_id', { event_id: '' }, ['event_id']],
  ['an event_id of 256 characters', { event_id: 'e'.repeat(256) }, ['event_id']],
  ['an event_id that is a number', { event_id: 7 }, ['event_id']],
  ['the reserved header Host', { headers: { Host: 'evil.example' } }, ['headers.Host']],
  ['the reserved header content-type', { headers: { 'content-type': 'text/plain' } }, ['headers.content-type']],
  ['the reserved header User-Agent', { headers: { 'User-Agent': 'me' } }, ['headers.User-Agent']],
  ['the reserved header Content-Length', { headers: { 'Content-Length': '1' } }, ['headers.Content-Length']],
  ['the reserved header Connection', { headers: { Connection: 'close' } }, ['headers.Connection']],
  ['the reserved header Transfer-Encoding', { headers: { 'Transfer-Encoding': 'chunked' } }, ['headers.Transfer-Encoding']],
  ['the reserved header Webhook-Id', { headers: { 'Webhook-Id': 'x' } }, ['headers.Webhook-Id']],
  ['the reserved header webhook-signature', { headers: { 'webhook-signature': 'v1,x' } }, ['headers.webhook-signature']],
  ['the reserved header webhook-anything', { headers: { 'webhook-anything': 'x' } }, ['headers.webhook-anything']],
  ['21 headers', { headers: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`X-H${i}`, 'v'])) }, ['headers']],
  ['the header name "bad name"', { headers: { 'bad name': 'v' } }, ['headers.bad name']],
  ['the header name "a:b"', { headers: { 'a:b': 'v' } }, ['headers.a:b']],
  ['a header value with CR/LF', { headers: { 'X-Inject': 'a\r\nX-Other: b' } }, ['headers.X-Inject']],
  ['a non-string header value', { headers: { 'X-Number': 5 } }, ['headers.X-Number']],
  ['headers that are not an object', { headers: ['X-A'] }, ['headers']],
  ['an unknown body field', { priority: 'high' }, ['priority']],
];

for (const [label, change, expected] of invalidCreates) {
  test(`create refuses ${label}: 400 naming ${expected.join(', ')}, nothing created`, async (t) => {
    const { key, appId } = await setup(t);
    await createEventType(t, key, 'invoice.paid');
    await createEndpoint(t, key, appId, ['invoice.paid']);
    const body: Record<string, unknown> = { application_id: appId, event_type: 'invoice.paid', payload: { a: 1 }, ...change };
    for (const [k, v] of Object.entries(change)) if (v === undefined) delete body[k];
    const res = await postJob(key, body);
    assertError(t, res, 400, 'validation_error');
    for (const path of expected) t.true(paths(res).includes(path), `${path} in ${JSON.stringify(res.body.error)}`);
    await assertNothingCreated(t, appId);
    t.is(await webhookJobsCount(t, key, appId), 0);
  });
}

test('create refuses an event type of another organization or of the other environment (400)', async (t) => {
  const { key, appId } = await setup(t);
  await createEndpoint(t, key, appId, []);
  const other = await app.createOrg();
  await createEventType(t, other.key, 'invoice.paid');
  const testKey = await createKey(t, key, { environment: 'test' });
  await createEventType(t, testKey, 'invoice.paid');
  const res = await postJob(key, { application_id: appId, event_type: 'invoice.paid', payload: {} });
  assertError(t, res, 400, 'validation_error');
  t.deepEqual(paths(res), ['event_type']);
  await assertNothingCreated(t, appId);
});

test('create accepts the bounds: an event_id of 1 and of 255 characters, 20 headers', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  for (const eventId of ['x', 'e'.repeat(255)]) {
    const job = await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: {}, event_id: eventId });
    t.is((await getJob(key, job.id)).body.event_id, eventId);
  }
  const headers = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`X-H${i}`, `v${i}`]));
  const job = await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: {}, headers });
  t.deepEqual((await getJob(key, job.id)).body.headers, headers);
});

test('a payload failing the event type\'s JSON schema: 400 with every schema error under payload, nothing created', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid', INVOICE_SCHEMA);
  await createEndpoint(t, key, appId, ['invoice.paid']);
  const res = await postJob(key, { application_id: appId, event_type: 'invoice.paid', payload: { amount: -1, lines: [{ sku: 5 }] } });
  assertError(t, res, 400, 'validation_error');
  const details: Array<{ path: string; message: string }> = res.body.error.details ?? [];
  t.true(details.length >= 3, JSON.stringify(details));
  for (const d of details) {
    t.true(d.path === 'payload' || d.path.startsWith('payload.'), d.path);
    t.is(typeof d.message, 'string');
    t.true(d.message.length > 0);
  }
  t.true(details.some((d) => d.path === 'payload' && d.message.includes('invoice_id')), JSON.stringify(details));
  t.true(paths(res).includes('payload.amount'), JSON.stringify(details));
  t.true(paths(res).includes('payload.lines.0.sku'), JSON.stringify(details));
  await assertNothingCreated(t, appId);

  const valid = await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: { invoice_id: 'in_1', amount: 0, lines: [{ sku: 'a' }] } });
  t.is(valid.status, 'created');
});

test('a changed event type is never validated against its old schema: schema replaced, removed, type deleted and recreated', async (t) => {
  // The web process remembers event types it accepted jobs for; the database checks that
  // memory against the current version on every job, so none of these changes is missed.
  const { key, appId } = await setup(t);
  const eventTypeId = await createEventType(t, key, 'order.placed', { type: 'object', required: ['a'] });
  await createEndpoint(t, key, appId, ['order.placed']);
  const job = (payload: object, event_id?: string) =>
    postJob(key, { application_id: appId, event_type: 'order.placed', payload, ...(event_id ? { event_id } : {}) });
  t.is((await job({ a: 1 }, 'e-1')).status, 201); // remembered with schema v1
  assertError(t, await job({ b: 1 }), 400, 'validation_error');

  const patched = await app.request('PATCH', `/v1/event-types/${eventTypeId}`, { key, body: { schema: { type: 'object', required: ['b'] } } });
  ok(t, patched, 200, 'replace the schema');
  const underNew = await job({ b: 1 });
  t.is(underNew.status, 201, JSON.stringify(underNew.body));
  const underOld = await job({ a: 1 });
  assertError(t, underOld, 400, 'validation_error');
  t.true(underOld.body.error.details.some((d: { message: string }) => d.message.includes('b')), JSON.stringify(underOld.body));
  // A replay still wins over a payload the current schema refuses.
  const replay = await job({ a: 1 }, 'e-1');
  t.is(replay.status, 200);
  t.is(replay.headers.get('idempotent-replayed'), 'true');

  ok(t, await app.request('PATCH', `/v1/event-types/${eventTypeId}`, { key, body: { schema: null } }), 200, 'remove the schema');
  t.is((await job({ anything: true })).status, 201);

  ok(t, await app.request('DELETE', `/v1/event-types/${eventTypeId}?force=true`, { key }), 200, 'delete the event type');
  const unknown = await job({ a: 1 });
  assertError(t, unknown, 400, 'validation_error');
  t.deepEqual(paths(unknown), ['event_type']);
  await createEventType(t, key, 'order.placed', { type: 'object', required: ['c'] });
  assertError(t, await job({ b: 1 }), 400, 'validation_error');
  const recreated = await job({ c: 1 });
  t.is(recreated.status, 201, JSON.stringify(recreated.body));
  t.is(recreated.body.status, 'succeeded', 'the new event type has no subscriber: nothing to send');
});

/** A payload whose JSON is exactly `bytes` bytes long, made of `unit` repeated (ASCII, or 2-byte é). */
function payloadOfBytes(bytes: number, unit: 'a' | 'é' = 'a'): Record<string, string> {
  const envelope = Buffer.byteLength(JSON.stringify({ data: '' }));
  const size = Buffer.byteLength(unit);
  const room = bytes - envelope;
  const payload = { data: unit.repeat(Math.floor(room / size)) + 'a'.repeat(room % size) };
  if (Buffer.byteLength(JSON.stringify(payload)) !== bytes) throw new Error('payloadOfBytes miscounted');
  return payload;
}

test('payload size: exactly 262,144 bytes of JSON is accepted, one byte more is 413 payload_too_large with nothing created', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  await createEndpoint(t, key, appId, ['invoice.paid']);
  for (const over of [payloadOfBytes(PAYLOAD_LIMIT + 1), payloadOfBytes(PAYLOAD_LIMIT + 1, 'é')]) {
    const res = await postJob(key, { application_id: appId, event_type: 'invoice.paid', payload: over });
    assertError(t, res, 413, 'payload_too_large');
    await assertNothingCreated(t, appId);
  }
  // Under the limit in characters, over it in bytes: the limit is on bytes.
  const multibyte = payloadOfBytes(PAYLOAD_LIMIT + 2, 'é');
  t.true(JSON.stringify(multibyte).length <= PAYLOAD_LIMIT);
  assertError(t, await postJob(key, { application_id: appId, event_type: 'invoice.paid', payload: multibyte }), 413, 'payload_too_large');
  await assertNothingCreated(t, appId);

  for (const exact of [payloadOfBytes(PAYLOAD_LIMIT), payloadOfBytes(PAYLOAD_LIMIT, 'é')]) {
    const job = await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: exact });
    const got = await getJob(key, job.id);
    t.deepEqual(got.body.payload, exact);
  }
  t.is(await jobRows(appId), 2);
});

test('application_id unknown, malformed, deleted, of another organization or of the other environment: 404, nothing created', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  const deletedApp = await createApplication(t, key);
  ok(t, await app.request('DELETE', `/v1/applications/${deletedApp}`, { key }), 200, 'delete an application');
  const other = await setup(t);
  const testKey = await createKey(t, key, { environment: 'test' });
  const testApp = await createApplication(t, testKey);
  for (const applicationId of [newId('app'), 'app_123', 'nope', newId('ep'), deletedApp, other.appId, testApp]) {
    const res = await postJob(key, { application_id: applicationId, event_type: 'invoice.paid', payload: {} });
    assertError(t, res, 404, 'not_found');
  }
  for (const id of [appId, deletedApp, other.appId, testApp]) await assertNothingCreated(t, id);
});
