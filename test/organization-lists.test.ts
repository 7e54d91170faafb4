// The organization-wide reads the dashboard's overview is built on, over HTTP with data created
// through the API: GET /v1/webhook-jobs and GET /v1/endpoints without application_id (every
// application of the key's organization and environment, the per-application filters kept),
// `failing` on the endpoint list, and GET /v1/summary (endpoints by health, open deliveries).
// No worker runs: deliveries stay open where the API leaves them.
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { assertError, startTestApp, type Response } from './helpers/app.ts';
import * as fixtures from './helpers/fixtures.ts';

const app = startTestApp();

type Org = { key: string; orgId: string };

const by = (t: ExecutionContext, key: string) => ({ t, on: app, key });
const ids = (res: Response): string[] => (res.body.data as Array<{ id: string }>).map((item) => item.id);
const get = (key: string, path: string) => app.request('GET', path, { key });

async function org(t: ExecutionContext, environment: 'live' | 'test' = 'live'): Promise<Org> {
  const { key, orgId } = await app.createOrg({ environment });
  return { key, orgId };
}

/** Sets how an endpoint has been failing, as the worker's record_attempts would leave it. */
async function failing(endpointId: string, failures: number, status: 'active' | 'disabled' = 'active') {
  await app.pool.query(sql.unsafe`
    update endpoints set failure_count = ${failures}, status = ${status},
      disabled_at = ${status === 'disabled' ? sql.fragment`now()` : null},
      disabled_reason = ${status === 'disabled' ? 'circuit_breaker' : null}
    where id = ${endpointId}`);
}

/** Two applications of one organization, each with an endpoint subscribed to `order.created`. */
async function twoApps(t: ExecutionContext, key: string) {
  await fixtures.createEventType(by(t, key), 'order.created');
  await fixtures.createEventType(by(t, key), 'order.paid');
  const a = (await fixtures.createApplication(by(t, key), { name: 'A' })).id as string;
  const b = (await fixtures.createApplication(by(t, key), { name: 'B' })).id as string;
  const epA = (await fixtures.createEndpoint(by(t, key), { application_id: a, event_types: ['order.created', 'order.paid'] })).id as string;
  const epB = (await fixtures.createEndpoint(by(t, key), { application_id: b, event_types: ['order.created'] })).id as string;
  return { a, b, epA, epB };
}

test('GET /v1/webhook-jobs without application_id: every job of the organization in the key\'s environment, newest first', async (t) => {
  const { key } = await org(t);
  const { a, b } = await twoApps(t, key);
  const jobs: string[] = [];
  for (const [appId, type] of [[a, 'order.created'], [b, 'order.created'], [a, 'order.paid'], [b, 'order.created']] as const) {
    jobs.push((await fixtures.createJob(by(t, key), { application_id: appId, event_type: type, payload: {} })).id);
  }
  // Another organization, and this organization's test environment, each with a job of their own.
  const other = await org(t);
  const otherApps = await twoApps(t, other.key);
  await fixtures.createJob(by(t, other.key), { application_id: otherApps.a, event_type: 'order.created', payload: {} });
  const testKey = (await fixtures.createApiKey(by(t, key), { environment: 'test' })).key as string;
  const testApps = await twoApps(t, testKey);
  const testJob = (await fixtures.createJob(by(t, testKey), { application_id: testApps.a, event_type: 'order.created', payload: {} })).id;

  const all = await get(key, '/v1/webhook-jobs');
  t.is(all.status, 200, JSON.stringify(all.body));
  t.deepEqual(ids(all), [...jobs].reverse());
  t.deepEqual(all.body.pagination, { total: 4, page: 1, per_page: 25, total_pages: 1 });
  for (const item of all.body.data) t.deepEqual(Object.keys(item).sort(), ['created_at', 'event_type', 'id', 'status']);
  t.deepEqual(ids(await get(testKey, '/v1/webhook-jobs')), [testJob]);

  // The filters of the per-application list apply organization-wide.
  t.deepEqual(ids(await get(key, '/v1/webhook-jobs?event_type=order.paid')), [jobs[2]]);
  t.deepEqual(ids(await get(key, '/v1/webhook-jobs?status=created&per_page=2')), [jobs[3], jobs[2]]);
  const page2 = await get(key, '/v1/webhook-jobs?status=created&per_page=2&page=2');
  t.deepEqual(ids(page2), [jobs[1], jobs[0]]);
  t.deepEqual(page2.body.pagination, { total: 4, page: 2, per_page: 2, total_pages: 2 });
  t.deepEqual(ids(await get(key, '/v1/webhook-jobs?status=succeeded')), []);
  const cancelled = await app.request('POST', `/v1/webhook-jobs/${jobs[1]}/cancel`, { key });
  t.is(cancelled.status, 200, JSON.stringify(cancelled.body));
  t.deepEqual(ids(await get(key, '/v1/webhook-jobs?status=discarded')), [jobs[1]]);
  t.deepEqual(ids(await get(key, '/v1/webhook-jobs?status=failed')), [], 'a cancelled job is not a failed one');

  // With application_id: exactly that application's jobs, as before.
  t.deepEqual(ids(await get(key, `/v1/webhook-jobs?application_id=${b}`)), [jobs[3], jobs[1]]);
  assertError(t, await get(key, `/v1/webhook-jobs?application_id=${otherApps.a}`), 404, 'not_found');
  // A foreign endpoint filter is a 404, as a foreign application_id is; a malformed one or an unknown parameter is 400.
  assertError(t, await get(key, `/v1/webhook-jobs?endpoint_id=${otherApps.epA}`), 404, 'not_found');
  assertError(t, await get(key, '/v1/webhook-jobs?endpoint_id=nope'), 400, 'validation_error');
  assertError(t, await get(key, '/v1/webhook-jobs?sort=asc'), 400, 'validation_error');
  // Reading jobs needs webhooks:read, with or without an application.
  const endpointsOnly = (await fixtures.createApiKey(by(t, key), { scopes: ['endpoints:read'] })).key as string;
  assertError(t, await get(endpointsOnly, '/v1/webhook-jobs'), 403, 'forbidden');
});

test('GET /v1/endpoints without application_id: the organization\'s endpoints; status and failing filter them', async (t) => {
  const { key } = await org(t);
  const { a, epA, epB } = await twoApps(t, key);
  const paused = (await fixtures.createEndpoint(by(t, key), { application_id: a })).id as string;
  t.is((await app.request('PATCH', `/v1/endpoints/${paused}`, { key, body: { status: 'paused' } })).status, 200);
  const disabled = (await fixtures.createEndpoint(by(t, key), { application_id: a })).id as string;
  const gone = (await fixtures.createEndpoint(by(t, key), { application_id: a })).id as string;
  t.is((await app.request('DELETE', `/v1/endpoints/${gone}`, { key })).status, 200);
  await failing(epB, 3);
  await failing(disabled, 10, 'disabled');
  const other = await org(t);
  await twoApps(t, other.key);

  const all = await get(key, '/v1/endpoints');
  t.is(all.status, 200, JSON.stringify(all.body));
  t.deepEqual(ids(all), [disabled, paused, epB, epA], 'newest first, the deleted one and other organizations left out');
  t.deepEqual(all.body.pagination, { total: 4, page: 1, per_page: 25, total_pages: 1 });
  t.deepEqual(ids(await get(key, '/v1/endpoints?failing=true')), [disabled, epB]);
  t.deepEqual(ids(await get(key, '/v1/endpoints?failing=false')), [paused, epA]);
  t.deepEqual(ids(await get(key, '/v1/endpoints?status=active&failing=true')), [epB]);
  t.deepEqual(ids(await get(key, '/v1/endpoints?status=disabled')), [disabled]);
  t.deepEqual(ids(await get(key, `/v1/endpoints?application_id=${a}&failing=true`)), [disabled]);
  const page = await get(key, '/v1/endpoints?per_page=3&page=2');
  t.deepEqual(ids(page), [epA]);
  t.deepEqual(page.body.pagination, { total: 4, page: 2, per_page: 3, total_pages: 2 });
  for (const bad of ['failing=yes', 'failing=', 'status=deleted']) {
    assertError(t, await get(key, `/v1/endpoints?${bad}`), 400, 'validation_error');
  }
  const testKey = (await fixtures.createApiKey(by(t, key), { environment: 'test' })).key as string;
  t.deepEqual(ids(await get(testKey, '/v1/endpoints')), [], 'the live endpoints are not the test environment\'s');
});

test('GET /v1/summary: endpoints by health and open deliveries of the key\'s organization and environment', async (t) => {
  const { key } = await org(t);
  const empty = await get(key, '/v1/summary');
  t.is(empty.status, 200, JSON.stringify(empty.body));
  t.deepEqual(empty.body, {
    environment: 'live',
    endpoints: { total: 0, active: 0, paused: 0, disabled: 0, failing: 0 },
    deliveries: { pending: 0, in_flight: 0, held: 0 },
  });

  const { a, b, epB } = await twoApps(t, key);
  const paused = (await fixtures.createEndpoint(by(t, key), { application_id: b, event_types: ['order.created'] })).id as string;
  t.is((await app.request('PATCH', `/v1/endpoints/${paused}`, { key, body: { status: 'paused' } })).status, 200);
  const disabled = (await fixtures.createEndpoint(by(t, key), { application_id: a })).id as string;
  const deleted = (await fixtures.createEndpoint(by(t, key), { application_id: a, event_types: ['order.created'] })).id as string;
  await failing(epB, 2);
  await failing(disabled, 10, 'disabled');
  // Three jobs: two to epA (pending), one to epB (pending) and the paused one (held).
  await fixtures.createJob(by(t, key), { application_id: a, event_type: 'order.created', payload: {} });
  await fixtures.createJob(by(t, key), { application_id: a, event_type: 'order.paid', payload: {} });
  await fixtures.createJob(by(t, key), { application_id: b, event_type: 'order.created', payload: {} });
  // A worker that claims the paused endpoint's delivery holds it (sql/006-claim.sql); no worker runs here.
  await app.pool.query(sql.unsafe`update deliveries set status = 'held' where endpoint_id = ${paused} and status = 'pending'`);
  // Deleting an endpoint drops its open delivery: it leaves the backlog and the counts.
  t.is((await app.request('DELETE', `/v1/endpoints/${deleted}`, { key })).status, 200);
  // Another organization and this organization's test environment count apart.
  const other = await org(t);
  const otherApps = await twoApps(t, other.key);
  await fixtures.createJob(by(t, other.key), { application_id: otherApps.a, event_type: 'order.created', payload: {} });
  const testKey = (await fixtures.createApiKey(by(t, key), { environment: 'test' })).key as string;
  await twoApps(t, testKey);

  const summary = await get(key, '/v1/summary');
  t.is(summary.status, 200, JSON.stringify(summary.body));
  t.deepEqual(summary.body, {
    environment: 'live',
    endpoints: { total: 4, active: 2, paused: 1, disabled: 1, failing: 1 },
    deliveries: { pending: 3, in_flight: 0, held: 1 },
  });
  // The failing count is the total of the list it names.
  t.is((await get(key, '/v1/endpoints?status=active&failing=true&per_page=1')).body.pagination.total, 1);
  t.deepEqual((await get(testKey, '/v1/summary')).body, {
    environment: 'test',
    endpoints: { total: 2, active: 2, paused: 0, disabled: 0, failing: 0 },
    deliveries: { pending: 0, in_flight: 0, held: 0 },
  });
  t.is((await get(other.key, '/v1/summary')).body.deliveries.pending, 1);

  // Scope: endpoints:read (or more); a key without it is refused; parameters are refused.
  const reader = (await fixtures.createApiKey(by(t, key), { scopes: ['endpoints:read'] })).key as string;
  t.is((await get(reader, '/v1/summary')).status, 200);
  const jobsOnly = (await fixtures.createApiKey(by(t, key), { scopes: ['webhooks:write'] })).key as string;
  assertError(t, await get(jobsOnly, '/v1/summary'), 403, 'forbidden');
  assertError(t, await get(key, '/v1/summary?application_id=x'), 400, 'validation_error');
  assertError(t, await app.request('GET', '/v1/summary', {}), 401, 'unauthorized');
});

test('a portal token reads the lists without application_id as its own application\'s, and gets 403 on the summary', async (t) => {
  const { key } = await org(t);
  const { a, b, epA } = await twoApps(t, key);
  const jobA = (await fixtures.createJob(by(t, key), { application_id: a, event_type: 'order.created', payload: {} })).id;
  await fixtures.createJob(by(t, key), { application_id: b, event_type: 'order.created', payload: {} });
  const link = await app.request('POST', `/v1/applications/${a}/portal-links`, { key, body: {} });
  t.is(link.status, 201, JSON.stringify(link.body));
  const token = link.body.token as string;
  t.deepEqual(ids(await get(token, '/v1/webhook-jobs')), [jobA]);
  t.deepEqual(ids(await get(token, '/v1/endpoints')), [epA]);
  assertError(t, await get(token, '/v1/summary'), 403, 'forbidden');
  assertError(t, await get(token, `/v1/webhook-jobs?application_id=${b}`), 404, 'not_found');
});
