// POST /v1/endpoints: shape, defaults, validation, destination rules as the API applies them, application_id.
import test from 'ava';
import { z } from 'zod';
import { newId } from '../../src/ids.ts';
import { assertError, startTestApp } from '../helpers/app.ts';
import {
  app, CREATE_FIELDS, ISO_MS, SECRET, URL_OK, setup, createApplication, createEventType, createEndpoint, createKey,
  getEndpoint, subscriberCount, endpointsCount, countRows, paths,
} from './helpers.ts';

const privateApp = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true' });

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
  // Spellings the parser repairs, which other readers of the stored URL read otherwise (a probe).
  ['a url with a backslash before @', { url: 'https://example.com\\@evil.com/' }, 'url'],
  ['a url without // after the scheme', { url: 'https:example.com/hook' }, 'url'],
  ['a url with /// after the scheme', { url: 'https:///example.com/hook' }, 'url'],
  ['a host name label of 64 characters', { url: `https://${'a'.repeat(64)}.example.com/` }, 'url'],
  ['a host name of 255 characters', { url: `https://${Array.from({ length: 4 }, () => 'a'.repeat(62)).join('.')}.com/` }, 'url'],
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

test('hundreds of unknown names: the first 20, each at its first place, and how many more', async (t) => {
  const { key, orgId, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  // Each unknown name twice in a row, a known one first: name i is first at place 1 + 2i.
  const unknown = Array.from({ length: 499 }, (_, i) => `order.n${i}`);
  const names = ['invoice.paid', ...unknown.flatMap((n) => [n, n])];
  const res = await app.request('POST', '/v1/endpoints', { key, body: { application_id: appId, url: URL_OK, event_types: names } });
  assertError(t, res, 400, 'validation_error');
  t.is(res.body.error.message, `Unknown event types: ${unknown.slice(0, 20).join(', ')} and 479 more.`);
  t.deepEqual(res.body.error.details, [
    ...unknown.slice(0, 20).map((n, i) => ({ path: `event_types.${1 + 2 * i}`, message: `no event type named "${n}"` })),
    { path: '', message: 'and 479 more problems' },
  ]);
  t.is(await countRows(orgId), 0);
});

test('at most 1,000 event types an endpoint: 1,001 names, or half a million items of any kind, is one problem, the count', async (t) => {
  const { key, orgId, appId } = await setup(t);
  const names = Array.from({ length: 1_001 }, (_, i) => `order.n${i}`);
  const res = await app.request('POST', '/v1/endpoints', { key, body: { application_id: appId, url: URL_OK, event_types: names } });
  assertError(t, res, 400, 'validation_error');
  t.deepEqual(res.body.error.details, [{ path: 'event_types', message: 'must name at most 1000 event types' }]);
  // 500,000 numbers (1 MB): refused for their count, without a problem for each item first.
  const numbers = `[${Array(500_000).fill('1').join(',')}]`;
  const raw = await app.request('POST', '/v1/endpoints', {
    key, rawBody: `{"application_id":"${appId}","url":"${URL_OK}","event_types":${numbers}}`, headers: { 'content-type': 'application/json' },
  });
  assertError(t, raw, 400, 'validation_error');
  t.deepEqual(raw.body.error.details, [{ path: 'event_types', message: 'must name at most 1000 event types' }]);
  t.is(await countRows(orgId), 0);
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
