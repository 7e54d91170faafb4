// Unknown query parameters are a 400 on every /v1 operation (README: "like unknown body
// fields"), not only on the lists: retrieve and action routes answered 200 to
// `GET /v1/endpoints/{id}?foo=1`, and a POST, PATCH or DELETE with a stray parameter did its
// work. The table holds every authenticated operation of the OpenAPI document (a test fails
// when one is missing, so operations added later join it), each called with a request that
// would otherwise succeed; none may change anything.
import test from 'ava';
import { openApiDocument } from '../src/api/openapi/document.ts';
import { startTestApp, type Response } from './helpers/app.ts';
import { createApplication, createEndpoint, createEventType, createJob } from './helpers/fixtures.ts';

const app = startTestApp();

type Json = Record<string, any>;
const METHODS = ['get', 'post', 'patch', 'put', 'delete'];

/** Every operation of the document that takes a credential: `METHOD /path/{template}`. */
const authenticated = Object.entries((openApiDocument() as Json).paths as Json).flatMap(([path, item]) =>
  Object.entries(item as Json).filter(([method, op]) => METHODS.includes(method) && (op as Json).security.length > 0)
    .map(([method]) => `${method.toUpperCase()} ${path}`));

const UNKNOWN = { error: { code: 'validation_error', message: 'The query string is invalid.', details: [{ path: 'unknown', message: 'unknown field' }] } };

type Fixtures = { key: string; appId: string; uid: string; endpointId: string; eventTypeId: string; jobId: string; keyId: string; opEndpointId: string };

async function fixtures(): Promise<Fixtures> {
  const { key } = await app.createOrg();
  const by = { on: app, key };
  const eventType = await createEventType(by, { name: 'order.created' });
  const uid = 'acme-1';
  const appId = (await createApplication(by, { name: 'Acme', uid })).id as string;
  const endpointId = (await createEndpoint(by, { application_id: appId, event_types: ['order.created'] })).id as string;
  const jobId = (await createJob(by, { application_id: appId, event_type: 'order.created', payload: { n: 1 } })).id as string;
  const keyId = (await app.request('POST', '/v1/api-keys', { key, body: { name: 'other' } })).body.id as string;
  const op = await app.request('POST', '/v1/operational-webhooks/endpoints', { key, body: { url: 'https://ops.example.com/hookline' } });
  return { key, appId, uid, endpointId, eventTypeId: eventType.id as string, jobId, keyId, opEndpointId: op.body.id as string };
}

/** Each operation, as a request that succeeds without the unknown parameter. */
function table(f: Fixtures): Record<string, { path: string; body?: unknown }> {
  const hourAgo = new Date(Date.now() - 3_600_000).toISOString();
  return {
    'POST /v1/api-keys': { path: '/v1/api-keys', body: { name: 'new' } },
    'GET /v1/api-keys': { path: '/v1/api-keys' },
    'GET /v1/api-keys/{id}': { path: `/v1/api-keys/${f.keyId}` },
    'PATCH /v1/api-keys/{id}': { path: `/v1/api-keys/${f.keyId}`, body: { name: 'renamed' } },
    'DELETE /v1/api-keys/{id}': { path: `/v1/api-keys/${f.keyId}` },
    'POST /v1/applications': { path: '/v1/applications', body: { name: 'new' } },
    'GET /v1/applications': { path: '/v1/applications' },
    'GET /v1/applications/by-uid/{uid}': { path: `/v1/applications/by-uid/${f.uid}` },
    'GET /v1/applications/{id}': { path: `/v1/applications/${f.appId}` },
    'PATCH /v1/applications/{id}': { path: `/v1/applications/${f.appId}`, body: { name: 'renamed' } },
    'DELETE /v1/applications/{id}': { path: `/v1/applications/${f.appId}` },
    'POST /v1/applications/{id}/portal-links': { path: `/v1/applications/${f.appId}/portal-links`, body: {} },
    'DELETE /v1/applications/{id}/portal-links': { path: `/v1/applications/${f.appId}/portal-links` },
    'POST /v1/endpoints': { path: '/v1/endpoints', body: { application_id: f.appId, url: 'https://hooks.example.com/new' } },
    'GET /v1/endpoints': { path: '/v1/endpoints' },
    'GET /v1/endpoints/{id}': { path: `/v1/endpoints/${f.endpointId}` },
    'PATCH /v1/endpoints/{id}': { path: `/v1/endpoints/${f.endpointId}`, body: { status: 'paused' } },
    'DELETE /v1/endpoints/{id}': { path: `/v1/endpoints/${f.endpointId}` },
    'POST /v1/endpoints/{id}/restore': { path: `/v1/endpoints/${f.endpointId}/restore` },
    'POST /v1/endpoints/{id}/rotate-secret': { path: `/v1/endpoints/${f.endpointId}/rotate-secret` },
    'POST /v1/endpoints/{id}/reset-circuit': { path: `/v1/endpoints/${f.endpointId}/reset-circuit` },
    'POST /v1/endpoints/{id}/test': { path: `/v1/endpoints/${f.endpointId}/test` },
    'POST /v1/endpoints/{id}/recover': { path: `/v1/endpoints/${f.endpointId}/recover`, body: { since: hourAgo } },
    'GET /v1/endpoints/{id}/attempts': { path: `/v1/endpoints/${f.endpointId}/attempts` },
    'GET /v1/endpoints/{id}/stats': { path: `/v1/endpoints/${f.endpointId}/stats` },
    'GET /v1/stats': { path: '/v1/stats' },
    'POST /v1/event-types': { path: '/v1/event-types', body: { name: 'order.shipped' } },
    'GET /v1/event-types': { path: '/v1/event-types' },
    'GET /v1/event-types/{id}': { path: `/v1/event-types/${f.eventTypeId}` },
    'PATCH /v1/event-types/{id}': { path: `/v1/event-types/${f.eventTypeId}`, body: { description: 'changed' } },
    'DELETE /v1/event-types/{id}': { path: `/v1/event-types/${f.eventTypeId}` },
    'POST /v1/webhook-jobs': { path: '/v1/webhook-jobs', body: { application_id: f.appId, event_type: 'order.created', payload: { n: 2 } } },
    'GET /v1/webhook-jobs': { path: '/v1/webhook-jobs' },
    'GET /v1/webhook-jobs/{id}': { path: `/v1/webhook-jobs/${f.jobId}` },
    'POST /v1/webhook-jobs/{id}/retry': { path: `/v1/webhook-jobs/${f.jobId}/retry` },
    'POST /v1/webhook-jobs/{id}/cancel': { path: `/v1/webhook-jobs/${f.jobId}/cancel` },
    'POST /v1/operational-webhooks/endpoints': { path: '/v1/operational-webhooks/endpoints', body: { url: 'https://ops.example.com/new' } },
    'GET /v1/operational-webhooks/endpoints': { path: '/v1/operational-webhooks/endpoints' },
    'GET /v1/operational-webhooks/endpoints/{id}': { path: `/v1/operational-webhooks/endpoints/${f.opEndpointId}` },
    'PATCH /v1/operational-webhooks/endpoints/{id}': { path: `/v1/operational-webhooks/endpoints/${f.opEndpointId}`, body: { status: 'paused' } },
    'DELETE /v1/operational-webhooks/endpoints/{id}': { path: `/v1/operational-webhooks/endpoints/${f.opEndpointId}` },
    'POST /v1/operational-webhooks/endpoints/{id}/rotate-secret': { path: `/v1/operational-webhooks/endpoints/${f.opEndpointId}/rotate-secret` },
    'GET /v1/operational-webhooks/events': { path: '/v1/operational-webhooks/events' },
    'GET /v1/summary': { path: '/v1/summary' },
    'GET /v1/credential': { path: '/v1/credential' },
  };
}

/** What the organization holds, as GETs show it: any change an operation made shows here. */
async function state(f: Fixtures): Promise<unknown> {
  const read = async (path: string) => {
    const res = await app.request('GET', path, { key: f.key });
    return { status: res.status, body: res.body };
  };
  return {
    keys: await read('/v1/api-keys?limit=100'),
    applications: await read('/v1/applications?per_page=100'),
    application: await read(`/v1/applications/${f.appId}`),
    endpoints: await read('/v1/endpoints?per_page=100'),
    endpoint: await read(`/v1/endpoints/${f.endpointId}`),
    eventTypes: await read('/v1/event-types?limit=100'),
    jobs: await read('/v1/webhook-jobs?per_page=100'),
    job: await read(`/v1/webhook-jobs/${f.jobId}`),
    opEndpoints: await read('/v1/operational-webhooks/endpoints?limit=100'),
    opEndpoint: await read(`/v1/operational-webhooks/endpoints/${f.opEndpointId}`),
  };
}

const call = (f: Fixtures, method: string, path: string, body: unknown): Promise<Response> =>
  app.request(method, path, body === undefined ? { key: f.key } : { key: f.key, body });

test('every authenticated /v1 operation answers an unknown query parameter with a 400 naming it, and does nothing', async (t) => {
  const f = await fixtures();
  const rows = table(f);
  t.deepEqual(Object.keys(rows).sort(), [...authenticated].sort(), 'the table holds every authenticated operation of the document');
  const before = await state(f);
  for (const [operation, { path, body }] of Object.entries(rows)) {
    const method = operation.split(' ')[0]!;
    const res = await call(f, method, `${path}?unknown=1`, body);
    t.is(res.status, 400, `${operation}?unknown=1 answered ${res.status} ${JSON.stringify(res.body)}`);
    t.deepEqual(res.body, UNKNOWN, operation);
    // Beside a parameter the operation defines, or an empty one, it is still named.
    const mixed = await call(f, method, `${path}?limit=1&unknown=`, body);
    t.is(mixed.status, 400, `${operation}?limit=1&unknown= answered ${mixed.status}`);
    t.true((mixed.body.error.details as Json[]).some((detail) => detail.path === 'unknown' && detail.message === 'unknown field'), operation);
  }
  t.deepEqual(await state(f), before, 'no refused request changed anything');
});

test('a retrieve or action route names every unknown parameter exactly as a list route does', async (t) => {
  const f = await fixtures();
  const list = await call(f, 'GET', '/v1/endpoints?foo=1&bar=2', undefined);
  t.is(list.status, 400);
  for (const [method, path] of [['GET', `/v1/endpoints/${f.endpointId}`], ['POST', `/v1/endpoints/${f.endpointId}/rotate-secret`],
    ['DELETE', `/v1/applications/${f.appId}`], ['GET', '/v1/credential'], ['GET', '/v1/summary']] as const) {
    const res = await call(f, method, `${path}?foo=1&bar=2`, undefined);
    t.deepEqual({ status: res.status, body: res.body }, { status: list.status, body: list.body }, `${method} ${path}`);
  }
  t.deepEqual(list.body.error.details, [{ path: 'foo', message: 'unknown field' }, { path: 'bar', message: 'unknown field' }]);
});

test('defined parameters still work, and an empty query string is no parameter', async (t) => {
  const f = await fixtures();
  for (const path of [`/v1/endpoints/${f.endpointId}?`, `/v1/endpoints/${f.endpointId}/attempts?limit=1&status=failed`,
    `/v1/endpoints/${f.endpointId}/stats?since=${new Date(Date.now() - 3_600_000).toISOString()}`, '/v1/stats?since=' + new Date(Date.now() - 7_200_000).toISOString(),
    `/v1/webhook-jobs?application_id=${f.appId}&status=created`, `/v1/endpoints?application_id=${f.appId}&failing=false`, '/v1/credential?', '/v1/summary?']) {
    const res = await call(f, 'GET', path, undefined);
    t.is(res.status, 200, `${path}: ${JSON.stringify(res.body)}`);
  }
  // DELETE /v1/event-types/{id} defines force: a subscribed event type goes with force=true.
  t.is((await call(f, 'DELETE', `/v1/event-types/${f.eventTypeId}`, undefined)).status, 409);
  t.is((await call(f, 'DELETE', `/v1/event-types/${f.eventTypeId}?force=true&unknown=1`, undefined)).status, 400);
  const forced = await call(f, 'DELETE', `/v1/event-types/${f.eventTypeId}?force=true`, undefined);
  t.is(forced.status, 200, JSON.stringify(forced.body));
  t.true(forced.body.deleted);
});

test('HEAD follows its GET: 200 without a query, 400 with an unknown parameter', async (t) => {
  const f = await fixtures();
  const head = (path: string) => fetch(`${app.baseUrl}${path}`, { method: 'HEAD', headers: { authorization: `Bearer ${f.key}` } });
  for (const path of [`/v1/endpoints/${f.endpointId}`, `/v1/webhook-jobs/${f.jobId}`, '/v1/credential', '/v1/endpoints']) {
    t.is((await head(path)).status, 200, path);
    t.is((await head(`${path}?unknown=1`)).status, 400, `${path}?unknown=1`);
  }
});

test('job creation: an unknown parameter is a 400 after the key is checked, and no job is created', async (t) => {
  const f = await fixtures();
  const body = { application_id: f.appId, event_type: 'order.created', payload: { n: 3 }, event_id: 'query-typo' };
  const wrongKey = await app.request('POST', '/v1/webhook-jobs?unknown=1', { key: 'sk_live_wrong', body });
  t.is(wrongKey.status, 401, 'the key first, as for an invalid body');
  const refused = await app.request('POST', '/v1/webhook-jobs?unknown=1', { key: f.key, body });
  t.deepEqual({ status: refused.status, body: refused.body }, { status: 400, body: UNKNOWN });
  const created = await app.request('POST', '/v1/webhook-jobs?', { key: f.key, body });
  t.is(created.status, 201, 'the event_id was not taken by the refused request');
  // The public document takes any query string (tools add cache busters); so does /health.
  t.is((await app.request('GET', '/v1/openapi.json?v=1')).status, 200);
});

test('thirty unknown parameters or body fields: the first 20 named, and "and 10 more problems"', async (t) => {
  const f = await fixtures();
  const names = Array.from({ length: 30 }, (_, i) => `p${i}`);
  const expected = [...names.slice(0, 20).map((path) => ({ path, message: 'unknown field' })), { path: '', message: 'and 10 more problems' }];
  const query = await call(f, 'GET', `/v1/endpoints/${f.endpointId}?${names.map((n) => `${n}=1`).join('&')}`, undefined);
  t.is(query.status, 400);
  t.deepEqual(query.body.error.details, expected);
  const body = await call(f, 'POST', '/v1/applications', { name: 'new', ...Object.fromEntries(names.map((n) => [n, 1])) });
  t.is(body.status, 400);
  t.deepEqual(body.body.error.details, expected);
});

test('a parameter given twice is a 400 saying so, not that its value is wrong', async (t) => {
  // A probe: `?type=endpoint.created&type=endpoint.deleted` was answered "must be one of …".
  const { key } = await app.createOrg();
  const res = await app.request('GET', '/v1/operational-webhooks/events?type=endpoint.created&type=endpoint.deleted', { key });
  t.is(res.status, 400);
  t.deepEqual(res.body.error.details, [{ path: 'type', message: 'is given 2 times: give it once' }]);
  const perPage = await app.request('GET', '/v1/applications?per_page=5&per_page=6&per_page=7', { key });
  t.is(perPage.status, 400);
  t.deepEqual(perPage.body.error.details, [{ path: 'per_page', message: 'is given 3 times: give it once' }]);
});

/** The operations of the document that take no request body and are not reads. */
const bodiless = Object.entries((openApiDocument() as Json).paths as Json).flatMap(([path, item]) =>
  Object.entries(item as Json).filter(([method, op]) => ['post', 'patch', 'put', 'delete'].includes(method)
    && (op as Json).security.length > 0 && (op as Json).requestBody === undefined)
    .map(([method]) => `${method.toUpperCase()} ${path}`));

test('every operation that takes no body answers a body with a field with a 400 naming it, and does nothing; {} is no field', async (t) => {
  // A probe of the contract: rotate-secret, reset-circuit, retry, a delete… took any JSON
  // object and did their work (a retry sent {"since": …} by mistake ran silently).
  const f = await fixtures();
  const rows = table(f);
  t.true(bodiless.length >= 10, bodiless.join(', '));
  const before = await state(f);
  for (const operation of bodiless) {
    const method = operation.split(' ')[0]!;
    const res = await call(f, method, rows[operation]!.path, { since: '2026-11-30T00:00:00Z' });
    t.is(res.status, 400, `${operation} with a body answered ${res.status} ${JSON.stringify(res.body)}`);
    t.deepEqual(res.body.error.details, [{ path: 'since', message: 'unknown field' }], operation);
    const array = await call(f, method, rows[operation]!.path, [1]);
    t.is(array.status, 400, `${operation} with [1] answered ${array.status}`);
  }
  t.deepEqual(await state(f), before, 'no refused request changed anything');
  const rotated = await call(f, 'POST', `/v1/endpoints/${f.endpointId}/rotate-secret`, {});
  t.is(rotated.status, 200, 'an empty object is no body');
  t.log(bodiless.join(', '));
});
