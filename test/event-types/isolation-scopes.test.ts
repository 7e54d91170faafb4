// Event types of one tenant are invisible to another; what each scope allows.
import test from 'ava';
import { assertError } from '../helpers/app.ts';
import {
  app, paths, assertDetail, createEventType, createApplication, createEndpoint, subscribe, testKeyOf, eventTypeCount,
  subscriberCount, ids,
} from './helpers.ts';

// ---------------------------------------------------------------------------------------
// isolation

test('another organization\'s event type is a 404 in every operation, absent from lists, and untouched', async (t) => {
  const mine = await app.createOrg();
  const theirs = await app.createOrg();
  const own = await createEventType(mine.key, { name: 'invoice.created' });
  const foreign = await createEventType(theirs.key, { name: 'invoice.paid', description: 'theirs' });
  const url = `/v1/event-types/${foreign.id}`;
  assertError(t, await app.request('GET', url, { key: mine.key }), 404, 'not_found');
  assertError(t, await app.request('PATCH', url, { key: mine.key, body: { description: 'pwned' } }), 404, 'not_found');
  assertError(t, await app.request('PATCH', url, { key: mine.key, body: { schema: null } }), 404, 'not_found');
  assertError(t, await app.request('DELETE', url, { key: mine.key }), 404, 'not_found');
  assertError(t, await app.request('DELETE', `${url}?force=true`, { key: mine.key }), 404, 'not_found');
  t.deepEqual(ids(await app.request('GET', '/v1/event-types', { key: mine.key })), [own.id]);
  t.deepEqual(ids(await app.request('GET', '/v1/event-types?search=paid', { key: mine.key })), []);
  const still = await app.request('GET', url, { key: theirs.key });
  t.deepEqual(still.body, foreign);
});

test('the test environment does not see live event types, nor the other way round', async (t) => {
  const { key } = await app.createOrg();
  const testKey = await testKeyOf(key);
  const live = await createEventType(key, { name: 'invoice.paid' });
  const sandbox = await createEventType(testKey, { name: 'invoice.created' });
  t.deepEqual(ids(await app.request('GET', '/v1/event-types', { key: testKey })), [sandbox.id]);
  t.deepEqual(ids(await app.request('GET', '/v1/event-types', { key })), [live.id]);
  for (const [k, id] of [[testKey, live.id], [key, sandbox.id]] as const) {
    assertError(t, await app.request('GET', `/v1/event-types/${id}`, { key: k }), 404, 'not_found');
    assertError(t, await app.request('PATCH', `/v1/event-types/${id}`, { key: k, body: { description: 'x' } }), 404, 'not_found');
    assertError(t, await app.request('DELETE', `/v1/event-types/${id}?force=true`, { key: k }), 404, 'not_found');
  }
  t.is((await app.request('GET', `/v1/event-types/${live.id}`, { key })).body.description, null);
  t.is((await app.request('GET', `/v1/event-types/${sandbox.id}`, { key: testKey })).body.description, null);
});

test('an endpoint cannot subscribe to another organization\'s or environment\'s event type name', async (t) => {
  const mine = await app.createOrg();
  const theirs = await app.createOrg();
  const foreign = await createEventType(theirs.key, { name: 'invoice.paid' });
  await createEventType(mine.key, { name: 'invoice.created' });
  const testKey = await testKeyOf(mine.key);
  const sandbox = await createEventType(testKey, { name: 'order.shipped' });
  const applicationId = await createApplication(mine.key);

  const crossOrg = await createEndpoint(mine.key, applicationId, ['invoice.created', 'invoice.paid']);
  assertDetail(t, crossOrg, 'event_types.1');
  t.true(crossOrg.body.error.message.includes('invoice.paid'), crossOrg.body.error.message);
  t.false(crossOrg.body.error.message.includes('invoice.created'), crossOrg.body.error.message);

  const crossEnv = await createEndpoint(mine.key, applicationId, ['order.shipped']);
  assertDetail(t, crossEnv, 'event_types.0');
  t.true(crossEnv.body.error.message.includes('order.shipped'), crossEnv.body.error.message);

  const endpointId = await subscribe(mine.key, applicationId, ['invoice.created']);
  const patched = await app.request('PATCH', `/v1/endpoints/${endpointId}`, { key: mine.key, body: { event_types: ['invoice.paid', 'order.shipped'] } });
  assertError(t, patched, 400, 'validation_error');
  t.deepEqual(paths(patched).sort(), ['event_types.0', 'event_types.1']);
  t.true(patched.body.error.message.includes('invoice.paid') && patched.body.error.message.includes('order.shipped'));

  const testApp = await createApplication(testKey);
  const fromTest = await createEndpoint(testKey, testApp, ['invoice.created']);
  assertDetail(t, fromTest, 'event_types.0');

  t.is(await subscriberCount(theirs.key, foreign.id), 0);
  t.is(await subscriberCount(testKey, sandbox.id), 0);
  t.deepEqual((await app.request('GET', `/v1/endpoints/${endpointId}`, { key: mine.key })).body.event_types, ['invoice.created']);
});

test('malformed ids in the path are 404, never 400 or 500', async (t) => {
  const { key } = await app.createOrg();
  await createEventType(key, { name: 'invoice.paid' });
  const malformed = ['nope', 'evt_short', `app_${'A'.repeat(27)}`, `evt_${'!'.repeat(27)}`, `evt_${'A'.repeat(28)}`, "evt_' or 1=1 --", 'invoice.paid'];
  for (const id of malformed) {
    const path = `/v1/event-types/${encodeURIComponent(id)}`;
    assertError(t, await app.request('GET', path, { key }), 404, 'not_found');
    assertError(t, await app.request('PATCH', path, { key, body: { description: 'x' } }), 404, 'not_found');
    assertError(t, await app.request('DELETE', path, { key }), 404, 'not_found');
    assertError(t, await app.request('DELETE', `${path}?force=true`, { key }), 404, 'not_found');
  }
  // A well-formed id that exists nowhere is a 404 too.
  const unknown = `/v1/event-types/evt_${'A'.repeat(27)}`;
  assertError(t, await app.request('GET', unknown, { key }), 404, 'not_found');
  assertError(t, await app.request('PATCH', unknown, { key, body: { description: 'x' } }), 404, 'not_found');
  assertError(t, await app.request('DELETE', unknown, { key }), 404, 'not_found');
});

// ---------------------------------------------------------------------------------------
// scopes

test('event-types:read can list and retrieve; POST, PATCH and DELETE are 403 forbidden and change nothing', async (t) => {
  const { key, orgId } = await app.createOrg();
  const eventType = await createEventType(key, { name: 'invoice.paid', description: 'keep' });
  const reader = await app.request('POST', '/v1/api-keys', { key, body: { name: 'reader', scopes: ['event-types:read'] } });
  t.is(reader.status, 201);
  const readKey = reader.body.key;
  const url = `/v1/event-types/${eventType.id}`;

  const list = await app.request('GET', '/v1/event-types', { key: readKey });
  t.is(list.status, 200);
  t.deepEqual(ids(list), [eventType.id]);
  const one = await app.request('GET', url, { key: readKey });
  t.is(one.status, 200);
  t.deepEqual(one.body, eventType);

  assertError(t, await app.request('POST', '/v1/event-types', { key: readKey, body: { name: 'invoice.created' } }), 403, 'forbidden');
  assertError(t, await app.request('PATCH', url, { key: readKey, body: { description: 'changed' } }), 403, 'forbidden');
  assertError(t, await app.request('DELETE', url, { key: readKey }), 403, 'forbidden');
  assertError(t, await app.request('DELETE', `${url}?force=true`, { key: readKey }), 403, 'forbidden');
  t.is(await eventTypeCount(orgId), 1);
  t.deepEqual((await app.request('GET', url, { key })).body, eventType);
});

test('event-types:write can do everything; other families\' scopes cannot read event types', async (t) => {
  const { key } = await app.createOrg();
  const writer = await app.request('POST', '/v1/api-keys', { key, body: { name: 'writer', scopes: ['event-types:write'] } });
  const other = await app.request('POST', '/v1/api-keys', { key, body: { name: 'other', scopes: ['endpoints:write', 'api-keys:read'] } });
  const writeKey = writer.body.key;
  const created = await app.request('POST', '/v1/event-types', { key: writeKey, body: { name: 'invoice.paid' } });
  t.is(created.status, 201);
  t.is((await app.request('GET', '/v1/event-types', { key: writeKey })).status, 200);
  t.is((await app.request('GET', `/v1/event-types/${created.body.id}`, { key: writeKey })).status, 200);
  t.is((await app.request('PATCH', `/v1/event-types/${created.body.id}`, { key: writeKey, body: { description: 'x' } })).status, 200);
  assertError(t, await app.request('GET', '/v1/event-types', { key: other.body.key }), 403, 'forbidden');
  assertError(t, await app.request('GET', `/v1/event-types/${created.body.id}`, { key: other.body.key }), 403, 'forbidden');
  t.is((await app.request('DELETE', `/v1/event-types/${created.body.id}`, { key: writeKey })).status, 200);
  assertError(t, await app.request('GET', '/v1/event-types', {}), 401, 'unauthorized');
});
