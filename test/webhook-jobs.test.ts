// /v1/webhook-jobs over HTTP: create (shape, fan-out to deliveries and queue messages,
// validation, payload size, application lookup), event_id idempotency (replays, concurrency,
// expiry), retrieve, list (every filter, pagination), cancel and retry (state rules, effect on
// deliveries and the queue), the endpoint test action, isolation and scopes. Most tests run
// without a worker, so jobs stay where they are put; job states are set through `deliveries`
// rows (the job status is derived from them by a trigger). A few tests run the real worker
// against a real receiver.
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { newId } from '../src/ids.ts';
import { assertError, startTestApp, type Response, type TestApp } from './helpers/app.ts';
import * as fixtures from './helpers/fixtures.ts';
import { startReceiver } from './helpers/receiver.ts';
import { until } from './helpers/until.ts';

const app = startTestApp();
const worker = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true', RETRY_SCHEDULE: '1,1,1,1,1,1' }, { worker: true });

const CREATE_FIELDS = ['application_id', 'attempt_count', 'created_at', 'event_type', 'expires_at', 'id', 'max_retries', 'status'];
const FULL_FIELDS = [
  'application_id', 'attempt_count', 'completed_at', 'created_at', 'deliveries', 'discarded_at', 'event_id', 'event_type',
  'expires_at', 'headers', 'id', 'max_retries', 'payload', 'status',
];
const SUMMARY_FIELDS = ['created_at', 'event_type', 'id', 'status'];
const RECORD_FIELDS = ['attempt', 'attempted_at', 'endpoint_id', 'error', 'latency_ms', 'response_body', 'status_code', 'success'];
const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const JOB_ID = /^job_[0-9A-Za-z]{27}$/;
const URL_OK = 'https://hooks.example.com/webhooks';
const HOURS_48 = 48 * 3600 * 1000;
const PAYLOAD_LIMIT = 262_144;

type Org = { key: string; orgId: string; appId: string };

// ---------------------------------------------------------------- helpers

async function setup(t: ExecutionContext, on: TestApp = app): Promise<Org> {
  const { key, orgId } = await on.createOrg();
  const appId = await createApplication(t, key, on);
  return { key, orgId, appId };
}

function ok(t: ExecutionContext, res: Response, status: number, what: string): void {
  t.is(res.status, status, `${what}: ${JSON.stringify(res.body)}`);
  if (res.status !== status) throw new Error(`could not ${what}: ${res.status} ${JSON.stringify(res.body)}`);
}

async function createApplication(t: ExecutionContext, key: string, on: TestApp = app): Promise<string> {
  return (await fixtures.createApplication({ t, on, key })).id;
}

async function createEventType(t: ExecutionContext, key: string, name: string, schema?: object, on: TestApp = app): Promise<string> {
  return (await fixtures.createEventType({ t, on, key }, schema ? { name, schema } : { name })).id;
}

async function createEndpoint(
  t: ExecutionContext, key: string, appId: string, eventTypes: string[], on: TestApp = app, url = URL_OK,
): Promise<string> {
  return (await fixtures.createEndpoint({ t, on, key }, { application_id: appId, url, event_types: eventTypes })).id;
}

async function createKey(t: ExecutionContext, byKey: string, body: { scopes?: string[]; environment?: 'live' | 'test' }): Promise<string> {
  return (await fixtures.createApiKey({ t, on: app, key: byKey }, body)).key;
}

const postJob = (key: string, body: unknown, on: TestApp = app) => on.request('POST', '/v1/webhook-jobs', { key, body });
const getJob = (key: string, id: string, on: TestApp = app) => on.request('GET', `/v1/webhook-jobs/${id}`, { key });
const cancel = (key: string, id: string) => app.request('POST', `/v1/webhook-jobs/${id}/cancel`, { key });
const retry = (key: string, id: string) => app.request('POST', `/v1/webhook-jobs/${id}/retry`, { key });
const list = (key: string, query: string) => app.request('GET', `/v1/webhook-jobs?${query}`, { key });

async function createJob(t: ExecutionContext, key: string, body: Record<string, unknown>, on: TestApp = app): Promise<any> {
  return fixtures.createJob({ t, on, key }, body);
}

const deliveryRow = z.object({ id: z.number(), endpoint_id: z.string(), status: z.string(), round: z.number(), attempt_count: z.number() });
type DeliveryRow = z.infer<typeof deliveryRow>;

/** A job with two targets, whose deliveries are then set to the given [status, attempt_count]. */
async function twoTargetJob(t: ExecutionContext, key: string, appId: string, good: [string, number], bad: [string, number]) {
  await createEventType(t, key, 'invoice.paid');
  const goodId = await createEndpoint(t, key, appId, ['invoice.paid']);
  const badId = await createEndpoint(t, key, appId, ['invoice.paid']);
  const job = await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: {} });
  for (const [endpointId, [status, attempts]] of [[goodId, good], [badId, bad]] as const) {
    await app.pool.query(sql.unsafe`
      update deliveries set status = ${status}, attempt_count = ${attempts} where job_id = ${job.id} and endpoint_id = ${endpointId}`);
  }
  return { job, good: goodId, bad: badId };
}

async function deliveriesOf(jobId: string, on: TestApp = app): Promise<readonly DeliveryRow[]> {
  return on.pool.any(sql.type(deliveryRow)`
    select id::int as id, endpoint_id, status, round, attempt_count from deliveries where job_id = ${jobId} order by id`);
}

const count = z.object({ n: z.number() });

/** Queue messages carrying this delivery (of this round, when given). */
async function messagesFor(deliveryId: number, round?: number, on: TestApp = app): Promise<number> {
  const ofRound = round === undefined ? sql.fragment`` : sql.fragment`and data->>'round' = ${String(round)}`;
  return on.pool.oneFirst(sql.type(count)`
    select count(*)::int as n from pgboss.job where name = 'deliveries' and data->>'deliveryId' = ${String(deliveryId)} ${ofRound}`);
}

/** Queue messages naming a delivery that does not exist: a rolled-back delivery whose message survived. */
async function orphanMessages(on: TestApp = app): Promise<number> {
  return on.pool.oneFirst(sql.type(count)`
    select count(*)::int as n from pgboss.job j where j.name = 'deliveries'
      and not exists (select 1 from deliveries d where d.id = (j.data->>'deliveryId')::bigint)`);
}

async function jobRows(appId: string, on: TestApp = app): Promise<number> {
  return on.pool.oneFirst(sql.type(count)`select count(*)::int as n from webhook_jobs where application_id = ${appId}`);
}

async function deliveryRows(appId: string, on: TestApp = app): Promise<number> {
  return on.pool.oneFirst(sql.type(count)`select count(*)::int as n from deliveries where application_id = ${appId}`);
}

async function assertNothingCreated(t: ExecutionContext, appId: string, on: TestApp = app): Promise<void> {
  t.is(await jobRows(appId, on), 0, 'no job row');
  t.is(await deliveryRows(appId, on), 0, 'no delivery row');
  t.is(await orphanMessages(on), 0, 'no queue message without its delivery');
}

async function webhookJobsCount(t: ExecutionContext, key: string, appId: string): Promise<number> {
  const res = await app.request('GET', `/v1/applications/${appId}`, { key });
  ok(t, res, 200, 'retrieve the application');
  return res.body.webhook_jobs_count;
}

type State = 'executing' | 'succeeded' | 'awaiting_retry' | 'failed' | 'archived';

/** Puts every delivery of a job in the state that makes the job `state`, and checks it took. */
async function setState(t: ExecutionContext, key: string, jobId: string, state: State): Promise<void> {
  const set = {
    executing: sql.fragment`status = 'in_flight'`,
    succeeded: sql.fragment`status = 'succeeded', attempt_count = 1`,
    awaiting_retry: sql.fragment`status = 'pending', attempt_count = 1`,
    failed: sql.fragment`status = 'failed', attempt_count = 7`,
    archived: sql.fragment`status = 'succeeded', attempt_count = 1`,
  }[state];
  await app.pool.query(sql.unsafe`update deliveries set ${set} where job_id = ${jobId}`);
  if (state === 'archived') {
    await app.pool.query(sql.unsafe`
      update webhook_jobs set status = 'archived', completed_at = now() - interval '31 days' where id = ${jobId}`);
  }
  const res = await getJob(key, jobId);
  ok(t, res, 200, 'retrieve the job');
  const expected = state === 'failed' ? 'discarded' : state;
  if (res.body.status !== expected) throw new Error(`setting ${state} gave a job in ${res.body.status}`);
}

const paths = (res: Response): string[] => (res.body?.error?.details ?? []).map((d: { path: string }) => d.path);
const ids = (res: Response): string[] => res.body.data.map((j: { id: string }) => j.id);
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

test('create fans out to every live subscribed endpoint of the application, whatever its status, with one queue message each', async (t) => {
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
  await app.pool.query(sql.unsafe`update endpoints set status = 'disabled', disabled_at = now(), failure_count = 10 where id = ${disabled}`);
  ok(t, await app.request('DELETE', `/v1/endpoints/${deleted}`, { key }), 200, 'delete an endpoint');

  const job = await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: { n: 1 } });
  t.is(job.status, 'created');
  const rows = await deliveriesOf(job.id);
  t.deepEqual(rows.map((r) => r.endpoint_id).sort(), [active, paused, disabled].sort());
  for (const row of rows) {
    t.is(row.status, 'pending');
    t.is(row.round, 1);
    t.is(row.attempt_count, 0);
    t.is(await messagesFor(row.id), 1, `one queue message for the delivery to ${row.endpoint_id}`);
    t.is(await messagesFor(row.id, 1), 1);
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

const INVOICE_SCHEMA = {
  type: 'object',
  required: ['invoice_id'],
  properties: {
    invoice_id: { type: 'string' },
    amount: { type: 'integer', minimum: 0 },
    lines: { type: 'array', items: { type: 'object', properties: { sku: { type: 'string' } } } },
  },
};

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

// ---------------------------------------------------------------- list

/**
 * Eight jobs with fixed creation times T1..T8 (one minute apart, T1 oldest) over three event
 * types and two endpoints (ep1 takes a.happened; ep2 a.happened and b.happened; c.happened has
 * no subscriber), each put in a different state.
 */
async function listFixture(t: ExecutionContext) {
  const org = await setup(t);
  const { key, appId } = org;
  for (const name of ['a.happened', 'b.happened', 'c.happened']) await createEventType(t, key, name);
  const ep1 = await createEndpoint(t, key, appId, ['a.happened']);
  const ep2 = await createEndpoint(t, key, appId, ['a.happened', 'b.happened']);
  const types = ['a', 'b', 'a', 'c', 'b', 'a', 'b', 'a'];
  const jobs: string[] = [];
  for (const type of types) {
    jobs.push((await createJob(t, key, { application_id: appId, event_type: `${type}.happened`, payload: {} })).id);
  }
  const at = (i: number) => new Date(Date.UTC(2030, 0, 1, 0, i, 0)).toISOString();
  for (const [i, id] of jobs.entries()) {
    await app.pool.query(sql.unsafe`update webhook_jobs set created_at = ${at(i + 1)}::timestamptz where id = ${id}`);
  }
  const [j1, j2, j3, j4, j5, j6, j7, j8] = jobs as [string, string, string, string, string, string, string, string];
  await setState(t, key, j1, 'succeeded');
  // j2: created
  await setState(t, key, j3, 'awaiting_retry');
  // j4: succeeded at once (no subscriber)
  await setState(t, key, j5, 'failed');
  ok(t, await cancel(key, j6), 200, 'cancel a job');
  await setState(t, key, j7, 'executing');
  await setState(t, key, j8, 'archived');
  return { ...org, ep1, ep2, j: { j1, j2, j3, j4, j5, j6, j7, j8 }, at };
}

test('list: summaries of exactly four fields, newest first, with offset pagination', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  const created = [];
  for (let i = 0; i < 3; i += 1) created.push(await createJob(t, key, { application_id: appId, event_type: 'invoice.paid', payload: { i } }));
  const other = await createApplication(t, key);
  await createJob(t, key, { application_id: other, event_type: 'invoice.paid', payload: {} });
  const res = await list(key, `application_id=${appId}`);
  t.is(res.status, 200, JSON.stringify(res.body));
  t.deepEqual(Object.keys(res.body).sort(), ['data', 'pagination']);
  t.deepEqual(ids(res), created.map((j) => j.id).reverse());
  for (const [i, item] of res.body.data.entries()) {
    t.deepEqual(Object.keys(item).sort(), SUMMARY_FIELDS);
    const job = created[created.length - 1 - i];
    t.deepEqual(item, { id: job.id, event_type: 'invoice.paid', status: 'succeeded', created_at: job.created_at });
  }
  t.deepEqual(res.body.pagination, { total: 3, page: 1, per_page: 25, total_pages: 1 });
});

test('list filters by status, each value alone; failed means discarded because delivery gave up, not cancelled', async (t) => {
  const { key, appId, j } = await listFixture(t);
  const expected: Record<string, string[]> = {
    created: [j.j2],
    executing: [j.j7],
    succeeded: [j.j4, j.j1],
    awaiting_retry: [j.j3],
    discarded: [j.j6, j.j5],
    failed: [j.j5],
    archived: [j.j8],
  };
  for (const [status, want] of Object.entries(expected)) {
    const res = await list(key, `application_id=${appId}&status=${status}`);
    t.is(res.status, 200, JSON.stringify(res.body));
    t.deepEqual(ids(res), want, status);
    t.is(res.body.pagination.total, want.length, status);
    const shown = status === 'failed' ? 'discarded' : status;
    for (const item of res.body.data) t.is(item.status, shown);
  }
  const all = await list(key, `application_id=${appId}`);
  t.deepEqual(ids(all), [j.j8, j.j7, j.j6, j.j5, j.j4, j.j3, j.j2, j.j1]);
  for (const bad of ['bogus', 'Created', 'cancelled', '']) {
    assertError(t, await list(key, `application_id=${appId}&status=${bad}`), 400, 'validation_error');
  }
});

test('list filters by event_type and by endpoint_id (jobs with a delivery to it)', async (t) => {
  const { key, appId, ep1, ep2, j } = await listFixture(t);
  const cases: Array<[string, string[]]> = [
    ['event_type=a.happened', [j.j8, j.j6, j.j3, j.j1]],
    ['event_type=b.happened', [j.j7, j.j5, j.j2]],
    ['event_type=c.happened', [j.j4]],
    ['event_type=d.happened', []],
    [`endpoint_id=${ep1}`, [j.j8, j.j6, j.j3, j.j1]],
    [`endpoint_id=${ep2}`, [j.j8, j.j7, j.j6, j.j5, j.j3, j.j2, j.j1]],
    [`endpoint_id=${newId('ep')}`, []],
  ];
  for (const [query, want] of cases) {
    const res = await list(key, `application_id=${appId}&${query}`);
    t.is(res.status, 200, `${query}: ${JSON.stringify(res.body)}`);
    t.deepEqual(ids(res), want, query);
    t.is(res.body.pagination.total, want.length, query);
  }
  for (const bad of ['nope', 'ep_123', newId('app'), '']) {
    const res = await list(key, `application_id=${appId}&endpoint_id=${bad}`);
    assertError(t, res, 400, 'validation_error');
    t.deepEqual(paths(res), ['endpoint_id']);
  }
});

test('list filters by created_after (inclusive) and created_before (exclusive), ISO 8601 with any offset', async (t) => {
  const { key, appId, j, at } = await listFixture(t);
  const q = (s: string) => encodeURIComponent(s);
  const cases: Array<[string, string[]]> = [
    [`created_after=${q(at(6))}`, [j.j8, j.j7, j.j6]],
    [`created_before=${q(at(3))}`, [j.j2, j.j1]],
    [`created_after=${q(at(3))}&created_before=${q(at(6))}`, [j.j5, j.j4, j.j3]],
    [`created_after=${q('2030-01-01T01:03:00+01:00')}&created_before=${q('2030-01-01T00:05:00Z')}`, [j.j4, j.j3]],
    [`created_after=${q('2030-01-01T00:03:00.001Z')}`, [j.j8, j.j7, j.j6, j.j5, j.j4]],
    [`created_before=${q('2030-01-01T00:03:00.001Z')}`, [j.j3, j.j2, j.j1]],
    [`created_after=${q(at(6))}&created_before=${q(at(6))}`, []],
    [`created_after=${q(at(9))}`, []],
  ];
  for (const [query, want] of cases) {
    const res = await list(key, `application_id=${appId}&${query}`);
    t.is(res.status, 200, `${query}: ${JSON.stringify(res.body)}`);
    t.deepEqual(ids(res), want, query);
  }
  for (const bad of ['yesterday', '2030-01-01', '2030-01-01T00:00:00', '2030-13-01T00:00:00Z', '1767225600', '']) {
    for (const name of ['created_after', 'created_before']) {
      const res = await list(key, `application_id=${appId}&${name}=${q(bad)}`);
      assertError(t, res, 400, 'validation_error');
      t.deepEqual(paths(res), [name], `${name}=${bad}`);
    }
  }
});

test('list filters combine', async (t) => {
  const { key, appId, ep1, ep2, j, at } = await listFixture(t);
  const q = (s: string) => encodeURIComponent(s);
  const cases: Array<[string, string[]]> = [
    ['status=discarded&event_type=a.happened', [j.j6]],
    ['status=failed&event_type=a.happened', []],
    ['status=failed&event_type=b.happened', [j.j5]],
    [`status=discarded&endpoint_id=${ep2}`, [j.j6, j.j5]],
    [`status=discarded&endpoint_id=${ep1}`, [j.j6]],
    [`event_type=b.happened&endpoint_id=${ep1}`, []],
    [`event_type=b.happened&endpoint_id=${ep2}`, [j.j7, j.j5, j.j2]],
    [`status=succeeded&created_after=${q(at(2))}`, [j.j4]],
    [`event_type=a.happened&endpoint_id=${ep1}&created_after=${q(at(2))}&created_before=${q(at(8))}`, [j.j6, j.j3]],
    [`status=archived&event_type=a.happened&endpoint_id=${ep2}&created_after=${q(at(8))}`, [j.j8]],
    [`status=archived&event_type=a.happened&endpoint_id=${ep2}&created_before=${q(at(8))}`, []],
  ];
  for (const [query, want] of cases) {
    const res = await list(key, `application_id=${appId}&${query}`);
    t.is(res.status, 200, `${query}: ${JSON.stringify(res.body)}`);
    t.deepEqual(ids(res), want, query);
    t.is(res.body.pagination.total, want.length, query);
  }
  const paged = await list(key, `application_id=${appId}&endpoint_id=${ep2}&per_page=3&page=2`);
  t.deepEqual(ids(paged), [j.j5, j.j3, j.j2]);
  t.deepEqual(paged.body.pagination, { total: 7, page: 2, per_page: 3, total_pages: 3 });
});

test('list pagination edges: per_page 100 and 101, default 25, a page past the end', async (t) => {
  const { key, orgId, appId } = await setup(t);
  const jobIds = Array.from({ length: 101 }, () => newId('job'));
  await app.pool.query(sql.unsafe`
    insert into webhook_jobs (id, org_id, environment, application_id, event_type, payload, expires_at, created_at)
    select u.id, ${orgId}, 'live', ${appId}, 'bulk.created', '{}'::json, now() + interval '48 hours', now() - u.n * interval '1 second'
    from unnest(${sql.array(jobIds, 'text')}) with ordinality as u(id, n)`);
  const first = await list(key, `application_id=${appId}&per_page=100`);
  t.is(first.status, 200, JSON.stringify(first.body));
  t.deepEqual(ids(first), jobIds.slice(0, 100));
  t.deepEqual(first.body.pagination, { total: 101, page: 1, per_page: 100, total_pages: 2 });
  const second = await list(key, `application_id=${appId}&per_page=100&page=2`);
  t.deepEqual(ids(second), jobIds.slice(100));
  t.deepEqual(second.body.pagination, { total: 101, page: 2, per_page: 100, total_pages: 2 });
  const past = await list(key, `application_id=${appId}&per_page=100&page=3`);
  t.is(past.status, 200);
  t.deepEqual(past.body.data, []);
  t.deepEqual(past.body.pagination, { total: 101, page: 3, per_page: 100, total_pages: 2 });
  const byDefault = await list(key, `application_id=${appId}`);
  t.deepEqual(ids(byDefault), jobIds.slice(0, 25));
  t.deepEqual(byDefault.body.pagination, { total: 101, page: 1, per_page: 25, total_pages: 5 });
  const last = await list(key, `application_id=${appId}&page=5`);
  t.deepEqual(ids(last), jobIds.slice(100));
  for (const [query, path] of [['per_page=101', 'per_page'], ['per_page=0', 'per_page'], ['page=0', 'page'], ['page=x', 'page'], ['per_page=2.5', 'per_page']]) {
    const res = await list(key, `application_id=${appId}&${query}`);
    assertError(t, res, 400, 'validation_error');
    t.deepEqual(paths(res), [path], query);
  }

  const empty = await list(key, `application_id=${await createApplication(t, key)}`);
  t.deepEqual(empty.body, { data: [], pagination: { total: 0, page: 1, per_page: 25, total_pages: 0 } });
});

test('list: application_id required (400), unknown or foreign application (404), unknown query parameter (400)', async (t) => {
  const { key, appId } = await setup(t);
  const missing = await list(key, '');
  assertError(t, missing, 400, 'validation_error');
  t.deepEqual(paths(missing), ['application_id']);
  const missingWithFilter = await list(key, 'status=created');
  assertError(t, missingWithFilter, 400, 'validation_error');
  t.true(paths(missingWithFilter).includes('application_id'));
  const other = await setup(t);
  const testKey = await createKey(t, key, { environment: 'test' });
  for (const applicationId of [newId('app'), 'app_1', 'nope', other.appId]) {
    assertError(t, await list(key, `application_id=${applicationId}`), 404, 'not_found');
  }
  assertError(t, await list(testKey, `application_id=${appId}`), 404, 'not_found');
  const unknown = await list(key, `application_id=${appId}&sort=asc`);
  assertError(t, unknown, 400, 'validation_error');
  t.deepEqual(paths(unknown), ['sort']);
  const typo = await list(key, `application_id=${appId}&stauts=created`);
  assertError(t, typo, 400, 'validation_error');
  t.deepEqual(paths(typo), ['stauts']);
});

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
