// POST /v1/applications: shapes, validation, uid uniqueness, environments.
import test from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { assertError } from '../helpers/app.ts';
import { app, APP_FIELDS, ISO_MS, APP_ID, createApp, createKey, countApps, assertValidation } from './helpers.ts';

// ---------------------------------------------------------------------------------------------
// Create

test('create answers 201 with exactly the application fields, counts 0 and success_rate 100', async (t) => {
  const { key, orgId } = await app.createOrg();
  const res = await app.request('POST', '/v1/applications', { key, body: { name: 'Acme Corp' } });
  t.is(res.status, 201);
  t.deepEqual(Object.keys(res.body).sort(), APP_FIELDS);
  t.regex(res.body.id, APP_ID);
  t.is(res.body.id.length, 4 + 27);
  t.is(res.body.name, 'Acme Corp');
  t.is(res.body.uid, null);
  t.deepEqual(res.body.metadata, {});
  t.is(res.body.endpoints_count, 0);
  t.is(res.body.webhook_jobs_count, 0);
  t.is(res.body.success_rate, 100);
  t.regex(res.body.created_at, ISO_MS);
  t.regex(res.body.updated_at, ISO_MS);

  const row = await app.pool.one(sql.type(z.object({ org_id: z.string(), environment: z.string(), deleted_at: z.string().nullable() }))`
    select org_id, environment, deleted_at from applications where id = ${res.body.id}`);
  t.deepEqual(row, { org_id: orgId, environment: 'live', deleted_at: null });
});

test('create keeps uid and metadata as given; a retrieve returns the same values', async (t) => {
  const { key } = await app.createOrg();
  const metadata = { plan: 'pro', seats: 12, nested: { tags: ['a', 'b'], flag: true, none: null } };
  const res = await app.request('POST', '/v1/applications', { key, body: { name: 'Globex', uid: 'Cust_42-b', metadata } });
  t.is(res.status, 201);
  t.is(res.body.uid, 'Cust_42-b');
  t.deepEqual(res.body.metadata, metadata);
  const got = await app.request('GET', `/v1/applications/${res.body.id}`, { key });
  t.is(got.status, 200);
  t.is(got.body.uid, 'Cust_42-b');
  t.deepEqual(got.body.metadata, metadata);
  t.is(got.body.created_at, res.body.created_at);
});

test('create accepts the limits: 255-character name, 256-character uid, metadata of exactly 16 KB', async (t) => {
  const { key, orgId } = await app.createOrg();
  const name = 'n'.repeat(255);
  const uid = 'u'.repeat(256);
  // {"a":"<16376 characters>"} is 8 + 16376 = 16384 bytes.
  const metadata = { a: 'x'.repeat(16_376) };
  t.is(Buffer.byteLength(JSON.stringify(metadata)), 16 * 1024);
  const res = await app.request('POST', '/v1/applications', { key, body: { name, uid, metadata } });
  t.is(res.status, 201, JSON.stringify(res.body).slice(0, 300));
  t.is(res.body.name, name);
  t.is(res.body.uid, uid);
  t.deepEqual(res.body.metadata, metadata);
  t.is(await countApps(orgId), 1);
});

test('create accepts uids of letters, digits, underscores and dashes, and an explicit null uid', async (t) => {
  const { key } = await app.createOrg();
  for (const uid of ['a', 'ABC', '123', 'with_underscore', 'with-dash', '_-_', 'Mixed_09-z']) {
    const res = await app.request('POST', '/v1/applications', { key, body: { name: uid, uid } });
    t.is(res.status, 201, `${uid}: ${JSON.stringify(res.body)}`);
    t.is(res.body.uid, uid);
  }
  const nullUid = await app.request('POST', '/v1/applications', { key, body: { name: 'no uid', uid: null } });
  t.is(nullUid.status, 201);
  t.is(nullUid.body.uid, null);
});

test('several applications without a uid can coexist', async (t) => {
  const { key, orgId } = await app.createOrg();
  await createApp(key, { name: 'one' });
  await createApp(key, { name: 'two' });
  await createApp(key, { name: 'three', uid: null });
  t.is(await countApps(orgId), 3);
});

const invalidCreateBodies: Array<[string, unknown, string]> = [
  ['missing name', {}, 'name'],
  ['empty name', { name: '' }, 'name'],
  ['blank name', { name: '   ' }, 'name'],
  ['256-character name', { name: 'n'.repeat(256) }, 'name'],
  ['numeric name', { name: 42 }, 'name'],
  ['null name', { name: null }, 'name'],
  ['array name', { name: ['a'] }, 'name'],
  ['numeric uid', { name: 'x', uid: 42 }, 'uid'],
  ['boolean uid', { name: 'x', uid: true }, 'uid'],
  ['empty uid', { name: 'x', uid: '' }, 'uid'],
  ['uid with a space', { name: 'x', uid: 'cust 1' }, 'uid'],
  ['uid with a dot', { name: 'x', uid: 'cust.1' }, 'uid'],
  ['uid with a slash', { name: 'x', uid: 'cust/1' }, 'uid'],
  ['uid with a non-ASCII letter', { name: 'x', uid: 'café' }, 'uid'],
  ['257-character uid', { name: 'x', uid: 'u'.repeat(257) }, 'uid'],
  ['array metadata', { name: 'x', metadata: ['a'] }, 'metadata'],
  ['string metadata', { name: 'x', metadata: 'plan=pro' }, 'metadata'],
  ['numeric metadata', { name: 'x', metadata: 5 }, 'metadata'],
  ['null metadata', { name: 'x', metadata: null }, 'metadata'],
  ['metadata one byte over 16 KB', { name: 'x', metadata: { a: 'x'.repeat(16_377) } }, 'metadata'],
  ['unknown field', { name: 'x', colour: 'red' }, 'colour'],
  ['id chosen by the caller', { name: 'x', id: 'app_000000000000000000000000001' }, 'id'],
  ['counts set by the caller', { name: 'x', endpoints_count: 3 }, 'endpoints_count'],
];

for (const [label, body, path] of invalidCreateBodies) {
  test(`create refuses ${label} with a 400 naming ${path}, creating nothing`, async (t) => {
    const { key, orgId } = await app.createOrg();
    const res = await app.request('POST', '/v1/applications', { key, body });
    assertValidation(t, res, path);
    t.is(await countApps(orgId), 0);
  });
}

test('create refuses malformed JSON and a non-object body with a 400, creating nothing', async (t) => {
  const { key, orgId } = await app.createOrg();
  const malformed = await app.request('POST', '/v1/applications', {
    key, rawBody: '{"name": "x",', headers: { 'content-type': 'application/json' },
  });
  assertError(t, malformed, 400, 'validation_error');
  assertError(t, await app.request('POST', '/v1/applications', { key, body: ['name'] }), 400, 'validation_error');
  assertError(t, await app.request('POST', '/v1/applications', { key, body: 'Acme' }), 400, 'validation_error');
  t.is(await countApps(orgId), 0);
});

// ---------------------------------------------------------------------------------------------
// uid uniqueness

test('a duplicate uid in the same organization and environment is a 409 conflict, creating nothing', async (t) => {
  const { key, orgId } = await app.createOrg();
  const first = await createApp(key, { name: 'first', uid: 'cust-1' });
  const res = await app.request('POST', '/v1/applications', { key, body: { name: 'second', uid: 'cust-1' } });
  assertError(t, res, 409, 'conflict');
  t.is(await countApps(orgId), 1);
  const byUid = await app.request('GET', '/v1/applications/by-uid/cust-1', { key });
  t.is(byUid.body.id, first.id);
  t.is(byUid.body.name, 'first');
});

test('the same uid is free in another organization and in the other environment of the same organization', async (t) => {
  const mine = await app.createOrg();
  const theirs = await app.createOrg();
  const live = await createApp(mine.key, { name: 'live', uid: 'shared-uid' });
  const other = await app.request('POST', '/v1/applications', { key: theirs.key, body: { name: 'theirs', uid: 'shared-uid' } });
  t.is(other.status, 201);
  const testKey = await createKey(mine.key, { environment: 'test' });
  const sandbox = await app.request('POST', '/v1/applications', { key: testKey, body: { name: 'sandbox', uid: 'shared-uid' } });
  t.is(sandbox.status, 201);
  t.is(await countApps(mine.orgId), 2);
  t.is(await countApps(mine.orgId, sql.fragment`environment = 'test'`), 1);
  // Each environment's by-uid finds its own application.
  t.is((await app.request('GET', '/v1/applications/by-uid/shared-uid', { key: mine.key })).body.id, live.id);
  t.is((await app.request('GET', '/v1/applications/by-uid/shared-uid', { key: testKey })).body.id, sandbox.body.id);
  t.is((await app.request('GET', '/v1/applications/by-uid/shared-uid', { key: theirs.key })).body.id, other.body.id);
  // And a second one in the test environment is still a conflict there.
  assertError(t, await app.request('POST', '/v1/applications', { key: testKey, body: { name: 'again', uid: 'shared-uid' } }), 409, 'conflict');
});

test('a deleted application\'s uid is free again', async (t) => {
  const { key, orgId } = await app.createOrg();
  const old = await createApp(key, { name: 'old', uid: 'recycled' });
  t.is((await app.request('DELETE', `/v1/applications/${old.id}`, { key })).status, 200);
  const again = await app.request('POST', '/v1/applications', { key, body: { name: 'new', uid: 'recycled' } });
  t.is(again.status, 201);
  t.not(again.body.id, old.id);
  t.is(await countApps(orgId), 2);
  const byUid = await app.request('GET', '/v1/applications/by-uid/recycled', { key });
  t.is(byUid.status, 200);
  t.is(byUid.body.id, again.body.id);
});
