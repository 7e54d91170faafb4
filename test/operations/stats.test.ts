// GET /v1/endpoints/{id}/stats and GET /v1/stats (decisions 13/14): per-minute buckets for up
// to 24 h, hourly beyond, up to 7 days, oldest first, empty buckets left out; each bucket equal
// to a count over the attempts table (the per-minute table is kept by record_attempts).
import test from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { assertError, startTestApp } from '../helpers/app.ts';
import { minutesAgo, record, target, type Attempt } from './helpers.ts';

const app = startTestApp();

const bucketRow = z.object({ start: z.string(), attempts: z.number(), successes: z.number(), failures: z.number() });

/** The buckets as a plain count over delivery_attempts: of one endpoint, or of an organization's endpoints. */
function counted(which: { endpointId: string } | { orgId: string }, since: string, bucket: 'minute' | 'hour') {
  const where = 'endpointId' in which
    ? sql.fragment`a.endpoint_id = ${which.endpointId}`
    : sql.fragment`a.org_id = ${which.orgId} and a.endpoint_id in (select id from endpoints where environment = 'live')`;
  return app.pool.any(sql.type(bucketRow)`
    select date_trunc(${bucket}, a.attempted_at, 'UTC') as start, count(*)::int as attempts,
           count(*) filter (where a.success)::int as successes, count(*) filter (where not a.success)::int as failures
    from delivery_attempts a
    where ${where} and a.attempted_at >= date_trunc('minute', ${since}::timestamptz)
    group by 1 order by 1`);
}

const sum = (rows: ReadonlyArray<z.infer<typeof bucketRow>>) => ({
  attempts: rows.reduce((n, r) => n + r.attempts, 0),
  successes: rows.reduce((n, r) => n + r.successes, 0),
  failures: rows.reduce((n, r) => n + r.failures, 0),
});

test('minute buckets by default (24 h), hourly ones for a longer period; equal to a count over the attempts', async (t) => {
  const ep = await target(t, app, ['order.created']);
  const second = await target(t, app, ['order.created'], { key: ep.key, orgId: ep.orgId });
  const foreign = await target(t, app, ['order.created']);
  const now = Date.now();
  // Whole minutes before the start of the previous minute, plus 1-3 s: never across a minute boundary.
  const base = Math.floor(now / 60_000) * 60_000 - 60_000;
  const at = (e: typeof ep, minutes: readonly number[], label: number): Attempt[] => minutes.map((m, i) => ({
    deliveryId: e.deliveries['order.created']!, attempt: label + i, at: new Date(base - m * 60_000 + (i % 3 + 1) * 1000), success: i % 3 !== 1,
  }));
  // Three in one minute, several minutes of one hour, hours and days back, and past 7 days.
  const spread = [0, 0, 0, 2, 3, 59, 61, 180, 1439, 1441, 1500, 3000, 4 * 1440, 6 * 1440 + 1380, 7 * 1440 + 720];
  await record(app, at(ep, spread, 1));
  await record(app, at(second, [1, 5, 2000], 1));
  await record(app, at(foreign, [1, 2, 3], 1));

  const day = await app.request('GET', `/v1/endpoints/${ep.endpointId}/stats`, { key: ep.key });
  t.is(day.status, 200, JSON.stringify(day.body));
  t.is(day.body.bucket, 'minute');
  // The default since: the first minute that starts after 24 h before until (the success rates' window).
  const span = Date.parse(day.body.until) - Date.parse(day.body.since);
  t.true(span > 86_340_000 - 5_000 && span <= 86_400_000, `since defaults to the first minute after 24 h before until (${span} ms)`);
  t.is(Date.parse(day.body.since) % 60_000, 0, 'a minute\'s start');
  const minutes = await counted({ endpointId: ep.endpointId }, day.body.since, 'minute');
  t.deepEqual(day.body.data, minutes);
  t.true(minutes.length >= 6, 'several minute buckets (1439 minutes back is the minute holding 24 h ago: out)');
  t.like(minutes[minutes.length - 1], { start: new Date(base).toISOString(), attempts: 3, successes: 2, failures: 1 }, 'three attempts in the latest minute');
  t.deepEqual(day.body.totals, sum(minutes));
  t.deepEqual(Object.keys(day.body).sort(), ['bucket', 'data', 'since', 'totals', 'until']);

  const since = minutesAgo(7 * 1440 - 10, now).toISOString();
  const week = await app.request('GET', `/v1/endpoints/${ep.endpointId}/stats?since=${since}`, { key: ep.key });
  t.is(week.status, 200, JSON.stringify(week.body));
  t.is(week.body.bucket, 'hour');
  t.is(week.body.since, since);
  const hours = await counted({ endpointId: ep.endpointId }, since, 'hour');
  t.deepEqual(week.body.data, hours);
  t.deepEqual(week.body.totals, sum(hours));
  t.is(week.body.totals.attempts, spread.length - 1, 'everything but the attempt 7.5 days ago');
  const starts = week.body.data.map((b: { start: string }) => b.start);
  t.deepEqual([...starts].sort(), starts, 'oldest first');
  t.true(starts.every((s: string) => s.endsWith(':00:00.000Z')));

  // The organization's stats: both of its endpoints, not the other organization's.
  const org = await app.request('GET', `/v1/stats?since=${since}`, { key: ep.key });
  t.is(org.status, 200, JSON.stringify(org.body));
  t.deepEqual(org.body.data, await counted({ orgId: ep.orgId }, since, 'hour'));
  t.is(org.body.totals.attempts, spread.length - 1 + 3);
  const orgDay = await app.request('GET', '/v1/stats', { key: ep.key });
  t.deepEqual(orgDay.body.data, await counted({ orgId: ep.orgId }, orgDay.body.since, 'minute'));
  const testEnv = await app.request('GET', '/v1/stats', { key: (await app.createOrg({ environment: 'test' })).key });
  t.deepEqual(testEnv.body.totals, { attempts: 0, successes: 0, failures: 0 });
  t.deepEqual(testEnv.body.data, []);
});

test('since more than 7 days ago, in the future or malformed: 400; scope endpoints:read; a foreign endpoint: 404', async (t) => {
  const ep = await target(t, app, ['order.created']);
  const bad = [minutesAgo(7 * 1440 + 5).toISOString(), minutesAgo(-10).toISOString(), 'last-week', '2026-13-01T00:00:00Z'];
  for (const since of bad) {
    assertError(t, await app.request('GET', `/v1/endpoints/${ep.endpointId}/stats?since=${encodeURIComponent(since)}`, { key: ep.key }), 400, 'validation_error');
    assertError(t, await app.request('GET', `/v1/stats?since=${encodeURIComponent(since)}`, { key: ep.key }), 400, 'validation_error');
  }
  assertError(t, await app.request('GET', '/v1/stats?bucket=day', { key: ep.key }), 400, 'validation_error');
  const reader = await app.createOrg({ scopes: ['endpoints:read'] });
  t.is((await app.request('GET', '/v1/stats', { key: reader.key })).status, 200);
  const jobsOnly = await app.createOrg({ scopes: ['webhooks:write'] });
  assertError(t, await app.request('GET', '/v1/stats', { key: jobsOnly.key }), 403, 'forbidden');
  assertError(t, await app.request('GET', `/v1/endpoints/${ep.endpointId}/stats`, { key: reader.key }), 404, 'not_found');
  assertError(t, await app.request('GET', '/v1/stats'), 401, 'unauthorized');
});
