// Rate limits of decisions section 9, counted in PostgreSQL: bursts past each limit, the
// headers, 429s that create nothing, a budget shared by two app instances, windows that
// reset, organizations and endpoints with budgets of their own, and limits set by config.
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { makePool } from '../src/db/pool.ts';
import { makeLogger } from '../src/logger.ts';
import { startWeb } from '../src/web.ts';
import { assertError, startTestApp, type Response, type TestApp } from './helpers/app.ts';

const app = startTestApp();
const low = startTestApp({ RATE_LIMIT_JOBS_PER_SECOND: '3', RATE_LIMIT_API_KEYS_PER_HOUR: '2', RATE_LIMIT_ENDPOINT_TESTS_PER_MINUTE: '2' });

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
  const { key, orgId } = await app.createOrg();
  const responses: Response[] = [];
  for (let i = 0; i < 11; i += 1) responses.push(await app.request('POST', '/v1/api-keys', { key, body: { name: `k${i}` } }));
  const resets = new Set(responses.map((r) => rateHeaders(r).reset));
  t.is(resets.size, 1, 'all in one hourly window (a run across the hour would see two)');
  responses.slice(0, 10).forEach((res, i) => {
    t.is(res.status, 201);
    t.deepEqual(rateHeaders(res), { limit: 10, remaining: 9 - i, reset: [...resets][0] });
  });
  const reset = [...resets][0] ?? 0;
  t.true(reset > Date.now() / 1000 && reset <= Date.now() / 1000 + 3600, `reset ${reset} is within the hour ahead`);
  t.is(reset % 3600, 0, 'hourly windows end on the hour');
  assertLimited(t, responses[10] as Response);
  t.is(await keyCount(app, orgId), 11, 'the root key and 10 created; the refused request created none');
});

test('job creation: 150 requests at once never admit more than 100 per second; refused ones create nothing', async (t) => {
  const { key, appId } = await setupJobs(app);
  // Start just after a second begins, so the burst most likely falls within one window.
  await sleep(1000 - (Date.now() % 1000) + 10);
  const responses = await Promise.all(Array.from({ length: 150 }, () => postJob(app, key, appId)));
  const created = responses.filter((r) => r.status === 201);
  const refused = responses.filter((r) => r.status === 429);
  t.is(created.length + refused.length, 150, `only 201 and 429: ${[...new Set(responses.map((r) => r.status))]}`);
  const perWindow = new Map<number, number>();
  for (const res of created) perWindow.set(rateHeaders(res).reset, (perWindow.get(rateHeaders(res).reset) ?? 0) + 1);
  for (const [reset, admitted] of perWindow) t.true(admitted <= 100, `${admitted} admitted in the window ending ${reset}`);
  const windows = new Set(responses.map((r) => rateHeaders(r).reset));
  if (windows.size === 1) {
    t.is(created.length, 100);
    t.is(refused.length, 50);
  } else {
    t.log(`the burst spanned ${windows.size} one-second windows`);
    t.true(created.length <= 100 * windows.size);
  }
  for (const res of refused.slice(0, 5)) assertLimited(t, res);
  for (const res of responses) t.is(rateHeaders(res).limit, 100);
  t.is(await jobCount(app, appId), created.length, 'no job from a refused request');
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
  const { key, orgId } = await app.createOrg();
  const pool = await makePool(app.databaseUrl, { maximumPoolSize: 2 });
  const second = await startWeb({ pool, config: app.config, logger: makeLogger('silent'), queue: app.queue });
  try {
    const bases = [app.baseUrl, `http://127.0.0.1:${second.port}`];
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
    t.is(await keyCount(app, orgId), 11);
  } finally {
    await second.stop();
    await pool.end();
  }
});

test('organizations do not share budgets', async (t) => {
  const first = await low.createOrg();
  const other = await low.createOrg();
  for (let i = 0; i < 2; i += 1) t.is((await low.request('POST', '/v1/api-keys', { key: first.key, body: { name: 'a' } })).status, 201);
  assertLimited(t, await low.request('POST', '/v1/api-keys', { key: first.key, body: { name: 'a' } }));
  const theirs = await low.request('POST', '/v1/api-keys', { key: other.key, body: { name: 'b' } });
  t.is(theirs.status, 201);
  t.is(rateHeaders(theirs).remaining, 1);
});

test('endpoint test: limited per endpoint per minute; another endpoint has its own budget', async (t) => {
  const { key, appId } = await setupJobs(low);
  const endpoint = async () => (await low.request('POST', '/v1/endpoints', {
    key, body: { application_id: appId, url: 'https://example.com/hook' },
  })).body.id as string;
  const [one, two] = [await endpoint(), await endpoint()];
  const fire = (id: string) => low.request('POST', `/v1/endpoints/${id}/test`, { key });
  const first = await fire(one);
  t.is(first.status, 202);
  t.deepEqual(rateHeaders(first).limit, 2);
  t.is(rateHeaders(first).reset % 60, 0, 'minute windows end on the minute');
  t.is((await fire(one)).status, 202);
  const refused = await fire(one);
  if (rateHeaders(refused).reset === rateHeaders(first).reset) {
    assertLimited(t, refused);
    const jobs = await low.pool.oneFirst(sql.type(count)`
      select count(*)::int as n from deliveries where endpoint_id = ${one}`);
    t.is(jobs, 2, 'the refused test created no job');
  } else {
    t.log('the minute rolled over between requests');
  }
  t.is((await fire(two)).status, 202);
});

test('limits are configuration: the headers and the 429 follow the configured limit', async (t) => {
  const { key, appId } = await setupJobs(low);
  await sleep(1000 - (Date.now() % 1000) + 10);
  const responses = [];
  for (let i = 0; i < 4; i += 1) responses.push(await postJob(low, key, appId));
  const windows = new Set(responses.map((r) => rateHeaders(r).reset));
  t.is(windows.size, 1, 'four sequential requests fit in one second');
  t.deepEqual(responses.map((r) => r.status), [201, 201, 201, 429]);
  t.deepEqual(responses.map((r) => rateHeaders(r).limit), [3, 3, 3, 3]);
  t.deepEqual(responses.map((r) => rateHeaders(r).remaining), [2, 1, 0, 0]);
});

test('operations without a limit carry no rate-limit headers', async (t) => {
  const { key } = await app.createOrg();
  const res = await app.request('GET', '/v1/api-keys', { key });
  t.is(res.status, 200);
  t.is(res.headers.get('x-ratelimit-limit'), null);
});
