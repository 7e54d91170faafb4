// /v1/applications over HTTP: shapes, validation, uid uniqueness, offset pagination and search,
// retrieve and by-uid, patch, soft delete with its cascade, environments, isolation and scopes.
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { assertError, startTestApp, type Response } from './helpers/app.ts';
import * as fixtures from './helpers/fixtures.ts';

const app = startTestApp();

const APP_FIELDS = [
  'created_at', 'endpoints_count', 'id', 'metadata', 'name', 'success_rate', 'uid', 'updated_at', 'webhook_jobs_count',
];
const DETAIL_FIELDS = [...APP_FIELDS, 'endpoints'].sort();
const SUMMARY_FIELDS = ['created_at', 'endpoints_count', 'id', 'name', 'success_rate', 'uid', 'webhook_jobs_count'];
const PATCH_FIELDS = ['id', 'metadata', 'name', 'uid', 'updated_at'];
const ENDPOINT_ITEM_FIELDS = ['id', 'status', 'success_rate', 'url'];
const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const APP_ID = /^app_[0-9A-Za-z]{27}$/;
const OLD = '2020-01-01T00:00:00.000Z';

type Detail = { path: string; message: string };

// ---------------------------------------------------------------------------------------------
// Helpers

type Application = { id: string; name: string; uid: string | null; metadata: Record<string, unknown>; created_at: string; updated_at: string };

async function createApp(key: string, body: Record<string, unknown> = { name: 'Acme' }): Promise<Application> {
  return fixtures.createApplication({ on: app, key }, body);
}

async function createEndpoint(key: string, applicationId: string, eventTypes: string[] = [], url = 'https://example.com/x') {
  return fixtures.createEndpoint({ on: app, key }, { application_id: applicationId, url, event_types: eventTypes }) as Promise<{ id: string; url: string }>;
}

/** A second key of the same organization, in the `test` environment (or with other scopes). */
async function createKey(key: string, body: Record<string, unknown>): Promise<string> {
  return (await fixtures.createApiKey({ on: app, key }, { name: 'second', ...body })).key;
}

async function countApps(orgId: string, where = sql.fragment`true`): Promise<number> {
  return app.pool.oneFirst(sql.type(z.object({ count: z.number() }))`
    select count(*)::int as count from applications where org_id = ${orgId} and ${where}`);
}

const ids = (res: Response): string[] => res.body.data.map((a: { id: string }) => a.id);
const paths = (res: Response): string[] => res.body.error.details.map((d: Detail) => d.path);

function assertValidation(t: ExecutionContext, res: Response, path: string): void {
  assertError(t, res, 400, 'validation_error');
  t.true(Array.isArray(res.body.error.details), JSON.stringify(res.body.error));
  t.true(paths(res).includes(path), JSON.stringify(res.body.error.details));
}

const list = (key: string, query = '') => app.request('GET', `/v1/applications${query}`, { key });

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

// ---------------------------------------------------------------------------------------------
// List

test('list has the offset shape; items carry exactly the summary fields, newest first', async (t) => {
  const { key } = await app.createOrg();
  const a = await createApp(key, { name: 'first', uid: 'first', metadata: { secret: 'not in lists' } });
  const b = await createApp(key, { name: 'second' });
  const c = await createApp(key, { name: 'third', uid: 'third' });
  const res = await list(key);
  t.is(res.status, 200);
  t.deepEqual(Object.keys(res.body).sort(), ['data', 'pagination']);
  t.deepEqual(res.body.pagination, { total: 3, page: 1, per_page: 25, total_pages: 1 });
  t.deepEqual(ids(res), [c.id, b.id, a.id]);
  for (const item of res.body.data) t.deepEqual(Object.keys(item).sort(), SUMMARY_FIELDS);
  const first = res.body.data[2];
  t.deepEqual(first, {
    id: a.id, name: 'first', uid: 'first', endpoints_count: 0, webhook_jobs_count: 0, success_rate: 100, created_at: a.created_at,
  });
  t.false(JSON.stringify(res.body).includes('not in lists'));
});

test('an empty list has total 0 and total_pages 0', async (t) => {
  const { key } = await app.createOrg();
  const res = await list(key);
  t.is(res.status, 200);
  t.deepEqual(res.body, { data: [], pagination: { total: 0, page: 1, per_page: 25, total_pages: 0 } });
  const later = await list(key, '?page=3&per_page=10');
  t.deepEqual(later.body, { data: [], pagination: { total: 0, page: 3, per_page: 10, total_pages: 0 } });
});

test('list items show the live endpoint count', async (t) => {
  const { key } = await app.createOrg();
  const a = await createApp(key);
  await createEndpoint(key, a.id);
  const gone = await createEndpoint(key, a.id);
  await createEndpoint(key, a.id);
  t.is((await app.request('DELETE', `/v1/endpoints/${gone.id}`, { key })).status, 200);
  const res = await list(key);
  t.is(res.body.data[0].endpoints_count, 2);
});

test('pages walk the list: per_page, a partial last page, a page past the end', async (t) => {
  const { key } = await app.createOrg();
  const created: string[] = [];
  for (let i = 1; i <= 7; i += 1) created.push((await createApp(key, { name: `app ${i}` })).id);
  const newestFirst = [...created].reverse();

  const p1 = await list(key, '?per_page=3');
  t.deepEqual(p1.body.pagination, { total: 7, page: 1, per_page: 3, total_pages: 3 });
  t.deepEqual(ids(p1), newestFirst.slice(0, 3));
  const p2 = await list(key, '?per_page=3&page=2');
  t.deepEqual(p2.body.pagination, { total: 7, page: 2, per_page: 3, total_pages: 3 });
  t.deepEqual(ids(p2), newestFirst.slice(3, 6));
  const p3 = await list(key, '?per_page=3&page=3');
  t.deepEqual(p3.body.pagination, { total: 7, page: 3, per_page: 3, total_pages: 3 });
  t.deepEqual(ids(p3), newestFirst.slice(6));
  const p4 = await list(key, '?per_page=3&page=4');
  t.is(p4.status, 200);
  t.deepEqual(p4.body, { data: [], pagination: { total: 7, page: 4, per_page: 3, total_pages: 3 } });

  t.deepEqual((await list(key, '?per_page=7')).body.pagination, { total: 7, page: 1, per_page: 7, total_pages: 1 });
  t.deepEqual((await list(key, '?per_page=1&page=7')).body.pagination, { total: 7, page: 7, per_page: 1, total_pages: 7 });
  t.deepEqual(ids(await list(key, '?per_page=1&page=7')), [created[0]]);
  t.deepEqual((await list(key, '?per_page=2')).body.pagination.total_pages, 4);
});

test('defaults are page 1 and per_page 25; per_page 100 is accepted; ties in created_at are ordered by id desc', async (t) => {
  const { key, orgId } = await app.createOrg();
  // 30 applications inserted in one statement share one created_at: only the id orders them.
  await app.pool.query(sql.unsafe`
    insert into applications (id, org_id, environment, name)
    select 'app_' || lpad(i::text, 27, '0'), ${orgId}, 'live', 'bulk ' || i
    from generate_series(1, 30) i`);
  const newest = await createApp(key, { name: 'newest' });
  const expected = [newest.id, ...Array.from({ length: 30 }, (_, i) => `app_${String(30 - i).padStart(27, '0')}`)];

  const first = await list(key);
  t.deepEqual(first.body.pagination, { total: 31, page: 1, per_page: 25, total_pages: 2 });
  t.deepEqual(ids(first), expected.slice(0, 25));
  const second = await list(key, '?page=2');
  t.deepEqual(second.body.pagination, { total: 31, page: 2, per_page: 25, total_pages: 2 });
  t.deepEqual(ids(second), expected.slice(25));
  const all = await list(key, '?per_page=100');
  t.is(all.status, 200);
  t.deepEqual(all.body.pagination, { total: 31, page: 1, per_page: 100, total_pages: 1 });
  t.deepEqual(ids(all), expected);

  const inSql = await app.pool.anyFirst(sql.type(z.object({ id: z.string() }))`
    select id from applications where org_id = ${orgId} order by created_at desc, id desc`);
  t.deepEqual(ids(all), [...inSql]);
});

const invalidQueries: Array<[string, string]> = [
  ['?page=0', 'page'],
  ['?page=-1', 'page'],
  ['?page=abc', 'page'],
  ['?page=1.5', 'page'],
  ['?page=', 'page'],
  ['?per_page=0', 'per_page'],
  ['?per_page=101', 'per_page'],
  ['?per_page=ten', 'per_page'],
  ['?per_page=2e1', 'per_page'],
  ['?sort=name', 'sort'],
  ['?limit=10', 'limit'],
  [`?search=${'s'.repeat(256)}`, 'search'],
];

for (const [query, path] of invalidQueries) {
  test(`list refuses ${query.length > 40 ? `${query.slice(0, 40)}…` : query} with a 400 naming ${path}`, async (t) => {
    const { key } = await app.createOrg();
    await createApp(key);
    assertValidation(t, await list(key, query), path);
  });
}

test('search matches a case-insensitive substring of name or uid', async (t) => {
  const { key } = await app.createOrg();
  const acme = await createApp(key, { name: 'Acme Corp', uid: 'C-1' });
  const globex = await createApp(key, { name: 'Globex', uid: 'ACME-legacy' });
  await createApp(key, { name: 'Initech', uid: 'init' });
  await createApp(key, { name: 'Umbrella' });
  const search = (text: string) => list(key, `?search=${encodeURIComponent(text)}`);

  for (const text of ['acme', 'ACME', 'aCmE', 'cme']) {
    const res = await search(text);
    t.is(res.status, 200);
    t.deepEqual(ids(res), [globex.id, acme.id], text);
    t.deepEqual(res.body.pagination, { total: 2, page: 1, per_page: 25, total_pages: 1 }, text);
  }
  t.deepEqual(ids(await search('globex')), [globex.id]);
  t.deepEqual(ids(await search('legacy')), [globex.id]);
  t.deepEqual(ids(await search('c-1')), [acme.id]);
  t.deepEqual(ids(await search('acme corp')), [acme.id]);
  const none = await search('nothing-like-this');
  t.deepEqual(none.body, { data: [], pagination: { total: 0, page: 1, per_page: 25, total_pages: 0 } });
});

test('search takes %, _ and \\ literally', async (t) => {
  const { key } = await app.createOrg();
  const percent = await createApp(key, { name: '100% Juice' });
  const underscore = await createApp(key, { name: 'a_b shop' });
  await createApp(key, { name: 'axb shop' });
  const uidUnderscore = await createApp(key, { name: 'Plain', uid: 'cust_7' });
  const backslash = await createApp(key, { name: 'back\\slash' });
  await createApp(key, { name: 'Nothing special' });
  const search = (text: string) => list(key, `?search=${encodeURIComponent(text)}`);

  const pct = await search('%');
  t.deepEqual(ids(pct), [percent.id]);
  t.is(pct.body.pagination.total, 1);
  t.deepEqual(ids(await search('0%')), [percent.id]);
  t.deepEqual(ids(await search('% j')), [percent.id]);
  t.deepEqual(ids(await search('_')).sort(), [underscore.id, uidUnderscore.id].sort());
  t.deepEqual(ids(await search('a_b')), [underscore.id]);
  t.deepEqual(ids(await search('\\')), [backslash.id]);
  t.deepEqual((await search('%%')).body.data, []);
  t.deepEqual((await search('x_b')).body.data, []);
});

test('search paginates over the matches only', async (t) => {
  const { key } = await app.createOrg();
  const matches: string[] = [];
  for (let i = 1; i <= 5; i += 1) {
    matches.push((await createApp(key, { name: `match ${i}` })).id);
    await createApp(key, { name: `other ${i}` });
  }
  const res = await list(key, '?search=MATCH&per_page=2&page=3');
  t.deepEqual(res.body.pagination, { total: 5, page: 3, per_page: 2, total_pages: 3 });
  t.deepEqual(ids(res), [matches[0]]);
});

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
