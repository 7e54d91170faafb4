// Rate limits of decisions section 9, counted in PostgreSQL: bursts past each limit, the
// headers, 429s that create nothing, a budget shared by two app instances, windows that
// reset, organizations and endpoints with budgets of their own, limits set by config, and
// take_rate_limit itself with the time pinned (no test depends on where a second boundary falls).
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { createApiKey } from '../src/core/api-keys.ts';
import { makePool } from '../src/db/pool.ts';
import { makeLogger } from '../src/logger.ts';
import { startWeb } from '../src/web.ts';
import { assertError, startTestApp, type Response, type TestApp } from './helpers/app.ts';
import { tokenFor, twoApps } from './portal-links/helpers.ts';

// Windows are pinned: the web's clock reads PINNED for these two apps, so every request of a
// test falls into one known window of every period, and each count below is exact.
const PINNED = new Date('2030-06-15T12:34:56.250Z');
const pinned = startTestApp({}, { now: () => PINNED });
const lowLimits = { RATE_LIMIT_JOBS_PER_SECOND: '3', RATE_LIMIT_API_KEYS_PER_HOUR: '2', RATE_LIMIT_ENDPOINT_TESTS_PER_MINUTE: '2', RATE_LIMIT_PORTAL_LINKS_PER_MINUTE: '2' };
const lowPinned = startTestApp(lowLimits, { now: () => PINNED });
// A portal token's sends: 1 a minute per application, beside 4 jobs a second per organization.
const portalPinned = startTestApp({ RATE_LIMIT_JOBS_PER_SECOND: '4', RATE_LIMIT_PORTAL_SENDS_PER_MINUTE: '1' }, { now: () => PINNED });
// The real clock, for a window that really passes.
const low = startTestApp(lowLimits);

/** Unix seconds at which PINNED's window of this period ends. */
const windowEnd = (periodSeconds: number) => (Math.floor(PINNED.getTime() / 1000 / periodSeconds) + 1) * periodSeconds;

const count = z.object({ n: z.number() });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function rateHeaders(res: Response) {
  return {
    limit: Number(res.headers.get('x-ratelimit-limit')),
    remaining: Number(res.headers.get('x-ratelimit-remaining')),
    reset: Number(res.headers.get('x-ratelimit-reset')),
  };
}

/** A 429 in the decisions' shape: Retry-After and error.retry_after, whole seconds, at least 1. */
function assertLimited(t: ExecutionContext, res: Response): void {
  assertError(t, res, 429, 'rate_limit_exceeded');
  const retryAfter = Number(res.headers.get('retry-after'));
  t.true(Number.isInteger(retryAfter) && retryAfter >= 1, `Retry-After ${res.headers.get('retry-after')}`);
  t.is(res.body.error.retry_after, retryAfter);
  t.is(rateHeaders(res).remaining, 0);
}

async function setupJobs(on: TestApp) {
  const org = await on.createOrg();
  const application = await on.request('POST', '/v1/applications', { key: org.key, body: { name: 'limited' } });
  await on.request('POST', '/v1/event-types', { key: org.key, body: { name: 'limit.tested' } });
  return { ...org, appId: application.body.id as string };
}

const postJob = (on: TestApp, key: string, appId: string) =>
  on.request('POST', '/v1/webhook-jobs', { key, body: { application_id: appId, event_type: 'limit.tested', payload: {} } });

const jobCount = (on: TestApp, appId: string) =>
  on.pool.oneFirst(sql.type(count)`select count(*)::int as n from webhook_jobs where application_id = ${appId}`);

const keyCount = (on: TestApp, orgId: string) =>
  on.pool.oneFirst(sql.type(count)`select count(*)::int as n from api_keys where org_id = ${orgId}`);

test('API key creation: 10 per hour; the 11th is a 429 with Retry-After that creates nothing', async (t) => {
  const { key, orgId } = await pinned.createOrg();
  const responses: Response[] = [];
  for (let i = 0; i < 11; i += 1) responses.push(await pinned.request('POST', '/v1/api-keys', { key, body: { name: `k${i}` } }));
  const reset = windowEnd(3600);
  t.is(reset % 3600, 0, 'hourly windows end on the hour');
  responses.slice(0, 10).forEach((res, i) => {
    t.is(res.status, 201);
    t.deepEqual(rateHeaders(res), { limit: 10, remaining: 9 - i, reset });
  });
  assertLimited(t, responses[10] as Response);
  t.is(rateHeaders(responses[10] as Response).reset, reset);
  t.is(Number(responses[10]!.headers.get('retry-after')), Math.ceil(reset - PINNED.getTime() / 1000), 'seconds to the end of the hour');
  t.is(await keyCount(pinned, orgId), 11, 'the root key and 10 created; the refused request created none');
});

test('job creation: 150 requests at once admit exactly 100 in their second; the refused 50 create nothing', async (t) => {
  const { key, appId } = await setupJobs(pinned);
  const responses = await Promise.all(Array.from({ length: 150 }, () => postJob(pinned, key, appId)));
  const created = responses.filter((r) => r.status === 201);
  const refused = responses.filter((r) => r.status === 429);
  t.is(created.length, 100, `statuses: ${[...new Set(responses.map((r) => r.status))]}`);
  t.is(refused.length, 50);
  for (const res of refused.slice(0, 5)) assertLimited(t, res);
  for (const res of responses) t.like(rateHeaders(res), { limit: 100, reset: windowEnd(1) });
  t.deepEqual(created.map((r) => rateHeaders(r).remaining).sort((x, y) => x - y), Array.from({ length: 100 }, (_, i) => i),
    'each admitted request saw its own place in the window');
  t.is(await jobCount(pinned, appId), 100, 'no job from a refused request');
});

test('the window resets: after Retry-After, jobs are accepted again', async (t) => {
  const { key, appId } = await setupJobs(low);
  let res = await postJob(low, key, appId);
  while (res.status === 201) res = await postJob(low, key, appId);
  assertLimited(t, res);
  await sleep(Number(res.headers.get('retry-after')) * 1000);
  const again = await postJob(low, key, appId);
  t.is(again.status, 201, JSON.stringify(again.body));
  t.is(rateHeaders(again).remaining, 2);
});

test('two app instances on the same database share one budget', async (t) => {
  const { key, orgId } = await pinned.createOrg();
  const pool = await makePool(pinned.databaseUrl, { maximumPoolSize: 2 });
  const second = await startWeb({ pool, config: pinned.config, logger: makeLogger('silent'), queue: pinned.queue, now: () => PINNED });
  try {
    const bases = [pinned.baseUrl, `http://127.0.0.1:${second.port}`];
    const statuses: number[] = [];
    for (let i = 0; i < 12; i += 1) {
      const res = await fetch(`${bases[i % 2]}/v1/api-keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: `k${i}` }),
      });
      statuses.push(res.status);
    }
    t.deepEqual(statuses, [...Array(10).fill(201), 429, 429]);
    t.is(await keyCount(pinned, orgId), 11);
  } finally {
    await second.stop();
    await pool.end();
  }
});

test('organizations do not share budgets', async (t) => {
  const first = await lowPinned.createOrg();
  const other = await lowPinned.createOrg();
  for (let i = 0; i < 2; i += 1) t.is((await lowPinned.request('POST', '/v1/api-keys', { key: first.key, body: { name: 'a' } })).status, 201);
  assertLimited(t, await lowPinned.request('POST', '/v1/api-keys', { key: first.key, body: { name: 'a' } }));
  const theirs = await lowPinned.request('POST', '/v1/api-keys', { key: other.key, body: { name: 'b' } });
  t.is(theirs.status, 201);
  t.is(rateHeaders(theirs).remaining, 1);
});

test('endpoint test: limited per endpoint per minute; another endpoint has its own budget', async (t) => {
  const { key, appId } = await setupJobs(lowPinned);
  const endpoint = async () => (await lowPinned.request('POST', '/v1/endpoints', {
    key, body: { application_id: appId, url: 'https://example.com/hook' },
  })).body.id as string;
  const [one, two] = [await endpoint(), await endpoint()];
  const fire = (id: string) => lowPinned.request('POST', `/v1/endpoints/${id}/test`, { key });
  const first = await fire(one);
  t.is(first.status, 202);
  t.deepEqual(rateHeaders(first), { limit: 2, remaining: 1, reset: windowEnd(60) });
  t.is(windowEnd(60) % 60, 0, 'minute windows end on the minute');
  t.is((await fire(one)).status, 202);
  assertLimited(t, await fire(one));
  const jobs = await lowPinned.pool.oneFirst(sql.type(count)`select count(*)::int as n from deliveries where endpoint_id = ${one}`);
  t.is(jobs, 2, 'the refused test created no job');
  t.is((await fire(two)).status, 202);
});

test('test events and retries count against the organization\'s job creation limit, as the jobs they send again are', async (t) => {
  // A probe: from a portal link, 150 test events of 200 KB in 2.6 s over 15 endpoints and 62
  // retries of one job in 10 s, none counted (the next job saw 99 of 100 left).
  const { key, appId } = await setupJobs(lowPinned);
  const endpoints: string[] = [];
  for (let i = 0; i < 3; i += 1) {
    endpoints.push((await lowPinned.request('POST', '/v1/endpoints', { key, body: { application_id: appId, url: `https://example.com/hook/${i}` } })).body.id as string);
  }
  const first = await lowPinned.request('POST', `/v1/endpoints/${endpoints[0]}/test`, { key });
  t.is(first.status, 202);
  t.deepEqual(rateHeaders(first), { limit: 2, remaining: 1, reset: windowEnd(60) }, 'the endpoint\'s own limit in the headers');
  t.is((await lowPinned.request('POST', `/v1/endpoints/${endpoints[1]}/test`, { key })).status, 202);
  const job = await postJob(lowPinned, key, appId);
  t.is(job.status, 201);
  t.is(rateHeaders(job).remaining, 0, 'two test events and this job: the second\'s three');
  const refused = await lowPinned.request('POST', `/v1/endpoints/${endpoints[2]}/test`, { key });
  assertLimited(t, refused);
  t.is(rateHeaders(refused).limit, 3, 'refused by the organization\'s job limit, which the headers name');
  assertLimited(t, await lowPinned.request('POST', `/v1/webhook-jobs/${job.body.id}/retry`, { key }));
  t.is(await lowPinned.pool.oneFirst(sql.type(count)`select count(*)::int as n from deliveries where endpoint_id = ${endpoints[2]!}`), 0, 'the refused test created nothing');
  // Nor did it use up one of its endpoint's tests (a probe's endpoint spent two of three on 429s).
  t.is(await lowPinned.pool.oneFirst(sql.type(count)`
    select coalesce(sum(count), 0)::int as n from rate_limit_counters where key = ${`endpoint-tests:${endpoints[2]!}`}`), 0, 'the endpoint\'s count given back');

  // A retry counts as a job does, even one refused (404), as a malformed job creation does.
  const other = await setupJobs(lowPinned);
  const created = await postJob(lowPinned, other.key, other.appId); // no endpoint: succeeded at once
  t.is(created.status, 201);
  const retries = [];
  retries.push(await lowPinned.request('POST', `/v1/webhook-jobs/${created.body.id}/retry`, { key: other.key }));
  retries.push(await lowPinned.request('POST', '/v1/webhook-jobs/job_3MpNoSuchJobAnywhereInTheDb00/retry', { key: other.key }));
  retries.push(await lowPinned.request('POST', `/v1/webhook-jobs/${created.body.id}/retry`, { key: other.key }));
  t.deepEqual(retries.map((r) => r.status), [200, 404, 429]);
});

test('a portal token\'s retries and test events count first against its application\'s limit, so its customer cannot use up the organization\'s job creations', async (t) => {
  // A probe: a portal link's customer looping on retry took the organization's whole job
  // creation limit, and every job the tenant created answered 429.
  const on = portalPinned;
  const { key, orgId, a, b } = await twoApps(on); // two jobs created: 2 of the organization's 4
  const tokenA = await tokenFor(t, on, key, a.appId);
  const tokenB = await tokenFor(t, on, key, b.appId);
  const counter = (name: string) => on.pool.oneFirst(sql.type(count)`
    select coalesce(sum(count), 0)::int as n from rate_limit_counters where key = ${name}`);

  const first = await on.request('POST', `/v1/webhook-jobs/${a.jobId}/retry`, { key: tokenA });
  t.not(first.status, 429, JSON.stringify(first.body));
  t.deepEqual(rateHeaders(first), { limit: 4, remaining: 1, reset: windowEnd(1) }, 'the organization\'s headers, as for an API key');
  const second = await on.request('POST', `/v1/webhook-jobs/${a.jobId}/retry`, { key: tokenA });
  assertLimited(t, second);
  t.deepEqual(rateHeaders(second), { limit: 1, remaining: 0, reset: windowEnd(60) }, 'refused by the application\'s limit, which the headers name');
  const test = await on.request('POST', `/v1/endpoints/${a.endpointId}/test`, { key: tokenA });
  assertLimited(t, test);
  t.is(rateHeaders(test).limit, 1, 'a test event counts too');
  t.is(await counter(`endpoint-tests:${a.endpointId}`), 0, 'the refused test gave its endpoint\'s count back');
  t.is(await counter(`jobs:${orgId}`), 3, 'the refused sends took nothing from the organization');

  // The tenant's own job creation still has its room.
  const job = await on.request('POST', '/v1/webhook-jobs', { key, body: { application_id: b.appId, event_type: 'order.created', payload: {} } });
  t.is(job.status, 201, JSON.stringify(job.body));
  t.is(rateHeaders(job).remaining, 0);

  // Refused by the organization's limit, a token's send gives its application's count back.
  const full = await on.request('POST', `/v1/webhook-jobs/${b.jobId}/retry`, { key: tokenB });
  assertLimited(t, full);
  t.is(rateHeaders(full).limit, 4, 'the organization\'s limit refused it');
  t.is(await counter(`portal-sends:${b.appId}`), 0);
  t.is(await counter(`portal-sends:${a.appId}`), 1);
});

test('limits are configuration: the headers and the 429 follow the configured limit', async (t) => {
  const { key, appId } = await setupJobs(lowPinned);
  const responses = [];
  for (let i = 0; i < 4; i += 1) responses.push(await postJob(lowPinned, key, appId));
  t.deepEqual(responses.map((r) => r.status), [201, 201, 201, 429]);
  t.deepEqual(responses.map((r) => rateHeaders(r).limit), [3, 3, 3, 3]);
  t.deepEqual(responses.map((r) => rateHeaders(r).remaining), [2, 1, 0, 0]);
});

// A window the web saw fill answers 429 at once (src/api/middleware/rate-limit.ts,
// makeFullWindows): no statement, validation or accept group for a flood past the limit. Before,
// every refused request was counted in the database (the counter went on past the limit).
test('job creation: once this process saw the window fill, later requests of it are 429 without reaching the database; a revoked key still gets its 401', async (t) => {
  const root = await lowPinned.createOrg();
  const application = await lowPinned.request('POST', '/v1/applications', { key: root.key, body: { name: 'limited' } });
  await lowPinned.request('POST', '/v1/event-types', { key: root.key, body: { name: 'limit.tested' } });
  const second = await lowPinned.request('POST', '/v1/api-keys', { key: root.key, body: { name: 'jobs' } });
  const appId = application.body.id as string;
  const counted = () => lowPinned.pool.oneFirst(sql.type(count)`
    select coalesce(max(count), 0)::int as n from rate_limit_counters where key = ${`jobs:${root.orgId}`}`);

  const admitted = [];
  for (let i = 0; i < 3; i += 1) admitted.push(await postJob(lowPinned, second.body.key, appId));
  t.deepEqual(admitted.map((r) => [r.status, rateHeaders(r).remaining]), [[201, 2], [201, 1], [201, 0]]);
  t.is(await counted(), 3);

  const refused = await postJob(lowPinned, second.body.key, appId);
  assertLimited(t, refused);
  t.is(rateHeaders(refused).reset, windowEnd(1));
  t.is(Number(refused.headers.get('retry-after')), Math.ceil(windowEnd(1) - PINNED.getTime() / 1000));
  const badBody = await lowPinned.request('POST', '/v1/webhook-jobs', { key: root.key, body: { application_id: appId } });
  assertLimited(t, badBody);
  t.is(await counted(), 3, 'neither refusal was counted: the window was known full');
  t.is(await jobCount(lowPinned, appId), 3);

  // The key is revoked: its next request gets its 401, not the 429 of the full window.
  t.is((await lowPinned.request('DELETE', `/v1/api-keys/${second.body.id}`, { key: root.key })).status, 200);
  assertError(t, await postJob(lowPinned, second.body.key, appId), 401, 'unauthorized');
  assertLimited(t, await postJob(lowPinned, root.key, appId));
});

test('operations without a limit carry no rate-limit headers', async (t) => {
  const { key } = await pinned.createOrg();
  const res = await pinned.request('GET', '/v1/api-keys', { key });
  t.is(res.status, 200);
  t.is(res.headers.get('x-ratelimit-limit'), null);
});

// ---------------------------------------------------------------- take_rate_limit, time pinned

const taken = z.object({ allowed: z.boolean(), remaining: z.number(), reset_at: z.string(), retry_after: z.number() });
const take = (on: TestApp, key: string, limit: number, period: number, at: string) =>
  on.pool.one(sql.type(taken)`select * from take_rate_limit(${key}, ${limit}, ${period}, ${at}::timestamptz)`);

test('take_rate_limit: fixed windows aligned to the epoch; a new window starts afresh; Retry-After counts to its end', async (t) => {
  const key = `pinned:${Math.random()}`;
  const results = [];
  for (const at of ['2030-01-01T00:00:00.000Z', '2030-01-01T00:00:00.400Z', '2030-01-01T00:00:00.998Z', '2030-01-01T00:00:00.999Z']) {
    results.push(await take(pinned, key, 3, 1, at));
  }
  t.deepEqual(results.map((r) => [r.allowed, r.remaining]), [[true, 2], [true, 1], [true, 0], [false, 0]]);
  t.true(results.every((r) => Date.parse(r.reset_at) === Date.parse('2030-01-01T00:00:01.000Z')));
  t.is(results[3]!.retry_after, 1, 'at least one second, even 1 ms before the end');
  // One millisecond later the next window has its own budget: the documented error bound of
  // fixed windows is up to twice the limit across a boundary.
  const next = await take(pinned, key, 3, 1, '2030-01-01T00:00:01.000Z');
  t.like(next, { allowed: true, remaining: 2 });
  t.is(Date.parse(next.reset_at), Date.parse('2030-01-01T00:00:02.000Z'));
  const hourly = await take(pinned, `${key}:h`, 10, 3600, '2030-01-01T05:59:59.000Z');
  t.is(Date.parse(hourly.reset_at), Date.parse('2030-01-01T06:00:00.000Z'));
  t.is(hourly.retry_after, 1);
  const minute = await take(pinned, `${key}:m`, 1, 60, '2030-01-01T05:58:00.500Z');
  t.like(minute, { allowed: true, retry_after: 60 });
  const refused = await take(pinned, `${key}:m`, 1, 60, '2030-01-01T05:58:10.500Z');
  t.like(refused, { allowed: false, remaining: 0, retry_after: 50 });
});

test('take_rate_limit: 150 concurrent takes at one instant admit exactly the limit', async (t) => {
  const key = `burst:${Math.random()}`;
  const results = await Promise.all(Array.from({ length: 150 }, () => take(pinned, key, 100, 1, '2030-01-01T00:00:00.500Z')));
  t.is(results.filter((r) => r.allowed).length, 100);
  t.deepEqual(results.filter((r) => r.allowed).map((r) => r.remaining).sort((x, y) => x - y), Array.from({ length: 100 }, (_, i) => i));
  t.true(results.filter((r) => !r.allowed).every((r) => r.remaining === 0 && r.retry_after === 1));
});

test('take_rate_limit without a time counts by the database clock', async (t) => {
  const row = await pinned.pool.one(sql.type(taken.extend({ now: z.string() }))`
    select t.*, clock_timestamp()::text as now from take_rate_limit(${`db:${Math.random()}`}, 5, 3600) t`);
  t.like(row, { allowed: true, remaining: 4 });
  const end = Date.parse(row.reset_at);
  t.is(end % 3_600_000, 0);
  t.true(end > Date.now() - 60_000 && end <= Date.now() + 3_600_000 + 60_000, `reset ${row.reset_at} is the end of this hour`);
});

test('job creation counts a malformed request; API key creation, portal links and endpoint tests do not (a typo must not use up 10 an hour), but count a 403', async (t) => {
  const { key, orgId, appId } = await setupJobs(lowPinned);
  const endpointId = (await lowPinned.request('POST', '/v1/endpoints', { key, body: { application_id: appId, url: 'https://example.com/hook' } })).body.id as string;
  // A key that may create keys but not grant `*` (made in SQL: the route's limit is under test).
  const narrow = (await createApiKey(lowPinned.pool, { orgId, environment: 'live', name: 'narrow', scopes: ['api-keys:write'], expiresAt: null })).key;
  // Limits of 2 (API keys, endpoint tests, portal links) and 3 (jobs).
  const jobs = { path: '/v1/webhook-jobs', body: { application_id: appId, event_type: 'limit.tested', payload: {} } };
  const badBody = await lowPinned.request('POST', jobs.path, { key, body: { ...jobs.body, stray: 1 } });
  assertError(t, badBody, 400, 'validation_error');
  t.is(rateHeaders(badBody).remaining, 2, 'a job with an invalid body is counted');
  const badQuery = await lowPinned.request('POST', `${jobs.path}?stray=1`, { key, body: jobs.body });
  assertError(t, badQuery, 400, 'validation_error');
  t.is(rateHeaders(badQuery).remaining, 1, 'so is one with an invalid query string');

  for (const { path, body } of [
    { path: '/v1/api-keys', body: { name: 'k' } },
    { path: `/v1/endpoints/${endpointId}/test`, body: {} },
    { path: `/v1/applications/${appId}/portal-links`, body: {} },
  ]) {
    for (let i = 0; i < 3; i += 1) {
      const refused = await lowPinned.request('POST', i === 0 ? `${path}?stray=1` : path, { key, body: i === 0 ? body : { ...body, stray: i } });
      assertError(t, refused, 400, 'validation_error');
      t.is(refused.headers.get('x-ratelimit-remaining'), null, `${path}: a malformed request is refused before the limit`);
    }
    const first = await lowPinned.request('POST', path, { key, body });
    t.is(rateHeaders(first).remaining, 1, `${path}: the first valid request takes the first of 2`);
  }
  // A key reaching past its own scopes is counted: an escalation attempt is not a typo.
  const reach = await lowPinned.request('POST', '/v1/api-keys', { key: narrow, body: { name: 'wider', scopes: ['*'] } });
  assertError(t, reach, 403, 'forbidden');
  t.is(rateHeaders(reach).remaining, 0);
  assertLimited(t, await lowPinned.request('POST', '/v1/api-keys', { key, body: { name: 'third' } }));
});

test('job creation counts a body that is not JSON, or not JSON at all, and answers it with the limit\'s headers', async (t) => {
  // A probe of the contract: refused by the parser (400, 415), these used up nothing and carried
  // no X-RateLimit-* headers, where docs/api.md §9 says every job creation counts.
  const { key } = await setupJobs(lowPinned);
  const notJson = await lowPinned.request('POST', '/v1/webhook-jobs', { key, rawBody: '{', headers: { 'content-type': 'application/json' } });
  assertError(t, notJson, 400, 'validation_error');
  t.is(rateHeaders(notJson).remaining, 2);
  const text = await lowPinned.request('POST', '/v1/webhook-jobs', { key, rawBody: 'x', headers: { 'content-type': 'text/plain' } });
  assertError(t, text, 415, 'unsupported_media_type');
  t.is(rateHeaders(text).remaining, 1);
});
