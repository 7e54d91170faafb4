// /v1/endpoints over HTTP: create (shape, defaults, validation, destination rules as the API
// applies them), list (offset pagination, status filter), retrieve, patch (state rules), delete,
// rotate-secret, reset-circuit, endpoints_count under concurrency, isolation and scopes.
import test, { type ExecutionContext } from 'ava';
import pg from 'pg';
import { sql } from 'slonik';
import { z } from 'zod';
import { newId } from '../src/ids.ts';
import { assertError, startTestApp, type Response, type TestApp } from './helpers/app.ts';
import * as fixtures from './helpers/fixtures.ts';

const app = startTestApp();
const privateApp = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true' });

const CREATE_FIELDS = [
  'application_id', 'created_at', 'event_types', 'failure_count', 'headers', 'id', 'rate_limit_rps', 'secret',
  'secret_version', 'status', 'timeout_ms', 'url',
];
const FULL_FIELDS = [...CREATE_FIELDS, 'disabled_at', 'updated_at'].sort();
const SUMMARY_FIELDS = ['application_id', 'created_at', 'event_types', 'failure_count', 'id', 'status', 'url'];
const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const SECRET = /^whsec_[0-9a-f]{64}$/;
const URL_OK = 'https://hooks.example.com/webhooks';

type Org = { key: string; orgId: string; appId: string };

// ---------------------------------------------------------------- helpers

/** A new organization (live key, all scopes) with one application. */
async function setup(t: ExecutionContext, on: TestApp = app): Promise<Org> {
  const { key, orgId } = await on.createOrg();
  const appId = await createApplication(t, key, on);
  return { key, orgId, appId };
}

async function createApplication(t: ExecutionContext, key: string, on: TestApp = app): Promise<string> {
  return (await fixtures.createApplication({ t, on, key })).id;
}

async function createEventType(t: ExecutionContext, key: string, name: string): Promise<string> {
  return (await fixtures.createEventType({ t, on: app, key }, name)).id;
}

async function createEndpoint(t: ExecutionContext, key: string, body: Record<string, unknown>, on: TestApp = app) {
  return fixtures.createEndpoint({ t, on, key }, { url: URL_OK, ...body });
}

async function createKey(t: ExecutionContext, byKey: string, body: { scopes?: string[]; environment?: 'live' | 'test' }): Promise<string> {
  return (await fixtures.createApiKey({ t, on: app, key: byKey }, body)).key;
}

const getEndpoint = (key: string, id: string) => app.request('GET', `/v1/endpoints/${id}`, { key });

async function subscriberCount(t: ExecutionContext, key: string, eventTypeId: string): Promise<number> {
  const res = await app.request('GET', `/v1/event-types/${eventTypeId}`, { key });
  t.is(res.status, 200, JSON.stringify(res.body));
  return res.body.subscriber_count;
}

async function endpointsCount(t: ExecutionContext, key: string, appId: string): Promise<number> {
  const res = await app.request('GET', `/v1/applications/${appId}`, { key });
  t.is(res.status, 200, JSON.stringify(res.body));
  return res.body.endpoints_count;
}

/** Endpoints of the organization in the database, deleted ones included. */
async function countRows(orgId: string, on: TestApp = app): Promise<number> {
  return on.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from endpoints where org_id = ${orgId}`);
}

async function countLive(appId: string): Promise<number> {
  return app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from endpoints where application_id = ${appId} and deleted_at is null`);
}

async function disable(id: string, on: TestApp = app): Promise<void> {
  await on.pool.query(sql.unsafe`
    update endpoints set status = 'disabled', disabled_at = now(), failure_count = 10 where id = ${id}`);
}

const paths = (res: Response): string[] => (res.body?.error?.details ?? []).map((d: { path: string }) => d.path);
const ids = (res: Response): string[] => res.body.data.map((e: { id: string }) => e.id);

// ---------------------------------------------------------------- create

test('create: 201 with exactly the create fields, defaults, a fresh secret, and the url as sent', async (t) => {
  const { key, appId } = await setup(t);
  const url = 'https://Hooks.Example.COM:443/a/../Path?Z=1&a=%41#frag';
  const res = await app.request('POST', '/v1/endpoints', { key, body: { application_id: appId, url } });
  t.is(res.status, 201, JSON.stringify(res.body));
  t.deepEqual(Object.keys(res.body).sort(), [...CREATE_FIELDS].sort());
  t.regex(res.body.id, /^ep_[0-9A-Za-z]{27}$/);
  t.is(res.body.application_id, appId);
  t.is(res.body.url, url);
  t.is(res.body.status, 'active');
  t.deepEqual(res.body.event_types, []);
  t.deepEqual(res.body.headers, {});
  t.is(res.body.rate_limit_rps, 100);
  t.is(res.body.timeout_ms, 30_000);
  t.regex(res.body.secret, SECRET);
  t.is(res.body.secret_version, 1);
  t.is(res.body.failure_count, 0);
  t.regex(res.body.created_at, ISO_MS);

  const other = await createEndpoint(t, key, { application_id: appId });
  t.regex(other.secret, SECRET);
  t.not(other.secret, res.body.secret);
  t.not(other.id, res.body.id);
});

test('create stores every given field; retrieve shows them back', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  await createEventType(t, key, 'customer.created');
  const headers = { 'X-Api-Key': 'abc 123', Authorization: 'Bearer token', 'X-Webhook-Source': 'acme', 'X-Empty': '' };
  const created = await createEndpoint(t, key, {
    application_id: appId, event_types: ['invoice.paid', 'customer.created'], headers, rate_limit_rps: 7, timeout_ms: 5000,
  });
  t.deepEqual(created.event_types, ['customer.created', 'invoice.paid']);
  t.deepEqual(created.headers, headers);
  t.is(created.rate_limit_rps, 7);
  t.is(created.timeout_ms, 5000);
  const got = await getEndpoint(key, created.id);
  t.is(got.status, 200);
  t.deepEqual(got.body.headers, headers);
  t.deepEqual(got.body.event_types, ['customer.created', 'invoice.paid']);
});

test('create accepts the bounds of rate_limit_rps (1, 10000) and timeout_ms (1000, 120000)', async (t) => {
  const { key, appId } = await setup(t);
  for (const [rate, timeout] of [[1, 1000], [10_000, 120_000]] as const) {
    const created = await createEndpoint(t, key, { application_id: appId, rate_limit_rps: rate, timeout_ms: timeout });
    t.is(created.rate_limit_rps, rate);
    t.is(created.timeout_ms, timeout);
  }
});

const invalidCreates: Array<[string, Record<string, unknown>, string]> = [
  ['a missing application_id', { application_id: undefined }, 'application_id'],
  ['a missing url', { url: undefined }, 'url'],
  ['rate_limit_rps 0', { rate_limit_rps: 0 }, 'rate_limit_rps'],
  ['rate_limit_rps 10001', { rate_limit_rps: 10_001 }, 'rate_limit_rps'],
  ['rate_limit_rps 1.5', { rate_limit_rps: 1.5 }, 'rate_limit_rps'],
  ['rate_limit_rps "5"', { rate_limit_rps: '5' }, 'rate_limit_rps'],
  ['timeout_ms 999', { timeout_ms: 999 }, 'timeout_ms'],
  ['timeout_ms 120001', { timeout_ms: 120_001 }, 'timeout_ms'],
  ['an http:// url', { url: 'http://hooks.example.com/x' }, 'url'],
  ['https://localhost', { url: 'https://localhost/hook' }, 'url'],
  ['https://api.localhost', { url: 'https://api.localhost/hook' }, 'url'],
  ['https://127.0.0.1', { url: 'https://127.0.0.1/hook' }, 'url'],
  ['https://[::1]', { url: 'https://[::1]/hook' }, 'url'],
  ['https://10.1.2.3', { url: 'https://10.1.2.3/hook' }, 'url'],
  ['https://2130706433 (127.0.0.1 in decimal)', { url: 'https://2130706433/hook' }, 'url'],
  ['a url with user:password', { url: 'https://user:pw@example.com/hook' }, 'url'],
  ['a url of 2049 characters', { url: `https://example.com/${'a'.repeat(2049 - 20)}` }, 'url'],
  ['something that is not a URL', { url: 'not a url' }, 'url'],
  ['a url that is not a string', { url: 42 }, 'url'],
  ['event_types that is not an array', { event_types: 'invoice.paid' }, 'event_types'],
  ['the reserved header Host', { headers: { Host: 'evil.example' } }, 'headers.Host'],
  ['the reserved header content-type', { headers: { 'content-type': 'text/plain' } }, 'headers.content-type'],
  ['the reserved header User-Agent', { headers: { 'User-Agent': 'me' } }, 'headers.User-Agent'],
  ['the reserved header Content-Length', { headers: { 'Content-Length': '1' } }, 'headers.Content-Length'],
  ['the reserved header Connection', { headers: { Connection: 'close' } }, 'headers.Connection'],
  ['the reserved header Transfer-Encoding', { headers: { 'Transfer-Encoding': 'chunked' } }, 'headers.Transfer-Encoding'],
  ['the reserved header webhook-id', { headers: { 'webhook-id': 'x' } }, 'headers.webhook-id'],
  ['the reserved header Webhook-Signature', { headers: { 'Webhook-Signature': 'v1,x' } }, 'headers.Webhook-Signature'],
  ['the reserved header WEBHOOK-TIMESTAMP', { headers: { 'WEBHOOK-TIMESTAMP': '1' } }, 'headers.WEBHOOK-TIMESTAMP'],
  ['21 headers', { headers: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`X-H${i}`, 'v'])) }, 'headers'],
  ['the header name "bad name"', { headers: { 'bad name': 'v' } }, 'headers.bad name'],
  ['the header name "a:b"', { headers: { 'a:b': 'v' } }, 'headers.a:b'],
  ['a header value with CR/LF', { headers: { 'X-Inject': 'a\r\nX-Other: b' } }, 'headers.X-Inject'],
  ['a header value with LF', { headers: { 'X-Inject': 'a\nb' } }, 'headers.X-Inject'],
  ['a non-string header value', { headers: { 'X-Number': 5 } }, 'headers.X-Number'],
  ['the same header name twice in different case', { headers: { 'X-Token': 'a', 'x-token': 'b' } }, 'headers.x-token'],
  ['headers that are not an object', { headers: ['X-A'] }, 'headers'],
  ['an unknown field', { colour: 'red' }, 'colour'],
];

for (const [label, change, path] of invalidCreates) {
  test(`create refuses ${label}: 400 naming ${path}, nothing created`, async (t) => {
    const { key, orgId, appId } = await setup(t);
    const body: Record<string, unknown> = { application_id: appId, url: URL_OK, ...change };
    for (const [k, v] of Object.entries(change)) if (v === undefined) delete body[k];
    const res = await app.request('POST', '/v1/endpoints', { key, body });
    assertError(t, res, 400, 'validation_error');
    t.true(paths(res).includes(path), JSON.stringify(res.body.error));
    t.is(await countRows(orgId), 0);
    t.is(await endpointsCount(t, key, appId), 0);
  });
}

test('create accepts a url of exactly 2048 characters', async (t) => {
  const { key, appId } = await setup(t);
  const url = `https://example.com/${'a'.repeat(2048 - 20)}`;
  const created = await createEndpoint(t, key, { application_id: appId, url });
  t.is(created.url.length, 2048);
  t.is(created.url, url);
});

test('create accepts 20 headers', async (t) => {
  const { key, appId } = await setup(t);
  const headers = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`X-H${i}`, `v${i}`]));
  const created = await createEndpoint(t, key, { application_id: appId, headers });
  t.deepEqual(created.headers, headers);
});

test('with ALLOW_PRIVATE_DESTINATIONS, http:// and private hosts are accepted; length and credential rules stay', async (t) => {
  const { key, orgId, appId } = await setup(t, privateApp);
  for (const url of ['http://hooks.example.com/x', 'http://127.0.0.1:8080/x', 'https://localhost/x', 'https://10.1.2.3/x', 'https://[::1]/x']) {
    const created = await createEndpoint(t, key, { application_id: appId, url }, privateApp);
    t.is(created.url, url);
  }
  t.is(await countRows(orgId, privateApp), 5);
  for (const url of ['ftp://example.com/x', 'not a url', 'http://user:pw@127.0.0.1/x', `http://example.com/${'a'.repeat(2049 - 19)}`]) {
    const res = await privateApp.request('POST', '/v1/endpoints', { key, body: { application_id: appId, url } });
    assertError(t, res, 400, 'validation_error');
    t.deepEqual(paths(res), ['url']);
  }
  t.is(await countRows(orgId, privateApp), 5);
});

test('without ALLOW_PRIVATE_DESTINATIONS, http://127.0.0.1:8080/x is refused', async (t) => {
  const { key, orgId, appId } = await setup(t);
  const res = await app.request('POST', '/v1/endpoints', { key, body: { application_id: appId, url: 'http://127.0.0.1:8080/x' } });
  assertError(t, res, 400, 'validation_error');
  t.deepEqual(paths(res), ['url']);
  t.is(await countRows(orgId), 0);
});

test('unknown event type names: 400 whose message names every unknown one and none of the known', async (t) => {
  const { key, orgId, appId } = await setup(t);
  const known = await createEventType(t, key, 'invoice.paid');
  const res = await app.request('POST', '/v1/endpoints', {
    key, body: { application_id: appId, url: URL_OK, event_types: ['invoice.paid', 'order.shipped', 'user.deleted'] },
  });
  assertError(t, res, 400, 'validation_error');
  t.true(res.body.error.message.includes('order.shipped'), res.body.error.message);
  t.true(res.body.error.message.includes('user.deleted'), res.body.error.message);
  t.false(res.body.error.message.includes('invoice.paid'), res.body.error.message);
  t.is(await countRows(orgId), 0);
  t.is(await subscriberCount(t, key, known), 0);
});

test('an event type of the other environment is unknown to an endpoint', async (t) => {
  const { key, orgId, appId } = await setup(t);
  const testKey = await createKey(t, key, { environment: 'test' });
  const res0 = await app.request('POST', '/v1/event-types', { key: testKey, body: { name: 'invoice.paid' } });
  t.is(res0.status, 201);
  const res = await app.request('POST', '/v1/endpoints', {
    key, body: { application_id: appId, url: URL_OK, event_types: ['invoice.paid'] },
  });
  assertError(t, res, 400, 'validation_error');
  t.true(res.body.error.message.includes('invoice.paid'));
  t.is(await countRows(orgId), 0);
});

test('create subscribes the endpoint: subscriber_count of its event types goes up', async (t) => {
  const { key, appId } = await setup(t);
  const paid = await createEventType(t, key, 'invoice.paid');
  const other = await createEventType(t, key, 'invoice.voided');
  await createEndpoint(t, key, { application_id: appId, event_types: ['invoice.paid'] });
  await createEndpoint(t, key, { application_id: appId, event_types: ['invoice.paid'] });
  t.is(await subscriberCount(t, key, paid), 2);
  t.is(await subscriberCount(t, key, other), 0);
});

// ---------------------------------------------------------------- application_id

test('create with an unknown, malformed, deleted, foreign or other-environment application_id is 404', async (t) => {
  const { key, orgId } = await setup(t);
  const deleted = await createApplication(t, key);
  const del = await app.request('DELETE', `/v1/applications/${deleted}`, { key });
  t.is(del.status, 200);
  const foreign = await setup(t);
  const testKey = await createKey(t, key, { environment: 'test' });
  const testApp = await createApplication(t, testKey);

  for (const applicationId of [newId('app'), 'nope', `ep_${'A'.repeat(27)}`, deleted, foreign.appId, testApp]) {
    const res = await app.request('POST', '/v1/endpoints', { key, body: { application_id: applicationId, url: URL_OK } });
    assertError(t, res, 404, 'not_found');
  }
  // And the other way round: the test key cannot reach a live application.
  const live = await createApplication(t, key);
  const res = await app.request('POST', '/v1/endpoints', { key: testKey, body: { application_id: live, url: URL_OK } });
  assertError(t, res, 404, 'not_found');
  t.is(await countRows(orgId), 0);
  t.is(await countRows(foreign.orgId), 0);
});

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

test('list needs application_id (400); an unknown, malformed, deleted or foreign one is 404', async (t) => {
  const { key } = await setup(t);
  const missing = await app.request('GET', '/v1/endpoints', { key });
  assertError(t, missing, 400, 'validation_error');
  t.deepEqual(paths(missing), ['application_id']);
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

// ---------------------------------------------------------------- patch

test('patch returns the full object and every change persists', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  await createEventType(t, key, 'invoice.voided');
  const created = await createEndpoint(t, key, { application_id: appId, headers: { 'X-Old': 'o' } });
  const res = await app.request('PATCH', `/v1/endpoints/${created.id}`, {
    key,
    body: {
      url: 'https://new.example.com/Hook?A=1', headers: { 'X-New': 'n' }, rate_limit_rps: 5, timeout_ms: 2000,
      event_types: ['invoice.voided', 'invoice.paid'],
    },
  });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.deepEqual(Object.keys(res.body).sort(), FULL_FIELDS);
  t.is(res.body.url, 'https://new.example.com/Hook?A=1');
  t.deepEqual(res.body.headers, { 'X-New': 'n' });
  t.is(res.body.rate_limit_rps, 5);
  t.is(res.body.timeout_ms, 2000);
  t.deepEqual(res.body.event_types, ['invoice.paid', 'invoice.voided']);
  t.is(res.body.status, 'active');
  t.is(res.body.secret, created.secret);
  t.is(res.body.secret_version, 1);
  t.is(res.body.created_at, created.created_at);
  t.is(res.body.id, created.id);
  t.is(res.body.application_id, appId);
  const got = await getEndpoint(key, created.id);
  t.deepEqual(got.body, res.body);
});

test('patch of one field leaves the others alone; an empty patch changes nothing', async (t) => {
  const { key, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  const created = await createEndpoint(t, key, {
    application_id: appId, event_types: ['invoice.paid'], headers: { 'X-A': 'a' }, rate_limit_rps: 9, timeout_ms: 9000,
  });
  const before = (await getEndpoint(key, created.id)).body;
  const res = await app.request('PATCH', `/v1/endpoints/${created.id}`, { key, body: { timeout_ms: 10_000 } });
  t.is(res.status, 200);
  t.deepEqual({ ...res.body, updated_at: before.updated_at }, { ...before, timeout_ms: 10_000 });
  const empty = await app.request('PATCH', `/v1/endpoints/${created.id}`, { key, body: {} });
  t.is(empty.status, 200);
  t.deepEqual(empty.body, res.body);
});

test('patch replaces event_types whole; [] unsubscribes from all', async (t) => {
  const { key, appId } = await setup(t);
  const a = await createEventType(t, key, 'a.created');
  const b = await createEventType(t, key, 'b.created');
  const c = await createEventType(t, key, 'c.created');
  const created = await createEndpoint(t, key, { application_id: appId, event_types: ['a.created', 'b.created'] });
  const res = await app.request('PATCH', `/v1/endpoints/${created.id}`, { key, body: { event_types: ['c.created', 'b.created'] } });
  t.is(res.status, 200);
  t.deepEqual(res.body.event_types, ['b.created', 'c.created']);
  t.deepEqual((await getEndpoint(key, created.id)).body.event_types, ['b.created', 'c.created']);
  t.deepEqual([await subscriberCount(t, key, a), await subscriberCount(t, key, b), await subscriberCount(t, key, c)], [0, 1, 1]);

  const none = await app.request('PATCH', `/v1/endpoints/${created.id}`, { key, body: { event_types: [] } });
  t.is(none.status, 200);
  t.deepEqual(none.body.event_types, []);
  t.deepEqual((await getEndpoint(key, created.id)).body.event_types, []);
  t.deepEqual([await subscriberCount(t, key, a), await subscriberCount(t, key, b), await subscriberCount(t, key, c)], [0, 0, 0]);
});

test('patch status: active to paused and back; "disabled" is 400', async (t) => {
  const { key, appId } = await setup(t);
  const created = await createEndpoint(t, key, { application_id: appId });
  const paused = await app.request('PATCH', `/v1/endpoints/${created.id}`, { key, body: { status: 'paused' } });
  t.is(paused.status, 200);
  t.is(paused.body.status, 'paused');
  t.is((await getEndpoint(key, created.id)).body.status, 'paused');
  const active = await app.request('PATCH', `/v1/endpoints/${created.id}`, { key, body: { status: 'active' } });
  t.is(active.status, 200);
  t.is(active.body.status, 'active');
  t.is((await getEndpoint(key, created.id)).body.status, 'active');
  const disabled = await app.request('PATCH', `/v1/endpoints/${created.id}`, { key, body: { status: 'disabled' } });
  assertError(t, disabled, 400, 'validation_error');
  t.deepEqual(paths(disabled), ['status']);
  const after = await getEndpoint(key, created.id);
  t.is(after.body.status, 'active');
  t.is(after.body.disabled_at, null);
});

test('a disabled endpoint: PATCH status active or paused is 409 invalid_state; PATCH of url still works', async (t) => {
  const { key, appId } = await setup(t);
  const created = await createEndpoint(t, key, { application_id: appId });
  await disable(created.id);
  const before = (await getEndpoint(key, created.id)).body;
  for (const body of [{ status: 'active' }, { status: 'paused' }, { status: 'active', url: 'https://other.example.com/x' }]) {
    assertError(t, await app.request('PATCH', `/v1/endpoints/${created.id}`, { key, body }), 409, 'invalid_state');
  }
  t.deepEqual((await getEndpoint(key, created.id)).body, before);

  const res = await app.request('PATCH', `/v1/endpoints/${created.id}`, { key, body: { url: 'https://moved.example.com/x' } });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.is(res.body.url, 'https://moved.example.com/x');
  t.is(res.body.status, 'disabled');
  t.is(res.body.disabled_at, before.disabled_at);
  t.is(res.body.failure_count, 10);
  t.is((await getEndpoint(key, created.id)).body.url, 'https://moved.example.com/x');
});

test('invalid patches are 400 and change nothing, subscriptions included', async (t) => {
  const { key, appId } = await setup(t);
  const paid = await createEventType(t, key, 'invoice.paid');
  const voided = await createEventType(t, key, 'invoice.voided');
  const created = await createEndpoint(t, key, {
    application_id: appId, event_types: ['invoice.paid'], headers: { 'X-A': 'a' },
  });
  const before = (await getEndpoint(key, created.id)).body;
  const bad: Array<[Record<string, unknown>, string]> = [
    [{ url: 'http://hooks.example.com/x' }, 'url'],
    [{ url: 'https://127.0.0.1/x' }, 'url'],
    [{ url: 'https://user:pw@example.com/x' }, 'url'],
    [{ url: null }, 'url'],
    [{ rate_limit_rps: 0 }, 'rate_limit_rps'],
    [{ rate_limit_rps: 10_001 }, 'rate_limit_rps'],
    [{ timeout_ms: 999 }, 'timeout_ms'],
    [{ timeout_ms: 120_001 }, 'timeout_ms'],
    [{ headers: { Host: 'x' } }, 'headers.Host'],
    [{ headers: { 'X-B': 'b\r\nc' } }, 'headers.X-B'],
    [{ status: 'deleted' }, 'status'],
    [{ application_id: newId('app') }, 'application_id'],
    [{ secret: 'whsec_' + '0'.repeat(64) }, 'secret'],
    [{ url: 'https://ok.example.com/x', timeout_ms: 5 }, 'timeout_ms'],
  ];
  for (const [body, path] of bad) {
    const res = await app.request('PATCH', `/v1/endpoints/${created.id}`, { key, body });
    assertError(t, res, 400, 'validation_error');
    t.true(paths(res).includes(path), `${JSON.stringify(body)}: ${JSON.stringify(res.body.error)}`);
  }
  // Event types partly unknown, alongside valid changes: nothing at all is applied.
  const partly = await app.request('PATCH', `/v1/endpoints/${created.id}`, {
    key, body: { url: 'https://ok.example.com/x', rate_limit_rps: 3, event_types: ['invoice.voided', 'nope.missing'] },
  });
  assertError(t, partly, 400, 'validation_error');
  t.true(partly.body.error.message.includes('nope.missing'));
  t.false(partly.body.error.message.includes('invoice.voided'));

  t.deepEqual((await getEndpoint(key, created.id)).body, before);
  t.is(await subscriberCount(t, key, paid), 1);
  t.is(await subscriberCount(t, key, voided), 0);
});

// ---------------------------------------------------------------- delete

test('delete answers { id, deleted, deleted_at }; the endpoint is then gone everywhere', async (t) => {
  const { key, appId } = await setup(t);
  const eventType = await createEventType(t, key, 'invoice.paid');
  const kept = await createEndpoint(t, key, { application_id: appId });
  const created = await createEndpoint(t, key, { application_id: appId, event_types: ['invoice.paid'] });
  t.is(await endpointsCount(t, key, appId), 2);
  t.is(await subscriberCount(t, key, eventType), 1);

  const res = await app.request('DELETE', `/v1/endpoints/${created.id}`, { key });
  t.is(res.status, 200);
  t.deepEqual(Object.keys(res.body).sort(), ['deleted', 'deleted_at', 'id']);
  t.is(res.body.id, created.id);
  t.is(res.body.deleted, true);
  t.regex(res.body.deleted_at, ISO_MS);

  const path = `/v1/endpoints/${created.id}`;
  assertError(t, await app.request('GET', path, { key }), 404, 'not_found');
  assertError(t, await app.request('PATCH', path, { key, body: { url: 'https://x.example.com/' } }), 404, 'not_found');
  assertError(t, await app.request('DELETE', path, { key }), 404, 'not_found');
  assertError(t, await app.request('POST', `${path}/rotate-secret`, { key }), 404, 'not_found');
  assertError(t, await app.request('POST', `${path}/reset-circuit`, { key }), 404, 'not_found');

  const list = await app.request('GET', `/v1/endpoints?application_id=${appId}`, { key });
  t.deepEqual(ids(list), [kept.id]);
  t.is(list.body.pagination.total, 1);
  t.is(await endpointsCount(t, key, appId), 1);
  t.is(await subscriberCount(t, key, eventType), 0);
  const application = await app.request('GET', `/v1/applications/${appId}`, { key });
  t.deepEqual(application.body.endpoints.map((e: { id: string }) => e.id), [kept.id]);
  // Soft: the row stays, marked deleted, untouched by the failed operations after the delete.
  const row = await app.pool.one(sql.type(z.object({ deleted_at: z.string().nullable(), url: z.string(), secret_version: z.number() }))`
    select deleted_at, url, secret_version from endpoints where id = ${created.id}`);
  t.is(row.deleted_at, res.body.deleted_at);
  t.is(row.url, URL_OK);
  t.is(row.secret_version, 1);
});

// ---------------------------------------------------------------- rotate-secret

const secretsRow = z.object({
  secret: z.string(), old_secret: z.string().nullable(), old_secret_expires_at: z.string().nullable(), secret_version: z.number(),
});

test('rotate-secret: new secret, version + 1, the old one kept 24 h; only the immediately previous secret is kept', async (t) => {
  const { key, appId } = await setup(t);
  const created = await createEndpoint(t, key, { application_id: appId });

  const before = Date.now();
  const first = await app.request('POST', `/v1/endpoints/${created.id}/rotate-secret`, { key });
  const after = Date.now();
  t.is(first.status, 200, JSON.stringify(first.body));
  t.deepEqual(Object.keys(first.body).sort(), ['id', 'old_secret_expires_at', 'secret', 'secret_version']);
  t.is(first.body.id, created.id);
  t.regex(first.body.secret, SECRET);
  t.not(first.body.secret, created.secret);
  t.is(first.body.secret_version, 2);
  t.regex(first.body.old_secret_expires_at, ISO_MS);
  const expires = Date.parse(first.body.old_secret_expires_at);
  const day = 24 * 3600 * 1000;
  t.true(expires >= before + day - 60_000, first.body.old_secret_expires_at);
  t.true(expires <= after + day + 60_000, first.body.old_secret_expires_at);

  const got = await getEndpoint(key, created.id);
  t.is(got.body.secret, first.body.secret);
  t.is(got.body.secret_version, 2);
  const row1 = await app.pool.one(sql.type(secretsRow)`
    select secret, old_secret, old_secret_expires_at, secret_version from endpoints where id = ${created.id}`);
  t.is(row1.old_secret, created.secret);
  t.is(row1.old_secret_expires_at, first.body.old_secret_expires_at);

  const second = await app.request('POST', `/v1/endpoints/${created.id}/rotate-secret`, { key });
  t.is(second.status, 200);
  t.is(second.body.secret_version, 3);
  t.regex(second.body.secret, SECRET);
  t.not(second.body.secret, first.body.secret);
  t.not(second.body.secret, created.secret);
  const row2 = await app.pool.one(sql.type(secretsRow)`
    select secret, old_secret, old_secret_expires_at, secret_version from endpoints where id = ${created.id}`);
  t.is(row2.secret, second.body.secret);
  t.is(row2.old_secret, first.body.secret);
  t.is(row2.secret_version, 3);
  t.is((await getEndpoint(key, created.id)).body.secret, second.body.secret);
  const list = await app.request('GET', `/v1/endpoints?application_id=${appId}`, { key });
  t.false(JSON.stringify(list.body).includes(second.body.secret.slice(6)));
});

// ---------------------------------------------------------------- reset-circuit

test('reset-circuit from disabled: 200 active, failure_count 0, disabled_at cleared', async (t) => {
  const { key, appId } = await setup(t);
  const created = await createEndpoint(t, key, { application_id: appId });
  await disable(created.id);
  const res = await app.request('POST', `/v1/endpoints/${created.id}/reset-circuit`, { key });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.deepEqual(Object.keys(res.body).sort(), ['failure_count', 'id', 'message', 'status']);
  t.is(res.body.id, created.id);
  t.is(res.body.status, 'active');
  t.is(res.body.failure_count, 0);
  t.is(typeof res.body.message, 'string');
  t.true(res.body.message.length > 0);
  const got = await getEndpoint(key, created.id);
  t.is(got.body.status, 'active');
  t.is(got.body.disabled_at, null);
  t.is(got.body.failure_count, 0);
});

test('reset-circuit from active: 200 and failure_count back to 0', async (t) => {
  const { key, appId } = await setup(t);
  const created = await createEndpoint(t, key, { application_id: appId });
  await app.pool.query(sql.unsafe`update endpoints set failure_count = 3 where id = ${created.id}`);
  t.is((await getEndpoint(key, created.id)).body.failure_count, 3);
  const res = await app.request('POST', `/v1/endpoints/${created.id}/reset-circuit`, { key });
  t.is(res.status, 200);
  t.deepEqual(Object.keys(res.body).sort(), ['failure_count', 'id', 'message', 'status']);
  t.is(res.body.status, 'active');
  t.is(res.body.failure_count, 0);
  const got = await getEndpoint(key, created.id);
  t.is(got.body.failure_count, 0);
  t.is(got.body.status, 'active');
  t.is(got.body.disabled_at, null);
});

test('reset-circuit from paused: 409 invalid_state, nothing changes', async (t) => {
  const { key, appId } = await setup(t);
  const created = await createEndpoint(t, key, { application_id: appId });
  t.is((await app.request('PATCH', `/v1/endpoints/${created.id}`, { key, body: { status: 'paused' } })).status, 200);
  await app.pool.query(sql.unsafe`update endpoints set failure_count = 2 where id = ${created.id}`);
  const before = (await getEndpoint(key, created.id)).body;
  assertError(t, await app.request('POST', `/v1/endpoints/${created.id}/reset-circuit`, { key }), 409, 'invalid_state');
  const after = (await getEndpoint(key, created.id)).body;
  t.deepEqual(after, before);
  t.is(after.status, 'paused');
  t.is(after.failure_count, 2);
});

// ---------------------------------------------------------------- counts

test('20 parallel creates then 10 parallel deletes leave endpoints_count 10, equal to the live rows', async (t) => {
  const { key, appId } = await setup(t);
  const creates = await Promise.all(Array.from({ length: 20 }, (_, i) =>
    app.request('POST', '/v1/endpoints', { key, body: { application_id: appId, url: `${URL_OK}/${i}` } })));
  t.deepEqual(creates.map((r) => r.status), new Array(20).fill(201), JSON.stringify(creates.filter((r) => r.status !== 201).map((r) => r.body)));
  const created: string[] = creates.map((r) => r.body.id);
  t.is(new Set(created).size, 20);
  t.is(await endpointsCount(t, key, appId), 20);
  t.is(await countLive(appId), 20);

  const deletes = await Promise.all(created.slice(0, 10).map((id) => app.request('DELETE', `/v1/endpoints/${id}`, { key })));
  t.deepEqual(deletes.map((r) => r.status), new Array(10).fill(200), JSON.stringify(deletes.filter((r) => r.status !== 200).map((r) => r.body)));
  t.is(await endpointsCount(t, key, appId), 10);
  t.is(await countLive(appId), 10);
  const list = await app.request('GET', `/v1/endpoints?application_id=${appId}&per_page=100`, { key });
  t.is(list.body.pagination.total, 10);
  t.deepEqual([...ids(list)].sort(), created.slice(10).sort());
});

test('parallel deletes of the same endpoint: one 200, the rest 404, count decremented once', async (t) => {
  const { key, appId } = await setup(t);
  const kept = await createEndpoint(t, key, { application_id: appId });
  const created = await createEndpoint(t, key, { application_id: appId });
  const results = await Promise.all(Array.from({ length: 5 }, () => app.request('DELETE', `/v1/endpoints/${created.id}`, { key })));
  t.deepEqual(results.map((r) => r.status).sort(), [200, 404, 404, 404, 404]);
  t.is(await endpointsCount(t, key, appId), 1);
  t.is(await countLive(appId), 1);
  t.deepEqual(ids(await app.request('GET', `/v1/endpoints?application_id=${appId}`, { key })), [kept.id]);
});

test('endpoints_count follows a sequence of creates and deletes, and is per application', async (t) => {
  const { key, appId } = await setup(t);
  const otherApp = await createApplication(t, key);
  t.is(await endpointsCount(t, key, appId), 0);
  const a = await createEndpoint(t, key, { application_id: appId });
  const b = await createEndpoint(t, key, { application_id: appId });
  await createEndpoint(t, key, { application_id: otherApp });
  t.is(await endpointsCount(t, key, appId), 2);
  t.is(await endpointsCount(t, key, otherApp), 1);
  t.is((await app.request('DELETE', `/v1/endpoints/${a.id}`, { key })).status, 200);
  t.is(await endpointsCount(t, key, appId), 1);
  assertError(t, await app.request('DELETE', `/v1/endpoints/${a.id}`, { key }), 404, 'not_found');
  t.is(await endpointsCount(t, key, appId), 1);
  // Failed creates count nothing.
  assertError(t, await app.request('POST', '/v1/endpoints', { key, body: { application_id: appId, url: 'http://x.example.com' } }), 400, 'validation_error');
  t.is(await endpointsCount(t, key, appId), 1);
  await createEndpoint(t, key, { application_id: appId });
  t.is(await endpointsCount(t, key, appId), 2);
  // Patches, pauses, rotations and resets do not move it.
  await app.request('PATCH', `/v1/endpoints/${b.id}`, { key, body: { status: 'paused' } });
  await app.request('POST', `/v1/endpoints/${b.id}/rotate-secret`, { key });
  t.is(await endpointsCount(t, key, appId), 2);
  t.is(await countLive(appId), 2);
  t.is(await endpointsCount(t, key, otherApp), 1);
});

// ---------------------------------------------------------------- isolation

test('another organization\'s endpoint is a 404 in every operation, and stays untouched', async (t) => {
  const mine = await setup(t);
  const theirs = await setup(t);
  const endpoint = await createEndpoint(t, theirs.key, { application_id: theirs.appId });
  const before = (await getEndpoint(theirs.key, endpoint.id)).body;
  const path = `/v1/endpoints/${endpoint.id}`;
  const key = mine.key;
  assertError(t, await app.request('GET', path, { key }), 404, 'not_found');
  assertError(t, await app.request('PATCH', path, { key, body: { url: 'https://pwned.example.com/' } }), 404, 'not_found');
  assertError(t, await app.request('PATCH', path, { key, body: { status: 'paused' } }), 404, 'not_found');
  assertError(t, await app.request('DELETE', path, { key }), 404, 'not_found');
  assertError(t, await app.request('POST', `${path}/rotate-secret`, { key }), 404, 'not_found');
  assertError(t, await app.request('POST', `${path}/reset-circuit`, { key }), 404, 'not_found');
  assertError(t, await app.request('GET', `/v1/endpoints?application_id=${theirs.appId}`, { key }), 404, 'not_found');
  t.deepEqual((await getEndpoint(theirs.key, endpoint.id)).body, before);
  t.is(await endpointsCount(t, theirs.key, theirs.appId), 1);
});

test('a test-environment key does not see live endpoints, and the other way round', async (t) => {
  const { key, appId } = await setup(t);
  const live = await createEndpoint(t, key, { application_id: appId });
  const before = (await getEndpoint(key, live.id)).body;
  const testKey = await createKey(t, key, { environment: 'test' });
  const path = `/v1/endpoints/${live.id}`;
  assertError(t, await app.request('GET', path, { key: testKey }), 404, 'not_found');
  assertError(t, await app.request('PATCH', path, { key: testKey, body: { timeout_ms: 5000 } }), 404, 'not_found');
  assertError(t, await app.request('DELETE', path, { key: testKey }), 404, 'not_found');
  assertError(t, await app.request('POST', `${path}/rotate-secret`, { key: testKey }), 404, 'not_found');
  assertError(t, await app.request('POST', `${path}/reset-circuit`, { key: testKey }), 404, 'not_found');
  assertError(t, await app.request('GET', `/v1/endpoints?application_id=${appId}`, { key: testKey }), 404, 'not_found');
  t.deepEqual((await getEndpoint(key, live.id)).body, before);

  const testAppId = await createApplication(t, testKey);
  const sandbox = await createEndpoint(t, testKey, { application_id: testAppId });
  const list = await app.request('GET', `/v1/endpoints?application_id=${testAppId}`, { key: testKey });
  t.deepEqual(ids(list), [sandbox.id]);
  assertError(t, await getEndpoint(key, sandbox.id), 404, 'not_found');
  assertError(t, await app.request('GET', `/v1/endpoints?application_id=${testAppId}`, { key }), 404, 'not_found');
});

test('malformed endpoint ids in the path are 404 in every operation, never 400 or 500', async (t) => {
  const { key } = await setup(t);
  for (const id of ['nope', 'ep_short', `app_${'A'.repeat(27)}`, `ep_${'!'.repeat(27)}`, `ep_${'A'.repeat(28)}`, "ep_' or 1=1 --", newId('ep')]) {
    const path = `/v1/endpoints/${encodeURIComponent(id)}`;
    assertError(t, await app.request('GET', path, { key }), 404, 'not_found');
    assertError(t, await app.request('PATCH', path, { key, body: { timeout_ms: 5000 } }), 404, 'not_found');
    assertError(t, await app.request('DELETE', path, { key }), 404, 'not_found');
    assertError(t, await app.request('POST', `${path}/rotate-secret`, { key }), 404, 'not_found');
    assertError(t, await app.request('POST', `${path}/reset-circuit`, { key }), 404, 'not_found');
  }
});

// ---------------------------------------------------------------- scopes

test('endpoints:read can list and retrieve; every write is 403 forbidden and changes nothing', async (t) => {
  const { key, orgId, appId } = await setup(t);
  const endpoint = await createEndpoint(t, key, { application_id: appId });
  const before = (await getEndpoint(key, endpoint.id)).body;
  const reader = await createKey(t, key, { scopes: ['endpoints:read'] });

  const list = await app.request('GET', `/v1/endpoints?application_id=${appId}`, { key: reader });
  t.is(list.status, 200);
  t.deepEqual(ids(list), [endpoint.id]);
  const one = await getEndpoint(reader, endpoint.id);
  t.is(one.status, 200);
  t.deepEqual(one.body, before);

  const path = `/v1/endpoints/${endpoint.id}`;
  assertError(t, await app.request('POST', '/v1/endpoints', { key: reader, body: { application_id: appId, url: URL_OK } }), 403, 'forbidden');
  assertError(t, await app.request('PATCH', path, { key: reader, body: { status: 'paused' } }), 403, 'forbidden');
  assertError(t, await app.request('DELETE', path, { key: reader }), 403, 'forbidden');
  assertError(t, await app.request('POST', `${path}/rotate-secret`, { key: reader }), 403, 'forbidden');
  assertError(t, await app.request('POST', `${path}/reset-circuit`, { key: reader }), 403, 'forbidden');
  t.deepEqual((await getEndpoint(key, endpoint.id)).body, before);
  t.is(await countRows(orgId), 1);
});

test('endpoints:write can create and read; other families\' scopes cannot reach endpoints', async (t) => {
  const { key, appId } = await setup(t);
  const writer = await createKey(t, key, { scopes: ['endpoints:write'] });
  const created = await createEndpoint(t, writer, { application_id: appId });
  t.is((await getEndpoint(writer, created.id)).status, 200);
  t.is((await app.request('GET', `/v1/endpoints?application_id=${appId}`, { key: writer })).status, 200);
  const other = await createKey(t, key, { scopes: ['applications:write', 'webhooks:write'] });
  assertError(t, await getEndpoint(other, created.id), 403, 'forbidden');
  assertError(t, await app.request('POST', '/v1/endpoints', { key: other, body: { application_id: appId, url: URL_OK } }), 403, 'forbidden');
});

test('an event type force-deleted while an endpoint subscribes to it is a 400, and nothing is half-written', async (t) => {
  const { key } = await app.createOrg();
  const application = await app.request('POST', '/v1/applications', { key, body: { name: 'race' } });
  const eventType = await app.request('POST', '/v1/event-types', { key, body: { name: 'race.started' } });
  // A second connection plays the force delete: it holds the event type's row lock while the
  // create looks the name up and then waits on that lock in its foreign key check.
  const blocker = new pg.Client({ connectionString: app.databaseUrl });
  await blocker.connect();
  try {
    await blocker.query('begin');
    await blocker.query('select 1 from event_types where id = $1 for update', [eventType.body.id]);
    const creating = app.request('POST', '/v1/endpoints', {
      key, body: { application_id: application.body.id, url: 'https://example.com/race', event_types: ['race.started'] },
    });
    let waiting = 0;
    for (let i = 0; i < 200 && waiting === 0; i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      waiting = await app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
        select count(*)::int as n from pg_stat_activity
        where datname = current_database() and wait_event_type = 'Lock' and query like '%insert into endpoint_event_types%'`);
    }
    t.is(waiting, 1, 'the create waits on the event type lock');
    await blocker.query('delete from event_types where id = $1', [eventType.body.id]);
    await blocker.query('commit');
    const res = await creating;
    assertError(t, res, 400, 'validation_error');
    t.is(res.body.error.details[0].path, 'event_types');
  } finally {
    await blocker.end();
  }
  const live = await app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from endpoints where application_id = ${application.body.id}`);
  t.is(live, 0);
  const count = await app.request('GET', `/v1/applications/${application.body.id}`, { key });
  t.is(count.body.endpoints_count, 0);
});
