// A read-only portal token: every GET it may use answers, every write is refused (403) and
// changes nothing, and no response carries a signing secret.
import test from 'ava';
import { assertError, startTestApp } from '../helpers/app.ts';
import { tokenFor, twoApps } from './helpers.ts';

const app = startTestApp();

test('a read-only token reads the application, endpoints, jobs and event types, never a secret', async (t) => {
  const { key, a } = await twoApps(app);
  const token = await tokenFor(t, app, key, a.appId, { read_only: true });
  const evt = (await app.request('GET', '/v1/event-types', { key })).body.data[0].id as string;
  const reads = [
    `/v1/applications/${a.appId}`,
    `/v1/endpoints?application_id=${a.appId}`,
    `/v1/endpoints/${a.endpointId}`,
    `/v1/webhook-jobs?application_id=${a.appId}`,
    `/v1/webhook-jobs/${a.jobId}`,
    '/v1/event-types',
    `/v1/event-types/${evt}`,
  ];
  const secret = (await app.request('GET', `/v1/endpoints/${a.endpointId}`, { key })).body.secret as string;
  t.regex(secret, /^whsec_/, 'the API key sees the secret');
  for (const path of reads) {
    const res = await app.request('GET', path, { key: token });
    t.is(res.status, 200, `GET ${path}: ${JSON.stringify(res.body)}`);
    const text = JSON.stringify(res.body);
    t.false(text.includes('whsec_'), `GET ${path} shows no secret`);
    t.false(text.includes(secret));
  }
  const endpoint = await app.request('GET', `/v1/endpoints/${a.endpointId}`, { key: token });
  t.false('secret' in endpoint.body);
  t.is(endpoint.body.id, a.endpointId);
  t.is(endpoint.body.secret_version, 1, 'every other field is there');
});

test('a read-only token sees the names of custom headers, never their values (a receiver\'s credentials)', async (t) => {
  // A probe read an endpoint's "Authorization: Bearer …" through a read-only link.
  const { key, eventType, a } = await twoApps(app);
  const credential = 'Bearer receiver-credential-1234';
  t.is((await app.request('PATCH', `/v1/endpoints/${a.endpointId}`, { key, body: { headers: { Authorization: credential, 'X-Region': 'eu' } } })).status, 200);
  const job = await app.request('POST', '/v1/webhook-jobs', {
    key, body: { application_id: a.appId, event_type: eventType, payload: { n: 1 }, headers: { 'X-Job-Token': 'job-credential-5678' } },
  });
  t.is(job.status, 201, JSON.stringify(job.body));
  const token = await tokenFor(t, app, key, a.appId, { read_only: true });
  const full = await tokenFor(t, app, key, a.appId);
  const endpoint = await app.request('GET', `/v1/endpoints/${a.endpointId}`, { key: token });
  t.deepEqual(endpoint.body.headers, { Authorization: '********', 'X-Region': '********' });
  t.deepEqual((await app.request('GET', `/v1/webhook-jobs/${job.body.id}`, { key: token })).body.headers, { 'X-Job-Token': '********' });
  for (const path of [`/v1/endpoints/${a.endpointId}`, `/v1/webhook-jobs/${job.body.id}`, `/v1/endpoints?application_id=${a.appId}`, `/v1/applications/${a.appId}`]) {
    const text = JSON.stringify((await app.request('GET', path, { key: token })).body);
    t.false(text.includes('credential'), `GET ${path} shows no header value`);
  }
  // The API key and a full link see them, and the deliveries still carry them (stored unchanged).
  t.is((await app.request('GET', `/v1/endpoints/${a.endpointId}`, { key })).body.headers.Authorization, credential);
  t.is((await app.request('GET', `/v1/endpoints/${a.endpointId}`, { key: full })).body.headers.Authorization, credential);
  t.is((await app.request('GET', `/v1/webhook-jobs/${job.body.id}`, { key: full })).body.headers['X-Job-Token'], 'job-credential-5678');
});

test('a read-only token: every write is a 403 and changes nothing', async (t) => {
  const { key, eventType, a } = await twoApps(app);
  const token = await tokenFor(t, app, key, a.appId, { read_only: true });
  const writes: Array<[string, string, unknown?]> = [
    ['POST', '/v1/endpoints', { application_id: a.appId, url: 'https://hooks.example.com/ro', event_types: [eventType] }],
    ['PATCH', `/v1/endpoints/${a.endpointId}`, { status: 'paused' }],
    ['DELETE', `/v1/endpoints/${a.endpointId}`],
    ['POST', `/v1/endpoints/${a.endpointId}/rotate-secret`],
    ['POST', `/v1/endpoints/${a.endpointId}/reset-circuit`],
    ['POST', `/v1/endpoints/${a.endpointId}/test`],
    ['POST', `/v1/webhook-jobs/${a.jobId}/cancel`],
    ['POST', `/v1/webhook-jobs/${a.jobId}/retry`],
    ['POST', '/v1/webhook-jobs', { application_id: a.appId, event_type: eventType, payload: {} }],
  ];
  for (const [method, path, body] of writes) {
    const res = await app.request(method, path, body === undefined ? { key: token } : { key: token, body });
    assertError(t, res, 403, 'forbidden');
  }
  const rotate = await app.request('POST', `/v1/endpoints/${a.endpointId}/rotate-secret`, { key: token });
  t.regex(rotate.body.error.message, /read-only/);
  // A secret sub-resource, if there is ever one, is refused to read-only tokens before routing.
  assertError(t, await app.request('GET', `/v1/endpoints/${a.endpointId}/secret`, { key: token }), 403, 'forbidden');

  const endpoint = await app.request('GET', `/v1/endpoints/${a.endpointId}`, { key });
  t.is(endpoint.body.status, 'active');
  t.is(endpoint.body.secret_version, 1);
  t.is((await app.request('GET', `/v1/endpoints?application_id=${a.appId}`, { key })).body.pagination.total, 1);
  t.is((await app.request('GET', `/v1/webhook-jobs?application_id=${a.appId}`, { key })).body.pagination.total, 1);
  t.is((await app.request('GET', `/v1/webhook-jobs/${a.jobId}`, { key })).body.status, 'created');
});
