// GET /v1/endpoints (offset pagination, status filter) and GET /v1/endpoints/{id}.
import test from 'ava';
import { newId } from '../../src/ids.ts';
import { assertError } from '../helpers/app.ts';
import {
  app, FULL_FIELDS, SUMMARY_FIELDS, ISO_MS, URL_OK, setup, createApplication, createEventType, createEndpoint,
  getEndpoint, disable, paths, ids,
} from './helpers.ts';

// ---------------------------------------------------------------- list

test('list: summaries only (never the secret), newest first, with offset pagination', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  const created = [];
  for (let i = 0; i < 3; i += 1) created.push(await createEndpoint(t, key, { application_id: appId, url: `${URL_OK}/${i}`, event_types: ['invoice.paid'] }));
  const newestFirst = created.map((e) => e.id).reverse();

  const res = await app.request('GET', `/v1/endpoints?application_id=${appId}`, { key });
  t.is(res.status, 200);
  t.deepEqual(Object.keys(res.body).sort(), ['data', 'pagination']);
  t.deepEqual(res.body.pagination, { total: 3, page: 1, per_page: 25, total_pages: 1 });
  t.deepEqual(ids(res), newestFirst);
  for (const item of res.body.data) t.deepEqual(Object.keys(item).sort(), SUMMARY_FIELDS);
  const first = created[2];
  t.deepEqual(res.body.data[0], {
    id: first.id, application_id: appId, url: first.url, status: 'active', event_types: ['invoice.paid'], failure_count: 0, created_at: first.created_at,
  });
  for (const e of created) t.false(JSON.stringify(res.body).includes(e.secret.slice(6)));

  const page1 = await app.request('GET', `/v1/endpoints?application_id=${appId}&per_page=2`, { key });
  t.deepEqual(ids(page1), newestFirst.slice(0, 2));
  t.deepEqual(page1.body.pagination, { total: 3, page: 1, per_page: 2, total_pages: 2 });
  const page2 = await app.request('GET', `/v1/endpoints?application_id=${appId}&per_page=2&page=2`, { key });
  t.deepEqual(ids(page2), newestFirst.slice(2));
  t.deepEqual(page2.body.pagination, { total: 3, page: 2, per_page: 2, total_pages: 2 });
  const past = await app.request('GET', `/v1/endpoints?application_id=${appId}&per_page=2&page=3`, { key });
  t.is(past.status, 200);
  t.deepEqual(past.body, { data: [], pagination: { total: 3, page: 3, per_page: 2, total_pages: 2 } });
});

test('list shows only the endpoints of the application asked for; an empty one gives total_pages 0', async (t) => {
  const { key, appId } = await setup(t);
  const otherApp = await createApplication(t, key);
  const mine = await createEndpoint(t, key, { application_id: appId });
  await createEndpoint(t, key, { application_id: otherApp });
  const res = await app.request('GET', `/v1/endpoints?application_id=${appId}`, { key });
  t.deepEqual(ids(res), [mine.id]);
  const emptyApp = await createApplication(t, key);
  const empty = await app.request('GET', `/v1/endpoints?application_id=${emptyApp}`, { key });
  t.deepEqual(empty.body, { data: [], pagination: { total: 0, page: 1, per_page: 25, total_pages: 0 } });
});

test('list without application_id is the organization\'s (test/organization-lists.test.ts); an unknown, malformed, deleted or foreign one is 404', async (t) => {
  const { key } = await setup(t);
  t.is((await app.request('GET', '/v1/endpoints', { key })).status, 200);
  const foreign = await setup(t);
  await createEndpoint(t, foreign.key, { application_id: foreign.appId });
  const deleted = await createApplication(t, key);
  t.is((await app.request('DELETE', `/v1/applications/${deleted}`, { key })).status, 200);
  for (const applicationId of [newId('app'), 'nope', deleted, foreign.appId]) {
    assertError(t, await app.request('GET', `/v1/endpoints?application_id=${applicationId}`, { key }), 404, 'not_found');
  }
});

test('list filters by status; "deleted" and other values are 400', async (t) => {
  const { key, appId } = await setup(t);
  const active = await createEndpoint(t, key, { application_id: appId });
  const paused = await createEndpoint(t, key, { application_id: appId });
  const disabled = await createEndpoint(t, key, { application_id: appId });
  const deleted = await createEndpoint(t, key, { application_id: appId });
  t.is((await app.request('PATCH', `/v1/endpoints/${paused.id}`, { key, body: { status: 'paused' } })).status, 200);
  await disable(disabled.id);
  t.is((await app.request('DELETE', `/v1/endpoints/${deleted.id}`, { key })).status, 200);

  const byStatus = async (status: string) => app.request('GET', `/v1/endpoints?application_id=${appId}&status=${status}`, { key });
  const a = await byStatus('active');
  t.deepEqual(ids(a), [active.id]);
  t.is(a.body.pagination.total, 1);
  t.deepEqual(ids(await byStatus('paused')), [paused.id]);
  const d = await byStatus('disabled');
  t.deepEqual(ids(d), [disabled.id]);
  t.is(d.body.data[0].failure_count, 10);
  t.is(d.body.data[0].status, 'disabled');
  for (const status of ['deleted', 'ACTIVE', '']) {
    const res = await byStatus(status);
    assertError(t, res, 400, 'validation_error');
    t.deepEqual(paths(res), ['status']);
  }
});

test('list: per_page 100 is accepted; 0, 101, page 0 and unknown query parameters are 400', async (t) => {
  const { key, appId } = await setup(t);
  await createEndpoint(t, key, { application_id: appId });
  const ok = await app.request('GET', `/v1/endpoints?application_id=${appId}&per_page=100`, { key });
  t.is(ok.status, 200);
  t.is(ok.body.pagination.per_page, 100);
  t.is(ok.body.data.length, 1);
  for (const [query, path] of [['per_page=101', 'per_page'], ['per_page=0', 'per_page'], ['page=0', 'page'], ['page=x', 'page'], ['colour=red', 'colour']]) {
    const res = await app.request('GET', `/v1/endpoints?application_id=${appId}&${query}`, { key });
    assertError(t, res, 400, 'validation_error');
    t.deepEqual(paths(res), [path]);
  }
});

// ---------------------------------------------------------------- retrieve

// A hostile-tenant probe: 100 endpoints subscribed to 1,000 event types of 255 characters each
// made one page 26 MB, read, checked and serialized at once (the web's event loop held 1.3-1.45 s).
// A page reads the first 101 names of each item; an item with more is completed on its own when
// its turn to be written comes, and such a page is written item by item (no Content-Length).
test('list: an endpoint with more than 100 event types is listed with all of them, the page written item by item; so is a deleted one', async (t) => {
  const { key, appId } = await setup(t);
  const names = Array.from({ length: 150 }, (_, i) => `many.type_${String(i).padStart(3, '0')}`);
  for (const name of names) await createEventType(t, key, name);
  const few = await createEndpoint(t, key, { application_id: appId, url: `${URL_OK}/few`, event_types: names.slice(0, 100) });
  const many = await createEndpoint(t, key, { application_id: appId, url: `${URL_OK}/many`, event_types: [...names].reverse() });
  const newest = await createEndpoint(t, key, { application_id: appId, url: `${URL_OK}/newest`, event_types: names.slice(0, 1) });

  const small = await app.request('GET', `/v1/endpoints?application_id=${appId}&per_page=1`, { key });
  t.deepEqual(small.body.data.map((e: { id: string }) => e.id), [newest.id]);
  t.truthy(small.headers.get('content-length'), 'a page of items with at most 100 names each is one body, as before');

  const res = await app.request('GET', `/v1/endpoints?application_id=${appId}`, { key });
  t.is(res.status, 200);
  t.is(res.headers.get('content-length'), null, 'written item by item');
  t.regex(res.headers.get('content-type') ?? '', /^application\/json/);
  t.deepEqual(res.body.pagination, { total: 3, page: 1, per_page: 25, total_pages: 1 });
  t.deepEqual(res.body.data.map((e: { id: string }) => e.id), [newest.id, many.id, few.id]);
  t.deepEqual(res.body.data[1], {
    id: many.id, application_id: appId, url: many.url, status: 'active', event_types: names, failure_count: 0, created_at: many.created_at,
  });
  t.deepEqual(res.body.data[2].event_types, names.slice(0, 100));
  for (const item of res.body.data) t.deepEqual(Object.keys(item).sort(), SUMMARY_FIELDS);
  // The organization's list too.
  const all = await app.request('GET', '/v1/endpoints', { key });
  t.deepEqual(all.body.data.find((e: { id: string }) => e.id === many.id)?.event_types, names);

  // Deleted, it is listed (deleted=true) with every name a restore would subscribe to again.
  t.is((await app.request('DELETE', `/v1/endpoints/${many.id}`, { key })).status, 200);
  const deleted = await app.request('GET', `/v1/endpoints?application_id=${appId}&deleted=true`, { key });
  t.is(deleted.status, 200);
  t.is(deleted.headers.get('content-length'), null);
  t.deepEqual(deleted.body.data.map((e: { id: string; event_types: string[] }) => [e.id, e.event_types]), [[many.id, names]]);
  t.deepEqual(deleted.body.pagination, { total: 1, page: 1, per_page: 25, total_pages: 1 });
});

test('retrieve: the full object with secret, disabled_at null, updated_at; event_types sorted by name', async (t) => {
  const { key, appId } = await setup(t);
  for (const name of ['order.shipped', 'invoice.paid', 'account.created']) await createEventType(t, key, name);
  const created = await createEndpoint(t, key, {
    application_id: appId, event_types: ['order.shipped', 'account.created', 'invoice.paid'], headers: { 'X-A': '1' },
  });
  const res = await getEndpoint(key, created.id);
  t.is(res.status, 200);
  t.deepEqual(Object.keys(res.body).sort(), FULL_FIELDS);
  t.deepEqual(res.body.event_types, ['account.created', 'invoice.paid', 'order.shipped']);
  t.is(res.body.disabled_at, null);
  t.regex(res.body.updated_at, ISO_MS);
  t.is(res.body.secret, created.secret);
  const { disabled_at: _d, updated_at: _u, ...rest } = res.body;
  t.deepEqual(rest, created);
});

test('retrieve of a disabled endpoint shows disabled_at and failure_count', async (t) => {
  const { key, appId } = await setup(t);
  const created = await createEndpoint(t, key, { application_id: appId });
  await disable(created.id);
  const res = await getEndpoint(key, created.id);
  t.is(res.body.status, 'disabled');
  t.regex(res.body.disabled_at, ISO_MS);
  t.is(res.body.failure_count, 10);
});
