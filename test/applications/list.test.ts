// GET /v1/applications: offset pagination and search.
import test from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { app, SUMMARY_FIELDS, createApp, createEndpoint, ids, assertValidation, list } from './helpers.ts';

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
