// Soft delete with its cascade; isolation between tenants; what each scope allows.
import test from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { assertError } from '../helpers/app.ts';
import { app, ISO_MS, createApp, createEndpoint, createKey, countApps, ids, list } from './helpers.ts';

// ---------------------------------------------------------------------------------------------
// Delete

test('delete answers { id, deleted, deleted_at }; the application is then gone everywhere', async (t) => {
  const { key, orgId } = await app.createOrg();
  const kept = await createApp(key, { name: 'kept' });
  const doomed = await createApp(key, { name: 'doomed', uid: 'doomed' });
  const res = await app.request('DELETE', `/v1/applications/${doomed.id}`, { key });
  t.is(res.status, 200);
  t.deepEqual(Object.keys(res.body).sort(), ['deleted', 'deleted_at', 'id']);
  t.is(res.body.id, doomed.id);
  t.is(res.body.deleted, true);
  t.regex(res.body.deleted_at, ISO_MS);

  const path = `/v1/applications/${doomed.id}`;
  assertError(t, await app.request('GET', path, { key }), 404, 'not_found');
  assertError(t, await app.request('PATCH', path, { key, body: { name: 'revived' } }), 404, 'not_found');
  assertError(t, await app.request('DELETE', path, { key }), 404, 'not_found');
  assertError(t, await app.request('GET', '/v1/applications/by-uid/doomed', { key }), 404, 'not_found');
  const after = await list(key);
  t.deepEqual(ids(after), [kept.id]);
  t.is(after.body.pagination.total, 1);
  t.deepEqual(ids(await list(key, '?search=doomed')), []);

  // Soft: the row stays, marked deleted, and the failed patch did not touch it.
  const row = await app.pool.one(sql.type(z.object({ name: z.string(), deleted_at: z.string().nullable() }))`
    select name, deleted_at from applications where id = ${doomed.id}`);
  t.is(row.name, 'doomed');
  t.is(row.deleted_at, res.body.deleted_at);
  t.is(await countApps(orgId, sql.fragment`deleted_at is null`), 1);
});

test('delete soft-deletes the application\'s endpoints and removes their subscriptions', async (t) => {
  const { key } = await app.createOrg();
  const eventType = await app.request('POST', '/v1/event-types', { key, body: { name: 'order.created' } });
  t.is(eventType.status, 201);
  const doomed = await createApp(key, { name: 'doomed' });
  const sibling = await createApp(key, { name: 'sibling' });
  const ep1 = await createEndpoint(key, doomed.id, ['order.created']);
  const ep2 = await createEndpoint(key, doomed.id, []);
  const survivor = await createEndpoint(key, sibling.id, ['order.created']);
  const subscribers = async () => (await app.request('GET', `/v1/event-types/${eventType.body.id}`, { key })).body.subscriber_count;
  t.is(await subscribers(), 2);

  t.is((await app.request('DELETE', `/v1/applications/${doomed.id}`, { key })).status, 200);

  assertError(t, await app.request('GET', `/v1/endpoints/${ep1.id}`, { key }), 404, 'not_found');
  assertError(t, await app.request('GET', `/v1/endpoints/${ep2.id}`, { key }), 404, 'not_found');
  t.is((await app.request('GET', `/v1/endpoints/${survivor.id}`, { key })).status, 200);
  const rows = await app.pool.any(sql.type(z.object({ id: z.string(), deleted: z.boolean() }))`
    select id, deleted_at is not null as deleted from endpoints where id in (${ep1.id}, ${ep2.id}, ${survivor.id}) order by id`);
  t.deepEqual(
    Object.fromEntries(rows.map((r) => [r.id, r.deleted])),
    { [ep1.id]: true, [ep2.id]: true, [survivor.id]: false },
  );
  t.is(await subscribers(), 1);

  // The sibling's endpoint is the only subscriber left; once it goes too, the count is 0.
  t.is((await app.request('DELETE', `/v1/applications/${sibling.id}`, { key })).status, 200);
  t.is(await subscribers(), 0);
  const subscriptions = await app.pool.oneFirst(sql.type(z.object({ count: z.number() }))`
    select count(*)::int as count from endpoint_event_types where event_type_id = ${eventType.body.id}`);
  t.is(subscriptions, 0);
});

// ---------------------------------------------------------------------------------------------
// Isolation

test('another organization\'s application is a 404 in every operation and absent from lists; it stays untouched', async (t) => {
  const mine = await app.createOrg();
  const theirs = await app.createOrg();
  const own = await createApp(mine.key, { name: 'mine' });
  const foreign = await createApp(theirs.key, { name: 'theirs', uid: 'their-uid', metadata: { owner: 'them' } });
  const path = `/v1/applications/${foreign.id}`;
  assertError(t, await app.request('GET', path, { key: mine.key }), 404, 'not_found');
  assertError(t, await app.request('PATCH', path, { key: mine.key, body: { name: 'pwned', uid: null } }), 404, 'not_found');
  assertError(t, await app.request('DELETE', path, { key: mine.key }), 404, 'not_found');
  assertError(t, await app.request('GET', '/v1/applications/by-uid/their-uid', { key: mine.key }), 404, 'not_found');
  const mineList = await list(mine.key);
  t.deepEqual(ids(mineList), [own.id]);
  t.is(mineList.body.pagination.total, 1);
  t.deepEqual(ids(await list(mine.key, '?search=theirs')), []);

  const still = await app.request('GET', path, { key: theirs.key });
  t.is(still.status, 200);
  t.deepEqual(still.body, { ...foreign, endpoints: [] });
  t.deepEqual(ids(await list(theirs.key)), [foreign.id]);
});

test('environments are separate: a test key does not see live applications, and a live key does not see test ones', async (t) => {
  const { key: liveKey, orgId } = await app.createOrg();
  const testKey = await createKey(liveKey, { environment: 'test' });
  const live = await createApp(liveKey, { name: 'live app', uid: 'live-uid' });
  const sandbox = await createApp(testKey, { name: 'test app', uid: 'test-uid' });
  const envOf = await app.pool.oneFirst(sql.type(z.object({ environment: z.string() }))`
    select environment from applications where id = ${sandbox.id}`);
  t.is(envOf, 'test');
  t.is(await countApps(orgId), 2);

  const cases: Array<[string, string, string]> = [[testKey, live.id, 'live-uid'], [liveKey, sandbox.id, 'test-uid']];
  for (const [key, id, uid] of cases) {
    assertError(t, await app.request('GET', `/v1/applications/${id}`, { key }), 404, 'not_found');
    assertError(t, await app.request('PATCH', `/v1/applications/${id}`, { key, body: { name: 'crossed' } }), 404, 'not_found');
    assertError(t, await app.request('DELETE', `/v1/applications/${id}`, { key }), 404, 'not_found');
    assertError(t, await app.request('GET', `/v1/applications/by-uid/${uid}`, { key }), 404, 'not_found');
  }
  const liveList = await list(liveKey);
  t.deepEqual(ids(liveList), [live.id]);
  t.is(liveList.body.pagination.total, 1);
  const testList = await list(testKey);
  t.deepEqual(ids(testList), [sandbox.id]);
  t.is(testList.body.pagination.total, 1);
  t.deepEqual(ids(await list(testKey, '?search=live')), []);

  t.is((await app.request('GET', `/v1/applications/${live.id}`, { key: liveKey })).body.name, 'live app');
  t.is((await app.request('GET', `/v1/applications/${sandbox.id}`, { key: testKey })).body.name, 'test app');
});

test('a test key\'s list is empty when only live applications exist', async (t) => {
  const { key: liveKey } = await app.createOrg();
  await createApp(liveKey);
  const testKey = await createKey(liveKey, { environment: 'test' });
  const res = await list(testKey);
  t.deepEqual(res.body, { data: [], pagination: { total: 0, page: 1, per_page: 25, total_pages: 0 } });
});

test('malformed and unknown ids are 404 in every operation, never 400 or 500', async (t) => {
  const { key, orgId } = await app.createOrg();
  await createApp(key);
  const endpointLike = `ep_${'A'.repeat(27)}`;
  const unknownApp = `app_${'Z'.repeat(27)}`;
  for (const id of ['nope', endpointLike, unknownApp, 'app_short', `app_${'!'.repeat(27)}`, `app_${'A'.repeat(28)}`, "app_' or 1=1 --", "1; drop table applications"]) {
    const path = `/v1/applications/${encodeURIComponent(id)}`;
    assertError(t, await app.request('GET', path, { key }), 404, 'not_found');
    assertError(t, await app.request('PATCH', path, { key, body: { name: 'x' } }), 404, 'not_found');
    assertError(t, await app.request('DELETE', path, { key }), 404, 'not_found');
  }
  t.is(await countApps(orgId, sql.fragment`deleted_at is null and name = 'Acme'`), 1);
});

test('a real endpoint id in the application path is a 404', async (t) => {
  const { key } = await app.createOrg();
  const a = await createApp(key);
  const ep = await createEndpoint(key, a.id);
  const path = `/v1/applications/${ep.id}`;
  assertError(t, await app.request('GET', path, { key }), 404, 'not_found');
  assertError(t, await app.request('PATCH', path, { key, body: { name: 'x' } }), 404, 'not_found');
  assertError(t, await app.request('DELETE', path, { key }), 404, 'not_found');
  t.is((await app.request('GET', `/v1/endpoints/${ep.id}`, { key })).status, 200);
});

// ---------------------------------------------------------------------------------------------
// Scopes

test('applications:read can list and retrieve but gets 403 on create, patch and delete', async (t) => {
  const { key: root, orgId } = await app.createOrg();
  const created = await createApp(root, { name: 'Readable', uid: 'readable' });
  const reader = await createKey(root, { scopes: ['applications:read'] });

  const listed = await list(reader);
  t.is(listed.status, 200);
  t.deepEqual(ids(listed), [created.id]);
  const got = await app.request('GET', `/v1/applications/${created.id}`, { key: reader });
  t.is(got.status, 200);
  t.is(got.body.id, created.id);
  t.is((await app.request('GET', '/v1/applications/by-uid/readable', { key: reader })).status, 200);

  assertError(t, await app.request('POST', '/v1/applications', { key: reader, body: { name: 'nope' } }), 403, 'forbidden');
  assertError(t, await app.request('PATCH', `/v1/applications/${created.id}`, { key: reader, body: { name: 'nope' } }), 403, 'forbidden');
  assertError(t, await app.request('DELETE', `/v1/applications/${created.id}`, { key: reader }), 403, 'forbidden');

  t.is(await countApps(orgId), 1);
  const after = await app.request('GET', `/v1/applications/${created.id}`, { key: root });
  t.deepEqual(after.body, { ...created, endpoints: [] });
});

test('applications:write can also read', async (t) => {
  const { key: root } = await app.createOrg();
  const writer = await createKey(root, { scopes: ['applications:write'] });
  const created = await app.request('POST', '/v1/applications', { key: writer, body: { name: 'w' } });
  t.is(created.status, 201);
  t.is((await list(writer)).status, 200);
  t.is((await app.request('GET', `/v1/applications/${created.body.id}`, { key: writer })).status, 200);
});

test('endpoints:write alone gets 403 on every applications operation', async (t) => {
  const { key: root, orgId } = await app.createOrg();
  const created = await createApp(root, { name: 'Hidden', uid: 'hidden' });
  const other = await createKey(root, { scopes: ['endpoints:write'] });
  assertError(t, await list(other), 403, 'forbidden');
  assertError(t, await app.request('GET', `/v1/applications/${created.id}`, { key: other }), 403, 'forbidden');
  assertError(t, await app.request('GET', '/v1/applications/by-uid/hidden', { key: other }), 403, 'forbidden');
  assertError(t, await app.request('POST', '/v1/applications', { key: other, body: { name: 'x' } }), 403, 'forbidden');
  assertError(t, await app.request('PATCH', `/v1/applications/${created.id}`, { key: other, body: { name: 'x' } }), 403, 'forbidden');
  assertError(t, await app.request('DELETE', `/v1/applications/${created.id}`, { key: other }), 403, 'forbidden');
  t.is(await countApps(orgId, sql.fragment`deleted_at is null and name = 'Hidden'`), 1);
});

test('requests without a valid key are 401', async (t) => {
  assertError(t, await app.request('GET', '/v1/applications'), 401, 'unauthorized');
  assertError(t, await app.request('POST', '/v1/applications', { body: { name: 'x' } }), 401, 'unauthorized');
  assertError(t, await app.request('GET', '/v1/applications', { key: `sk_live_${'a'.repeat(32)}` }), 401, 'unauthorized');
});
