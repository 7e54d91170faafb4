// GET /v1/applications/{id} and by-uid, and PATCH.
import test from 'ava';
import { sql } from 'slonik';
import { assertError } from '../helpers/app.ts';
import { heavyReadWaitCount, holdHeavyTurn } from '../helpers/heavy-turn.ts';
import { until } from '../helpers/until.ts';
import {
  app, DETAIL_FIELDS, PATCH_FIELDS, ENDPOINT_ITEM_FIELDS, ISO_MS, OLD, createApp, createEndpoint, assertValidation,
  list,
} from './helpers.ts';

// ---------------------------------------------------------------------------------------------
// Retrieve and by-uid

test('retrieve returns the application and its live endpoints', async (t) => {
  const { key } = await app.createOrg();
  const created = await createApp(key, { name: 'With endpoints', uid: 'with-eps', metadata: { tier: 'gold' } });
  const empty = await app.request('GET', `/v1/applications/${created.id}`, { key });
  t.is(empty.status, 200);
  t.deepEqual(Object.keys(empty.body).sort(), DETAIL_FIELDS);
  t.deepEqual(empty.body, { ...created, endpoints: [] });

  const one = await createEndpoint(key, created.id, [], 'https://example.com/one');
  const two = await createEndpoint(key, created.id, [], 'https://example.org/two');
  const three = await createEndpoint(key, created.id, [], 'https://example.net/three');
  t.is((await app.request('DELETE', `/v1/endpoints/${two.id}`, { key })).status, 200);
  // An endpoint of another application does not show.
  const sibling = await createApp(key, { name: 'Sibling' });
  await createEndpoint(key, sibling.id);

  const res = await app.request('GET', `/v1/applications/${created.id}`, { key });
  t.is(res.status, 200);
  t.deepEqual(Object.keys(res.body).sort(), DETAIL_FIELDS);
  t.is(res.body.endpoints_count, 2);
  t.is(res.body.endpoints.length, 2);
  for (const ep of res.body.endpoints) t.deepEqual(Object.keys(ep).sort(), ENDPOINT_ITEM_FIELDS);
  const byId = Object.fromEntries(res.body.endpoints.map((ep: { id: string }) => [ep.id, ep]));
  t.deepEqual(Object.keys(byId).sort(), [one.id, three.id].sort());
  t.deepEqual(byId[one.id], { id: one.id, url: 'https://example.com/one', status: 'active', success_rate: 100 });
  t.deepEqual(byId[three.id], { id: three.id, url: 'https://example.net/three', status: 'active', success_rate: 100 });
  t.is(res.body.name, 'With endpoints');
  t.is(res.body.uid, 'with-eps');
  t.deepEqual(res.body.metadata, { tier: 'gold' });
  t.is(res.body.webhook_jobs_count, 0);
  t.is(res.body.success_rate, 100);
});

test('by-uid returns the same body as retrieve', async (t) => {
  const { key } = await app.createOrg();
  const created = await createApp(key, { name: 'By uid', uid: 'Cust_9-x', metadata: { a: 1 } });
  await createEndpoint(key, created.id);
  await createApp(key, { name: 'Other', uid: 'other' });
  const byId = await app.request('GET', `/v1/applications/${created.id}`, { key });
  const byUid = await app.request('GET', '/v1/applications/by-uid/Cust_9-x', { key });
  t.is(byUid.status, 200);
  t.deepEqual(Object.keys(byUid.body).sort(), DETAIL_FIELDS);
  t.deepEqual(byUid.body, byId.body);
  t.is(byUid.body.endpoints.length, 1);
});

test('by-uid is 404 for an unknown, malformed or deleted uid', async (t) => {
  const { key } = await app.createOrg();
  await createApp(key, { name: 'kept', uid: 'kept' });
  const gone = await createApp(key, { name: 'gone', uid: 'gone' });
  t.is((await app.request('DELETE', `/v1/applications/${gone.id}`, { key })).status, 200);
  for (const uid of ['unknown', 'KEPT', 'kep', 'gone', 'bad uid', 'a.b', 'u'.repeat(257), "x' or '1'='1", '%', 'kept%']) {
    const res = await app.request('GET', `/v1/applications/by-uid/${encodeURIComponent(uid)}`, { key });
    assertError(t, res, 404, 'not_found');
  }
  t.is((await app.request('GET', '/v1/applications/by-uid/kept', { key })).status, 200);
});

// ---------------------------------------------------------------------------------------------
// Patch

test('patch answers exactly { id, name, uid, metadata, updated_at }; name changes and metadata is replaced whole', async (t) => {
  const { key } = await app.createOrg();
  const created = await createApp(key, { name: 'Before', uid: 'keep-me', metadata: { a: 1, nested: { b: 2 } } });
  const res = await app.request('PATCH', `/v1/applications/${created.id}`, { key, body: { name: 'After', metadata: { c: 3 } } });
  t.is(res.status, 200);
  t.deepEqual(Object.keys(res.body).sort(), PATCH_FIELDS);
  t.is(res.body.id, created.id);
  t.is(res.body.name, 'After');
  t.is(res.body.uid, 'keep-me');
  t.deepEqual(res.body.metadata, { c: 3 });
  t.regex(res.body.updated_at, ISO_MS);

  const got = await app.request('GET', `/v1/applications/${created.id}`, { key });
  t.is(got.body.name, 'After');
  t.deepEqual(got.body.metadata, { c: 3 });
  t.is(got.body.updated_at, res.body.updated_at);
  t.is(got.body.created_at, created.created_at);

  const cleared = await app.request('PATCH', `/v1/applications/${created.id}`, { key, body: { metadata: {} } });
  t.deepEqual(cleared.body.metadata, {});
  t.is(cleared.body.name, 'After');
  t.deepEqual((await list(key)).body.data.map((a: { name: string }) => a.name), ['After']);
});

test('patch sets a new uid, and null clears it (by-uid then 404)', async (t) => {
  const { key } = await app.createOrg();
  const created = await createApp(key, { name: 'uid holder', uid: 'first-uid' });
  const renamed = await app.request('PATCH', `/v1/applications/${created.id}`, { key, body: { uid: 'second_uid' } });
  t.is(renamed.status, 200);
  t.is(renamed.body.uid, 'second_uid');
  assertError(t, await app.request('GET', '/v1/applications/by-uid/first-uid', { key }), 404, 'not_found');
  t.is((await app.request('GET', '/v1/applications/by-uid/second_uid', { key })).body.id, created.id);

  const cleared = await app.request('PATCH', `/v1/applications/${created.id}`, { key, body: { uid: null } });
  t.is(cleared.status, 200);
  t.is(cleared.body.uid, null);
  t.is(cleared.body.name, 'uid holder');
  assertError(t, await app.request('GET', '/v1/applications/by-uid/second_uid', { key }), 404, 'not_found');
  t.is((await app.request('GET', `/v1/applications/${created.id}`, { key })).body.uid, null);
  // The freed uid can be taken by another application.
  t.is((await app.request('POST', '/v1/applications', { key, body: { name: 'taker', uid: 'second_uid' } })).status, 201);
});

test('updated_at moves on a real change, not when an endpoint is added nor on an empty patch', async (t) => {
  const { key } = await app.createOrg();
  const created = await createApp(key, { name: 'Clock' });
  // Set the clock back, so any later move is visible whatever the timing.
  await app.pool.query(sql.unsafe`update applications set created_at = ${OLD}, updated_at = ${OLD} where id = ${created.id}`);
  t.is((await app.request('GET', `/v1/applications/${created.id}`, { key })).body.updated_at, OLD);

  await createEndpoint(key, created.id);
  const afterEndpoint = await app.request('GET', `/v1/applications/${created.id}`, { key });
  t.is(afterEndpoint.body.endpoints_count, 1);
  t.is(afterEndpoint.body.updated_at, OLD);

  const empty = await app.request('PATCH', `/v1/applications/${created.id}`, { key, body: {} });
  t.is(empty.status, 200);
  t.deepEqual(empty.body, { id: created.id, name: 'Clock', uid: null, metadata: {}, updated_at: OLD });

  const changed = await app.request('PATCH', `/v1/applications/${created.id}`, { key, body: { name: 'Clock 2' } });
  t.is(changed.status, 200);
  t.not(changed.body.updated_at, OLD);
  t.true(changed.body.updated_at > OLD);
  const got = await app.request('GET', `/v1/applications/${created.id}`, { key });
  t.is(got.body.updated_at, changed.body.updated_at);
  t.is(got.body.created_at, OLD);

  await app.pool.query(sql.unsafe`update applications set updated_at = ${OLD} where id = ${created.id}`);
  const meta = await app.request('PATCH', `/v1/applications/${created.id}`, { key, body: { metadata: { x: 1 } } });
  t.true(meta.body.updated_at > OLD);
  await app.pool.query(sql.unsafe`update applications set updated_at = ${OLD} where id = ${created.id}`);
  const uid = await app.request('PATCH', `/v1/applications/${created.id}`, { key, body: { uid: 'clock' } });
  t.true(uid.body.updated_at > OLD);
});

test('an empty patch body answers 200 with the unchanged application', async (t) => {
  const { key } = await app.createOrg();
  const created = await createApp(key, { name: 'Same', uid: 'same', metadata: { k: 'v' } });
  const res = await app.request('PATCH', `/v1/applications/${created.id}`, { key, body: {} });
  t.is(res.status, 200);
  t.deepEqual(res.body, { id: created.id, name: 'Same', uid: 'same', metadata: { k: 'v' }, updated_at: created.updated_at });
});

const invalidPatchBodies: Array<[string, unknown, string]> = [
  ['empty name', { name: '' }, 'name'],
  ['blank name', { name: '  ' }, 'name'],
  ['256-character name', { name: 'n'.repeat(256) }, 'name'],
  ['null name', { name: null }, 'name'],
  ['numeric name', { name: 7 }, 'name'],
  ['uid with a space', { uid: 'a b' }, 'uid'],
  ['uid with a dot', { uid: 'a.b' }, 'uid'],
  ['uid with a slash', { uid: 'a/b' }, 'uid'],
  ['257-character uid', { uid: 'u'.repeat(257) }, 'uid'],
  ['numeric uid', { uid: 5 }, 'uid'],
  ['array metadata', { metadata: [1] }, 'metadata'],
  ['string metadata', { metadata: 'x' }, 'metadata'],
  ['null metadata', { metadata: null }, 'metadata'],
  ['metadata over 16 KB', { metadata: { a: 'x'.repeat(16_377) } }, 'metadata'],
  ['unknown field', { name: 'ok', colour: 'red' }, 'colour'],
  ['id', { id: 'app_000000000000000000000000001' }, 'id'],
];

for (const [label, body, path] of invalidPatchBodies) {
  test(`patch refuses ${label} with a 400 naming ${path}, changing nothing`, async (t) => {
    const { key } = await app.createOrg();
    const created = await createApp(key, { name: 'Untouched', uid: 'untouched', metadata: { keep: true } });
    const res = await app.request('PATCH', `/v1/applications/${created.id}`, { key, body });
    assertValidation(t, res, path);
    const got = await app.request('GET', `/v1/applications/${created.id}`, { key });
    t.deepEqual(got.body, { ...created, endpoints: [] });
  });
}

test('patch to a uid another application holds is a 409 conflict and changes nothing; its own uid is fine', async (t) => {
  const { key } = await app.createOrg();
  const a = await createApp(key, { name: 'A', uid: 'uid-a' });
  const b = await createApp(key, { name: 'B', uid: 'uid-b' });
  const res = await app.request('PATCH', `/v1/applications/${b.id}`, { key, body: { name: 'B2', uid: 'uid-a' } });
  assertError(t, res, 409, 'conflict');
  const got = await app.request('GET', `/v1/applications/${b.id}`, { key });
  t.is(got.body.uid, 'uid-b');
  t.is(got.body.name, 'B');
  t.is((await app.request('GET', '/v1/applications/by-uid/uid-a', { key })).body.id, a.id);
  const own = await app.request('PATCH', `/v1/applications/${a.id}`, { key, body: { uid: 'uid-a', name: 'A2' } });
  t.is(own.status, 200);
  t.is(own.body.uid, 'uid-a');
  t.is(own.body.name, 'A2');
});

// A hostile-tenant probe: an application of 1,000 endpoints with 2,048-character URLs is a 2.1 MB
// retrieve of 120-190 ms, and 25 of them a second held another tenant's simple reads for seconds.
// Past 100 endpoints a retrieve takes its organization's turn for heavy reads.
test.serial('a retrieve of an application of more than 100 endpoints waits for its organization\'s heavy turn; one of 100 does not', async (t) => {
  const { key } = await app.createOrg();
  const [large, small] = [await createApp(key, { name: 'Large', uid: 'large' }), await createApp(key, { name: 'Small' })];
  for (let i = 0; i < 101; i += 1) await createEndpoint(key, large.id, [], `https://example.com/${i}`);
  for (let i = 0; i < 100; i += 1) await createEndpoint(key, small.id, [], `https://example.com/${i}`);
  // The organization's turn held by an event type search.
  const turn = await holdHeavyTurn(t, app, key);
  let answered = false;
  const retrieve = app.request('GET', `/v1/applications/${large.id}`, { key }).finally(() => { answered = true; });
  const byUid = app.request('GET', '/v1/applications/by-uid/large', { key });
  await until('both wait for the organization\'s turn', async () => (await heavyReadWaitCount(app)) >= turn.waitsBefore + 2);
  t.false(answered);
  const other = await app.request('GET', `/v1/applications/${small.id}`, { key });
  t.is(other.body.endpoints.length, 100);
  await turn.release();
  t.is((await turn.search).status, 200);
  for (const res of [await retrieve, await byUid]) {
    t.is(res.status, 200);
    t.is(res.body.id, large.id);
    t.is(res.body.endpoints_count, 101);
    t.is(res.body.endpoints.length, 101);
  }
});
