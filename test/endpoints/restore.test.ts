// POST /v1/endpoints/{id}/restore and GET /v1/endpoints?deleted=true (decisions 13/14): what a
// deleted endpoint keeps, what it subscribes to while deleted (nothing) and after (its names
// that exist then), and the refusals: not deleted, application deleted (409), too old (404).
import test from 'ava';
import { sql } from 'slonik';
import { assertError } from '../helpers/app.ts';
import {
  app, FULL_FIELDS, SUMMARY_FIELDS, ISO_MS, createApplication, createEndpoint, createEventType, disable, endpointsCount, getEndpoint,
  setup, subscriberCount,
} from './helpers.ts';

const restore = (key: string, id: string) => app.request('POST', `/v1/endpoints/${id}/restore`, { key });
const deletedList = (key: string, appId: string) => app.request('GET', `/v1/endpoints?application_id=${appId}&deleted=true`, { key });

test('restore: settings, secret and status come back; subscriptions to the names that exist now (a recreated name counts)', async (t) => {
  const { key, appId } = await setup(t);
  const one = await createEventType(t, key, 'order.one');
  const two = await createEventType(t, key, 'order.two');
  const threeOld = await createEventType(t, key, 'order.three');
  const ep = await createEndpoint(t, key, {
    application_id: appId, event_types: ['order.one', 'order.two', 'order.three'], headers: { 'X-Tenant': 'acme' }, rate_limit_rps: 7, timeout_ms: 5000,
  });
  t.is((await app.request('PATCH', `/v1/endpoints/${ep.id}`, { key, body: { status: 'paused' } })).status, 200);
  const before = (await getEndpoint(key, ep.id)).body;

  t.is((await app.request('DELETE', `/v1/endpoints/${ep.id}`, { key })).status, 200);
  // While deleted it subscribes to nothing: no count, and no 409 event_type_in_use.
  t.is(await subscriberCount(t, key, one), 0);
  t.is(await endpointsCount(t, key, appId), 0);
  t.is((await app.request('DELETE', `/v1/event-types/${two}`, { key })).status, 200, 'a deleted endpoint does not block the delete');
  t.is((await app.request('DELETE', `/v1/event-types/${threeOld}`, { key })).status, 200);
  // The deleted list names what a restore would subscribe to now.
  t.deepEqual((await deletedList(key, appId)).body.data.map((e: { event_types: string[] }) => e.event_types), [['order.one']]);
  const threeNew = await createEventType(t, key, 'order.three');
  t.deepEqual((await deletedList(key, appId)).body.data.map((e: { event_types: string[] }) => e.event_types), [['order.one', 'order.three']]);
  t.is((await getEndpoint(key, ep.id)).status, 404, 'a deleted endpoint is not found');

  const res = await restore(key, ep.id);
  t.is(res.status, 200, JSON.stringify(res.body));
  t.deepEqual(Object.keys(res.body).sort(), FULL_FIELDS);
  t.deepEqual(res.body.event_types, ['order.one', 'order.three'], 'order.two is gone; order.three was created again');
  for (const field of ['url', 'status', 'headers', 'rate_limit_rps', 'timeout_ms', 'secret', 'secret_version', 'failure_count', 'disabled_reason', 'created_at']) {
    t.deepEqual(res.body[field], before[field], field);
  }
  t.is(res.body.status, 'paused');
  t.deepEqual((await getEndpoint(key, ep.id)).body, res.body);
  t.is(await subscriberCount(t, key, one), 1);
  t.is(await subscriberCount(t, key, threeNew), 1);
  t.is(await endpointsCount(t, key, appId), 1);
  t.deepEqual((await deletedList(key, appId)).body.data, [], 'restored: no longer in the deleted list');

  // The endpoint works as before: it can be deleted and restored again.
  t.is((await app.request('DELETE', `/v1/endpoints/${ep.id}`, { key })).status, 200);
  t.deepEqual((await restore(key, ep.id)).body.event_types, ['order.one', 'order.three']);
});

test('a disabled endpoint comes back disabled, with its reason', async (t) => {
  const { key, appId } = await setup(t);
  const ep = await createEndpoint(t, key, { application_id: appId });
  await disable(ep.id);
  t.is((await app.request('DELETE', `/v1/endpoints/${ep.id}`, { key })).status, 200);
  const res = await restore(key, ep.id);
  t.is(res.status, 200);
  t.is(res.body.status, 'disabled');
  t.is(res.body.disabled_reason, 'circuit_breaker');
  t.regex(res.body.disabled_at, ISO_MS);
});

test('restore of an endpoint that is not deleted: 409 invalid_state; unknown, malformed or foreign: 404', async (t) => {
  const { key, appId } = await setup(t);
  const ep = await createEndpoint(t, key, { application_id: appId });
  assertError(t, await restore(key, ep.id), 409, 'invalid_state');
  assertError(t, await restore(key, 'ep_nope'), 404, 'not_found');
  assertError(t, await restore(key, 'ep_000000000000000000000000000'), 404, 'not_found');
  t.is((await app.request('DELETE', `/v1/endpoints/${ep.id}`, { key })).status, 200);
  const other = await setup(t);
  assertError(t, await restore(other.key, ep.id), 404, 'not_found');
  const testKey = (await app.createOrg({ environment: 'test' })).key;
  assertError(t, await restore(testKey, ep.id), 404, 'not_found');
  t.is((await restore(key, ep.id)).status, 200, 'the owner still can');
});

test('restore after the application was deleted: 409 invalid_state, and the endpoint stays deleted', async (t) => {
  const { key, appId } = await setup(t);
  const ep = await createEndpoint(t, key, { application_id: appId });
  t.is((await app.request('DELETE', `/v1/endpoints/${ep.id}`, { key })).status, 200);
  t.is((await app.request('DELETE', `/v1/applications/${appId}`, { key })).status, 200);
  assertError(t, await restore(key, ep.id), 409, 'invalid_state');
  // Also one deleted by the application's delete itself.
  const appId2 = await createApplication(t, key);
  const ep2 = await createEndpoint(t, key, { application_id: appId2 });
  t.is((await app.request('DELETE', `/v1/applications/${appId2}`, { key })).status, 200);
  assertError(t, await restore(key, ep2.id), 409, 'invalid_state');
  const live = await app.pool.oneFirst(sql.unsafe`select count(*)::int from endpoints where id in (${ep.id}, ${ep2.id}) and deleted_at is null`);
  t.is(live, 0);
});

test('deleted more than 30 days ago: not listed, not restorable (404); the deleted list shows deleted_at, newest deletion first', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'order.paid');
  const old = await createEndpoint(t, key, { application_id: appId });
  const recent = await createEndpoint(t, key, { application_id: appId, event_types: ['order.paid'] });
  const newest = await createEndpoint(t, key, { application_id: appId });
  const live = await createEndpoint(t, key, { application_id: appId });
  for (const ep of [old, recent, newest]) t.is((await app.request('DELETE', `/v1/endpoints/${ep.id}`, { key })).status, 200);
  await app.pool.query(sql.unsafe`update endpoints set deleted_at = now() - interval '30 days 1 minute' where id = ${old.id}`);
  await app.pool.query(sql.unsafe`update endpoints set deleted_at = now() - interval '29 days 23 hours' where id = ${recent.id}`);

  const list = await deletedList(key, appId);
  t.is(list.status, 200, JSON.stringify(list.body));
  t.deepEqual(list.body.data.map((e: { id: string }) => e.id), [newest.id, recent.id]);
  t.deepEqual(Object.keys(list.body.data[1]).sort(), [...SUMMARY_FIELDS, 'deleted_at'].sort());
  t.regex(list.body.data[1].deleted_at, ISO_MS);
  t.deepEqual(list.body.data[1].event_types, ['order.paid'], 'the names a restore would subscribe to');
  t.is(list.body.pagination.total, 2);
  t.false(list.body.data.some((e: { id: string }) => e.id === live.id));

  assertError(t, await restore(key, old.id), 404, 'not_found');
  t.is((await restore(key, recent.id)).status, 200, '29 days 23 hours: still restorable');
  assertError(t, await app.request('GET', `/v1/endpoints?application_id=${appId}&deleted=yes`, { key }), 400, 'validation_error');
});
