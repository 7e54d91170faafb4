// GET /v1/operational-webhooks/events: the events written for the tenant, newest first as a
// cursor list, each with its deliveries' state; filtered by type; scoped by organization and
// environment; needs endpoints:read. (What the dashboard's operational webhooks page shows.)
import test from 'ava';
import { assertError, startTestApp } from '../helpers/app.ts';
import { createApiKey, createApplication, createEndpoint } from '../helpers/fixtures.ts';
import { OP_PATH } from './helpers.ts';

const app = startTestApp({});
const EVENTS = '/v1/operational-webhooks/events';

test('events newest first with their deliveries, cursor pages, type filter, tenant scope, scope check', async (t) => {
  const { key } = await app.createOrg();
  const by = { on: app, key, t };
  t.deepEqual((await app.request('GET', EVENTS, { key })).body, { data: [], next_cursor: null });
  const op = await app.request('POST', OP_PATH, { key, body: { url: 'https://ops.example.com/a' } });
  t.is(op.status, 201);
  const application = await createApplication(by);
  const endpoint = await createEndpoint(by, { application_id: application.id, url: 'https://hooks.example.com/a' });
  t.is((await app.request('PATCH', `/v1/endpoints/${endpoint.id}`, { key, body: { status: 'paused' } })).status, 200);

  const all = await app.request('GET', EVENTS, { key });
  t.is(all.status, 200);
  t.deepEqual(all.body.data.map((e: any) => e.type), ['endpoint.updated', 'endpoint.created']);
  const [updated, created] = all.body.data;
  t.regex(updated.id, /^opev_[0-9A-Za-z]{27}$/);
  t.like(updated.data, { id: endpoint.id, status: 'paused' });
  t.is(created.data.status, 'active');
  t.deepEqual(created.deliveries, [{ endpoint_id: op.body.id, status: 'pending', attempt_count: 0 }]);

  const page1 = await app.request('GET', `${EVENTS}?limit=1`, { key });
  t.deepEqual(page1.body.data.map((e: any) => e.id), [updated.id]);
  const page2 = await app.request('GET', `${EVENTS}?limit=1&cursor=${page1.body.next_cursor}`, { key });
  t.deepEqual(page2.body.data.map((e: any) => e.id), [created.id]);
  t.is(page2.body.next_cursor, null);
  t.deepEqual((await app.request('GET', `${EVENTS}?type=endpoint.created`, { key })).body.data.map((e: any) => e.id), [created.id]);
  assertError(t, await app.request('GET', `${EVENTS}?type=endpoint.exploded`, { key }), 400, 'validation_error');
  assertError(t, await app.request('GET', `${EVENTS}?cursor=nope`, { key }), 400, 'validation_error');

  const other = await app.createOrg();
  t.deepEqual((await app.request('GET', EVENTS, { key: other.key })).body.data, []);
  const test_ = await app.createOrg({ environment: 'test' });
  t.deepEqual((await app.request('GET', EVENTS, { key: test_.key })).body.data, []);
  const jobsOnly = await createApiKey(by, { scopes: ['webhooks:read'] });
  assertError(t, await app.request('GET', EVENTS, { key: jobsOnly.key }), 403, 'forbidden');
  const reader = await createApiKey(by, { scopes: ['endpoints:read'] });
  t.is((await app.request('GET', EVENTS, { key: reader.key })).body.data.length, 2);
});

// An endpoint.* event carries the endpoint's event types: up to 1,000 names of 255 characters,
// 258 KB. A page of 100 of them was 26 MB read and serialized at once, as the endpoints' list
// was (a hostile-tenant probe's finding there). An event over 16 KB is listed with its data read
// on its own as it is written, and such a page item by item (no Content-Length).
test('events over 16 KB are listed whole, the page written item by item; the cursor and the small events as before', async (t) => {
  const { key } = await app.createOrg();
  const by = { on: app, key, t };
  t.is((await app.request('POST', OP_PATH, { key, body: { url: 'https://ops.example.com/a' } })).status, 201);
  const names = Array.from({ length: 300 }, (_, i) => `e${String(i).padStart(3, '0')}.${'x'.repeat(250)}`);
  for (const name of names) t.is((await app.request('POST', '/v1/event-types', { key, body: { name } })).status, 201);
  const application = await createApplication(by);
  const big = await createEndpoint(by, { application_id: application.id, url: 'https://hooks.example.com/big', event_types: names });
  const small = await createEndpoint(by, { application_id: application.id, url: 'https://hooks.example.com/small' });

  const all = await app.request('GET', EVENTS, { key });
  t.is(all.status, 200);
  t.is(all.headers.get('content-length'), null, 'written item by item');
  t.deepEqual(all.body.data.map((e: any) => [e.type, e.data.id]), [['endpoint.created', small.id], ['endpoint.created', big.id]]);
  t.deepEqual(all.body.data[1].data.event_types, names);
  t.true(JSON.stringify(all.body.data[1].data).length > 16_384);
  t.deepEqual(Object.keys(all.body.data[1]), ['id', 'type', 'created_at', 'data', 'deliveries']);
  t.is(all.body.data[1].deliveries.length, 1);
  t.is(all.body.next_cursor, null);

  const first = await app.request('GET', `${EVENTS}?limit=1`, { key });
  t.truthy(first.headers.get('content-length'), 'a page of small events is one body, as before');
  const second = await app.request('GET', `${EVENTS}?limit=1&cursor=${first.body.next_cursor}`, { key });
  t.is(second.headers.get('content-length'), null);
  t.deepEqual(second.body.data.map((e: any) => e.data.event_types.length), [300]);
  t.is(second.body.next_cursor, null);
});
