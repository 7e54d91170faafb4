// /v1/api-keys over HTTP: shapes, validation, cursor pagination, environments, isolation.
import { createHash } from 'node:crypto';
import test from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { deleteApiKey, updateApiKey } from '../src/db/api-keys.ts';
import { assertError, startTestApp } from './helpers/app.ts';

const app = startTestApp();

const KEY_FIELDS = ['created_at', 'environment', 'expires_at', 'id', 'last_used_at', 'name', 'org_id', 'prefix', 'scopes'];
const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

test('create returns the key once, with every field, and stores only its hash', async (t) => {
  const { key, orgId } = await app.createOrg();
  const res = await app.request('POST', '/v1/api-keys', { key, body: { name: 'CI deploys', scopes: ['webhooks:write'] } });
  t.is(res.status, 201);
  t.deepEqual(Object.keys(res.body).sort(), [...KEY_FIELDS, 'key'].sort());
  t.regex(res.body.id, /^key_[0-9A-Za-z]{27}$/);
  t.regex(res.body.key, /^sk_live_[0-9A-Za-z]{32}$/);
  t.is(res.body.prefix, res.body.key.slice(0, 12));
  t.is(res.body.org_id, orgId);
  t.is(res.body.name, 'CI deploys');
  t.is(res.body.environment, 'live');
  t.deepEqual(res.body.scopes, ['webhooks:write']);
  t.is(res.body.last_used_at, null);
  t.is(res.body.expires_at, null);
  t.regex(res.body.created_at, ISO_MS);

  const hash = await app.pool.oneFirst(sql.type(z.object({ hash: z.string() }))`
    select encode(key_hash, 'hex') as hash from api_keys where id = ${res.body.id}`);
  t.is(hash, createHash('sha256').update(res.body.key).digest('hex'));
  const row = await app.pool.oneFirst(sql.type(z.object({ row: z.string() }))`
    select row_to_json(k)::text as row from api_keys k where id = ${res.body.id}`);
  t.false(row.includes(res.body.key.slice(12)), 'the secret part of the key is stored nowhere in the row');
});

test('defaults: environment live, scopes ["*"]; test keys start with sk_test_', async (t) => {
  const { key } = await app.createOrg();
  const plain = await app.request('POST', '/v1/api-keys', { key, body: { name: 'plain' } });
  t.is(plain.status, 201);
  t.is(plain.body.environment, 'live');
  t.deepEqual(plain.body.scopes, ['*']);
  const testKey = await app.request('POST', '/v1/api-keys', { key, body: { name: 'sandbox', environment: 'test' } });
  t.is(testKey.status, 201);
  t.regex(testKey.body.key, /^sk_test_[0-9A-Za-z]{32}$/);
  t.is(testKey.body.prefix.slice(0, 8), 'sk_test_');
});

test('expires_at is stored as UTC with milliseconds and must lie in the future', async (t) => {
  const { key } = await app.createOrg();
  const ok = await app.request('POST', '/v1/api-keys', { key, body: { name: 'x', expires_at: '2099-01-02T03:04:05+02:00' } });
  t.is(ok.status, 201);
  t.is(ok.body.expires_at, '2099-01-02T01:04:05.000Z');
  const past = await app.request('POST', '/v1/api-keys', { key, body: { name: 'x', expires_at: '2020-01-01T00:00:00Z' } });
  assertError(t, past, 400, 'validation_error');
  t.deepEqual(past.body.error.details.map((d: { path: string }) => d.path), ['expires_at']);
  const noZone = await app.request('POST', '/v1/api-keys', { key, body: { name: 'x', expires_at: '2099-01-01T00:00:00' } });
  assertError(t, noZone, 400, 'validation_error');
});

const invalidBodies: Array<[string, unknown, string]> = [
  ['missing name', {}, 'name'],
  ['empty name', { name: '  ' }, 'name'],
  ['name too long', { name: 'n'.repeat(256) }, 'name'],
  ['name of wrong type', { name: 5 }, 'name'],
  ['unknown environment', { name: 'x', environment: 'prod' }, 'environment'],
  ['unknown scope', { name: 'x', scopes: ['webhooks:admin'] }, 'scopes.0'],
  ['empty scopes', { name: 'x', scopes: [] }, 'scopes'],
  ['scopes not an array', { name: 'x', scopes: '*' }, 'scopes'],
  ['key chosen by the caller', { name: 'x', key: 'sk_live_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' }, 'key'],
  ['unknown field', { name: 'x', colour: 'red' }, 'colour'],
];

for (const [label, body, path] of invalidBodies) {
  test(`create refuses ${label} with a 400 naming ${path}, creating nothing`, async (t) => {
    const { key, orgId } = await app.createOrg();
    const res = await app.request('POST', '/v1/api-keys', { key, body });
    assertError(t, res, 400, 'validation_error');
    t.true(res.body.error.details.some((d: { path: string }) => d.path === path), JSON.stringify(res.body.error.details));
    const count = await app.pool.oneFirst(sql.unsafe`select count(*)::int from api_keys where org_id = ${orgId}`);
    t.is(count, 1);
  });
}

test('retrieve and list never show key', async (t) => {
  const { key } = await app.createOrg();
  const created = await app.request('POST', '/v1/api-keys', { key, body: { name: 'reader', scopes: ['api-keys:read'] } });
  const one = await app.request('GET', `/v1/api-keys/${created.body.id}`, { key });
  t.is(one.status, 200);
  t.deepEqual(Object.keys(one.body).sort(), KEY_FIELDS);
  t.deepEqual(one.body, Object.fromEntries(Object.entries(created.body).filter(([k]) => k !== 'key')));
  const list = await app.request('GET', '/v1/api-keys', { key });
  t.is(list.status, 200);
  t.deepEqual(Object.keys(list.body).sort(), ['data', 'next_cursor']);
  for (const item of list.body.data) t.deepEqual(Object.keys(item).sort(), KEY_FIELDS);
  t.false(JSON.stringify(list.body).includes(created.body.key));
});

test('cursor pagination walks every key once, newest first, across rows of the same millisecond', async (t) => {
  const { key, orgId, apiKey } = await app.createOrg();
  // 24 more keys inserted in one statement: they share one created_at, so only the id orders them.
  await app.pool.query(sql.unsafe`
    insert into api_keys (id, org_id, environment, name, key_hash, prefix, scopes)
    select 'key_' || lpad(i::text, 27, '0'), ${orgId}, 'live', 'bulk ' || i, sha256(('k' || i || ${orgId})::bytea), 'sk_live_abcd', '{*}'
    from generate_series(1, 24) i`);
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const path: string = `/v1/api-keys?limit=5${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const res = await app.request('GET', path, { key });
    t.is(res.status, 200);
    t.true(res.body.data.length <= 5);
    seen.push(...res.body.data.map((k: { id: string }) => k.id));
    cursor = res.body.next_cursor;
    pages += 1;
  } while (cursor !== null && pages < 10);
  t.is(pages, 5);
  t.is(seen.length, 25);
  t.is(new Set(seen).size, 25);
  const expected = await app.pool.anyFirst(sql.type(z.object({ id: z.string() }))`
    select id from api_keys where org_id = ${orgId} order by created_at desc, id desc`);
  t.deepEqual(seen, expected);
  t.is(seen.at(-1), expected.at(-1));
  t.true(seen.includes(apiKey.id));
});

test('a last page that is exactly full has next_cursor null; an empty filter gives an empty page', async (t) => {
  const { key } = await app.createOrg();
  await app.request('POST', '/v1/api-keys', { key, body: { name: 'second' } });
  const full = await app.request('GET', '/v1/api-keys?limit=2', { key });
  t.is(full.body.data.length, 2);
  t.is(full.body.next_cursor, null);
  const empty = await app.request('GET', '/v1/api-keys?environment=test', { key });
  t.deepEqual(empty.body, { data: [], next_cursor: null });
});

test('limit 100 is accepted; 0, 101 and non-numbers are 400; a forged cursor is 400', async (t) => {
  const { key } = await app.createOrg();
  t.is((await app.request('GET', '/v1/api-keys?limit=100', { key })).status, 200);
  t.is((await app.request('GET', '/v1/api-keys?limit=1', { key })).status, 200);
  for (const limit of ['0', '101', 'ten', '-1', '2.5']) {
    assertError(t, await app.request('GET', `/v1/api-keys?limit=${limit}`, { key }), 400, 'validation_error');
  }
  for (const cursor of ['garbage', Buffer.from('["x","y"]').toString('base64url'), Buffer.from('[1,2]').toString('base64url')]) {
    const res = await app.request('GET', `/v1/api-keys?cursor=${cursor}`, { key });
    assertError(t, res, 400, 'validation_error');
    t.is(res.body.error.details[0].path, 'cursor');
  }
});

test('unknown query parameters and values are 400', async (t) => {
  const { key } = await app.createOrg();
  assertError(t, await app.request('GET', '/v1/api-keys?environment=prod', { key }), 400, 'validation_error');
  const typo = await app.request('GET', '/v1/api-keys?enviroment=test', { key });
  assertError(t, typo, 400, 'validation_error');
  t.is(typo.body.error.details[0].path, 'enviroment');
});

test('the environment filter separates live and test keys; without it both are listed', async (t) => {
  const { key, apiKey } = await app.createOrg();
  const testKey = await app.request('POST', '/v1/api-keys', { key, body: { name: 't', environment: 'test' } });
  const ids = (res: { body: { data: Array<{ id: string }> } }) => res.body.data.map((k) => k.id).sort();
  t.deepEqual(ids(await app.request('GET', '/v1/api-keys?environment=live', { key })), [apiKey.id]);
  t.deepEqual(ids(await app.request('GET', '/v1/api-keys?environment=test', { key })), [testKey.body.id]);
  t.deepEqual(ids(await app.request('GET', '/v1/api-keys', { key })), [apiKey.id, testKey.body.id].sort());
  // A test-environment key sees the organization's keys too: keys are organization-wide.
  t.deepEqual(ids(await app.request('GET', '/v1/api-keys', { key: testKey.body.key })), [apiKey.id, testKey.body.id].sort());
});

test('patch changes name, scopes and expires_at, and can clear expires_at', async (t) => {
  const { key } = await app.createOrg();
  const created = await app.request('POST', '/v1/api-keys', { key, body: { name: 'old', expires_at: '2099-01-01T00:00:00Z' } });
  const res = await app.request('PATCH', `/v1/api-keys/${created.body.id}`, {
    key, body: { name: 'new', scopes: ['endpoints:read', 'webhooks:write'] },
  });
  t.is(res.status, 200);
  t.deepEqual(Object.keys(res.body).sort(), KEY_FIELDS);
  t.is(res.body.name, 'new');
  t.deepEqual(res.body.scopes, ['endpoints:read', 'webhooks:write']);
  t.is(res.body.expires_at, '2099-01-01T00:00:00.000Z');
  const cleared = await app.request('PATCH', `/v1/api-keys/${created.body.id}`, { key, body: { expires_at: null } });
  t.is(cleared.body.expires_at, null);
  t.is(cleared.body.name, 'new');
  const empty = await app.request('PATCH', `/v1/api-keys/${created.body.id}`, { key, body: {} });
  t.is(empty.status, 200);
  t.is(empty.body.name, 'new');
});

test('patch refuses the key value, unknown fields, bad values, and changes nothing', async (t) => {
  const { key } = await app.createOrg();
  const created = await app.request('POST', '/v1/api-keys', { key, body: { name: 'keep' } });
  for (const body of [{ key: 'sk_live_x' }, { name: 'y', environment: 'test' }, { name: '' }, { scopes: ['nope'] }, { expires_at: 'soon' }]) {
    assertError(t, await app.request('PATCH', `/v1/api-keys/${created.body.id}`, { key, body }), 400, 'validation_error');
  }
  const after = await app.request('GET', `/v1/api-keys/${created.body.id}`, { key });
  t.is(after.body.name, 'keep');
  t.is(after.body.environment, 'live');
});

test('delete answers { id, deleted, deleted_at } and the key is gone for good', async (t) => {
  const { key } = await app.createOrg();
  const created = await app.request('POST', '/v1/api-keys', { key, body: { name: 'temp' } });
  const res = await app.request('DELETE', `/v1/api-keys/${created.body.id}`, { key });
  t.is(res.status, 200);
  t.deepEqual(Object.keys(res.body).sort(), ['deleted', 'deleted_at', 'id']);
  t.is(res.body.id, created.body.id);
  t.is(res.body.deleted, true);
  t.regex(res.body.deleted_at, ISO_MS);
  assertError(t, await app.request('GET', `/v1/api-keys/${created.body.id}`, { key }), 404, 'not_found');
  assertError(t, await app.request('DELETE', `/v1/api-keys/${created.body.id}`, { key }), 404, 'not_found');
  assertError(t, await app.request('GET', '/v1/api-keys', { key: created.body.key }), 401, 'unauthorized');
});

test('another organization\'s key is a 404 in every operation, and stays untouched', async (t) => {
  const mine = await app.createOrg();
  const theirs = await app.createOrg();
  const id = theirs.apiKey.id;
  assertError(t, await app.request('GET', `/v1/api-keys/${id}`, { key: mine.key }), 404, 'not_found');
  assertError(t, await app.request('PATCH', `/v1/api-keys/${id}`, { key: mine.key, body: { name: 'pwned' } }), 404, 'not_found');
  assertError(t, await app.request('DELETE', `/v1/api-keys/${id}`, { key: mine.key }), 404, 'not_found');
  const list = await app.request('GET', '/v1/api-keys', { key: mine.key });
  t.deepEqual(list.body.data.map((k: { id: string }) => k.id), [mine.apiKey.id]);
  const still = await app.request('GET', `/v1/api-keys/${id}`, { key: theirs.key });
  t.is(still.body.name, 'root');
});

test('malformed ids in the path are 404, never 400 or 500', async (t) => {
  const { key } = await app.createOrg();
  for (const id of ['nope', 'key_short', `app_${'A'.repeat(27)}`, `key_${'!'.repeat(27)}`, "key_' or 1=1 --"]) {
    const path = `/v1/api-keys/${encodeURIComponent(id)}`;
    assertError(t, await app.request('GET', path, { key }), 404, 'not_found');
    assertError(t, await app.request('PATCH', path, { key, body: { name: 'x' } }), 404, 'not_found');
    assertError(t, await app.request('DELETE', path, { key }), 404, 'not_found');
  }
});

test('a change or delete by a narrower key writes only while the key holds nothing beyond it, in the writing statement itself', async (t) => {
  // The route checks the key's scopes, then writes: a key widened by another request in between
  // (to "*") was still changed or deleted by a key with api-keys:write alone (a probe, by reading).
  // The write now carries the condition, so the widened key is left alone; this calls the writes
  // as the route does, with the narrower key's grantable scopes, on a key widened already.
  const { key, orgId } = await app.createOrg();
  const created = await app.request('POST', '/v1/api-keys', { key, body: { name: 'widened', scopes: ['api-keys:read'] } });
  const id = created.body.id as string;
  t.is((await app.request('PATCH', `/v1/api-keys/${id}`, { key, body: { scopes: ['*'] } })).status, 200);
  const narrowerMayGrant = ['api-keys:write', 'api-keys:read'];
  t.is(await updateApiKey(app.pool, orgId, id, { name: 'changed' }, narrowerMayGrant), null);
  t.is(await deleteApiKey(app.pool, orgId, id, narrowerMayGrant), null);
  t.like((await app.request('GET', `/v1/api-keys/${id}`, { key })).body, { name: 'widened', scopes: ['*'] });
  t.is((await updateApiKey(app.pool, orgId, id, { name: 'changed' }, ['*', ...narrowerMayGrant]))?.name, 'changed', 'within them, written');
});
