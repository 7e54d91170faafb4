// What a portal token of application A may do through the /v1 API: every operation on A's
// endpoints, read/list/retry/cancel on A's jobs, reading event types and A itself; 404 for
// application B's resources wherever B's id appears (path, body, list query), and 403 for
// every operation a token may never use. B is checked untouched afterwards.
import test from 'ava';
import { tokenAllows } from '../../src/core/scopes.ts';
import { assertError, startTestApp } from '../helpers/app.ts';
import { tokenFor, twoApps } from './helpers.ts';

const app = startTestApp();

test('a token of A: every endpoint operation on A, its jobs, event types and A itself', async (t) => {
  const { key, eventType, a } = await twoApps(app);
  const token = await tokenFor(t, app, key, a.appId);
  const call = (method: string, path: string, body?: unknown) => app.request(method, path, body === undefined ? { key: token } : { key: token, body });

  const application = await call('GET', `/v1/applications/${a.appId}`);
  t.is(application.status, 200);
  t.deepEqual(application.body.endpoints.map((e: { id: string }) => e.id), [a.endpointId]);

  const list = await call('GET', `/v1/endpoints?application_id=${a.appId}`);
  t.is(list.status, 200);
  t.deepEqual(list.body.data.map((e: { id: string }) => e.id), [a.endpointId]);
  const one = await call('GET', `/v1/endpoints/${a.endpointId}`);
  t.is(one.status, 200);
  t.regex(one.body.secret, /^whsec_/, 'a token that is not read-only sees the secret');

  const created = await call('POST', '/v1/endpoints', { application_id: a.appId, url: 'https://hooks.example.com/second', event_types: [eventType] });
  t.is(created.status, 201, JSON.stringify(created.body));
  const id = created.body.id as string;
  t.is((await call('PATCH', `/v1/endpoints/${id}`, { status: 'paused' })).body.status, 'paused');
  t.is((await call('PATCH', `/v1/endpoints/${id}`, { status: 'active' })).status, 200);
  t.is((await call('POST', `/v1/endpoints/${id}/rotate-secret`)).body.secret_version, 2);
  t.is((await call('POST', `/v1/endpoints/${id}/reset-circuit`)).status, 200);
  const queued = await call('POST', `/v1/endpoints/${id}/test`);
  t.is(queued.status, 202);
  t.is((await call('GET', `/v1/webhook-jobs/${queued.body.job_id}`)).status, 200, 'the test job is the application\'s job');
  t.is((await call('DELETE', `/v1/endpoints/${id}`)).status, 200);

  const jobs = await call('GET', `/v1/webhook-jobs?application_id=${a.appId}`);
  t.is(jobs.status, 200);
  t.true(jobs.body.data.some((j: { id: string }) => j.id === a.jobId));
  t.is((await call('GET', `/v1/webhook-jobs/${a.jobId}`)).status, 200);
  t.is((await call('POST', `/v1/webhook-jobs/${a.jobId}/cancel`)).body.status, 'discarded');
  t.is((await call('POST', `/v1/webhook-jobs/${a.jobId}/retry`)).body.status, 'created');

  const types = await call('GET', '/v1/event-types');
  t.is(types.status, 200);
  t.deepEqual(types.body.data.map((e: { name: string }) => e.name), [eventType]);
  t.is((await call('GET', `/v1/event-types/${types.body.data[0].id}`)).body.description, 'An order was placed.');
});

test('a token of A gets 404 for B: ids in paths, in a body and in list queries; B is untouched', async (t) => {
  const { key, eventType, a, b } = await twoApps(app);
  const token = await tokenFor(t, app, key, a.appId);
  const call = (method: string, path: string, body?: unknown) => app.request(method, path, body === undefined ? { key: token } : { key: token, body });
  const refusals: Array<[string, string, unknown?]> = [
    ['GET', `/v1/applications/${b.appId}`],
    ['GET', `/v1/endpoints?application_id=${b.appId}`],
    ['GET', `/v1/endpoints/${b.endpointId}`],
    ['PATCH', `/v1/endpoints/${b.endpointId}`, { status: 'paused' }],
    ['POST', `/v1/endpoints/${b.endpointId}/rotate-secret`],
    ['POST', `/v1/endpoints/${b.endpointId}/reset-circuit`],
    ['POST', `/v1/endpoints/${b.endpointId}/test`],
    ['DELETE', `/v1/endpoints/${b.endpointId}`],
    ['POST', '/v1/endpoints', { application_id: b.appId, url: 'https://hooks.example.com/x', event_types: [eventType] }],
    ['GET', `/v1/webhook-jobs?application_id=${b.appId}`],
    ['GET', `/v1/webhook-jobs/${b.jobId}`],
    ['POST', `/v1/webhook-jobs/${b.jobId}/cancel`],
    ['POST', `/v1/webhook-jobs/${b.jobId}/retry`],
  ];
  for (const [method, path, body] of refusals) {
    const res = await call(method, path, body);
    t.is(res.status, 404, `${method} ${path}: ${JSON.stringify(res.body)}`);
    assertError(t, res, 404, 'not_found');
  }
  // A filter naming B's endpoint within A's job list is a 404, as B's id is anywhere else (decisions 14).
  const filtered = await call('GET', `/v1/webhook-jobs?application_id=${a.appId}&endpoint_id=${b.endpointId}`);
  assertError(t, filtered, 404, 'not_found');

  // B as its owner sees it: nothing changed, nothing added.
  const endpoint = await app.request('GET', `/v1/endpoints/${b.endpointId}`, { key });
  t.is(endpoint.body.status, 'active');
  t.is(endpoint.body.secret_version, 1);
  t.is((await app.request('GET', `/v1/endpoints?application_id=${b.appId}`, { key })).body.pagination.total, 1);
  t.is((await app.request('GET', `/v1/webhook-jobs/${b.jobId}`, { key })).body.status, 'created');
  t.is((await app.request('GET', `/v1/webhook-jobs?application_id=${b.appId}`, { key })).body.pagination.total, 1);
});

test('a token of A gets 403 for API keys, applications, job creation, portal links and event type changes', async (t) => {
  const { key, eventType, a } = await twoApps(app);
  const token = await tokenFor(t, app, key, a.appId);
  const evt = (await app.request('GET', '/v1/event-types', { key })).body.data[0].id as string;
  const forbidden: Array<[string, string, unknown?]> = [
    ['GET', '/v1/api-keys'],
    ['POST', '/v1/api-keys', { name: 'escalate' }],
    ['GET', '/v1/api-keys/key_3MRoiVPSnLFTg3GfRKw6aSZ1y1j'],
    ['GET', '/v1/applications'],
    ['POST', '/v1/applications', { name: 'mine now' }],
    ['GET', '/v1/applications/by-uid/anything'],
    ['PATCH', `/v1/applications/${a.appId}`, { name: 'renamed' }],
    ['DELETE', `/v1/applications/${a.appId}`],
    ['POST', `/v1/applications/${a.appId}/portal-links`],
    ['DELETE', `/v1/applications/${a.appId}/portal-links`],
    ['POST', '/v1/webhook-jobs', { application_id: a.appId, event_type: eventType, payload: {} }],
    ['POST', '/v1/event-types', { name: 'token.made' }],
    ['PATCH', `/v1/event-types/${evt}`, { description: 'changed' }],
    ['DELETE', `/v1/event-types/${evt}`],
  ];
  for (const [method, path, body] of forbidden) {
    const res = await app.request(method, path, body === undefined ? { key: token } : { key: token, body });
    t.is(res.status, 403, `${method} ${path}: ${JSON.stringify(res.body)}`);
    assertError(t, res, 403, 'forbidden');
  }
  // Nothing was made or changed by the refused calls.
  t.is((await app.request('GET', `/v1/applications/${a.appId}`, { key })).body.name, 'A');
  t.is((await app.request('GET', '/v1/applications', { key })).body.pagination.total, 2);
  t.is((await app.request('GET', `/v1/webhook-jobs?application_id=${a.appId}`, { key })).body.pagination.total, 1);
});

test('the token rules refuse collections they do not name: /v1/stats and any added later', (t) => {
  // GET /v1/stats (organization-wide) and operational webhooks are refused without a rule of
  // their own; every operation under /v1/endpoints (attempts, stats, recover, restore) is allowed.
  t.false(tokenAllows(false, 'stats', 'GET', []).allowed);
  t.false(tokenAllows(false, 'operational-webhooks', 'GET', ['endpoints']).allowed);
  t.true(tokenAllows(false, 'endpoints', 'GET', ['ep_x', 'attempts']).allowed);
  t.true(tokenAllows(false, 'endpoints', 'POST', ['ep_x', 'recover']).allowed);
  t.true(tokenAllows(true, 'endpoints', 'GET', ['ep_x', 'stats']).allowed);
  t.false(tokenAllows(true, 'endpoints', 'POST', ['ep_x', 'restore']).allowed);
  t.false(tokenAllows(true, 'endpoints', 'GET', ['ep_x', 'secret']).allowed);
});

test('an API key is not limited by the token rules: it still lists every application', async (t) => {
  const { key } = await twoApps(app);
  t.is((await app.request('GET', '/v1/applications', { key })).body.pagination.total, 2);
});

test('a token reads its own application\'s subscriber count of an event type, not the organization\'s', async (t) => {
  // A probe read, with A's token, how many of the organization's endpoints (its other
  // customers') take each event type.
  const { key, eventType, a, b } = await twoApps(app);
  for (let n = 0; n < 2; n += 1) {
    t.is((await app.request('POST', '/v1/endpoints', { key, body: { application_id: b.appId, url: `https://hooks.example.com/b${n}`, event_types: [eventType] } })).status, 201);
  }
  const token = await tokenFor(t, app, key, a.appId);
  const byKey = (await app.request('GET', '/v1/event-types', { key })).body.data[0];
  t.is(byKey.subscriber_count, 4, 'the organization: A\'s one, B\'s three');
  const listed = (await app.request('GET', '/v1/event-types', { key: token })).body.data[0];
  t.is(listed.subscriber_count, 1, 'A\'s own');
  t.is((await app.request('GET', `/v1/event-types/${listed.id}`, { key: token })).body.subscriber_count, 1);
  t.is((await app.request('DELETE', `/v1/endpoints/${a.endpointId}`, { key: token })).status, 200);
  t.is((await app.request('GET', `/v1/event-types/${listed.id}`, { key: token })).body.subscriber_count, 0, 'a deleted endpoint no longer counts');
});
