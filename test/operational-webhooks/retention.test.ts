// Retention of operational events: run_retention() (sql/013-retention.sql) deletes events older
// than ATTEMPT_RETENTION_DAYS once none of their deliveries is pending or in flight, with their
// deliveries and attempts; a recent event, or an old one still being delivered, stays. Events
// are written by real API changes; only their age and delivery state are moved in SQL.
import test from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { runRetention, runRetentionBatch } from '../../src/db/retention.ts';
import { startTestApp } from '../helpers/app.ts';
import { createApplication, createEndpoint } from '../helpers/fixtures.ts';
import { OP_PATH } from './helpers.ts';

const app = startTestApp({ ATTEMPT_RETENTION_DAYS: '10' });
const settings = () => ({ attemptDays: app.config.retention.attemptDays, archivedJobDays: app.config.retention.archivedJobDays });
const EVENTS = '/v1/operational-webhooks/events';

test('old finished operational events go with their deliveries; recent or unfinished ones stay', async (t) => {
  await runRetention(app.pool, settings()); // nothing of another test counts below
  const { key } = await app.createOrg();
  const by = { on: app, key, t };
  t.is((await app.request('POST', OP_PATH, { key, body: { url: 'https://ops.example.com/a' } })).status, 201);
  const application = await createApplication(by);
  const endpoints = [];
  for (const name of ['old-done', 'old-retrying', 'recent-done']) {
    endpoints.push((await createEndpoint(by, { application_id: application.id, url: `https://hooks.example.com/${name}` })).id as string);
  }
  const events = (await app.request('GET', EVENTS, { key })).body.data as Array<{ id: string; data: { id: string } }>;
  const eventOf = (endpointId: string) => events.find((e) => e.data.id === endpointId)!.id;
  const [oldDone, oldRetrying, recentDone] = endpoints.map(eventOf) as [string, string, string];
  await app.pool.query(sql.unsafe`
    update operational_events set created_at = now() - interval '11 days' where id = any(${sql.array([oldDone, oldRetrying], 'text')})`);
  await app.pool.query(sql.unsafe`
    update operational_deliveries set status = 'succeeded', attempt_count = 1 where event_id = any(${sql.array([oldDone, recentDone], 'text')})`);
  await app.pool.query(sql.unsafe`
    insert into operational_attempts (delivery_id, attempt, status_code, latency_ms, attempted_at, success)
    select id, 1, 200, 3, now(), true from operational_deliveries where event_id = ${oldDone}`);

  const deleted = await runRetentionBatch(app.pool, settings(), 10_000);
  t.is(deleted.operational_events, 1);
  const left = await app.pool.anyFirst(sql.type(z.object({ id: z.string() }))`
    select id from operational_events where id = any(${sql.array([oldDone, oldRetrying, recentDone], 'text')}) order by id`);
  t.deepEqual([...left], [oldRetrying, recentDone].sort());
  const orphans = await app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select (select count(*) from operational_deliveries where event_id = ${oldDone})
         + (select count(*) from operational_attempts a where not exists (select 1 from operational_deliveries d where d.id = a.delivery_id))::int as n`);
  t.is(orphans, 0, 'its deliveries and attempts went with it');
  t.deepEqual((await app.request('GET', EVENTS, { key })).body.data.map((e: { id: string }) => e.id).includes(oldDone), false);

  // Once its delivery is over, the old one still retrying goes too.
  await app.pool.query(sql.unsafe`update operational_deliveries set status = 'failed' where event_id = ${oldRetrying}`);
  t.is((await runRetentionBatch(app.pool, settings(), 10_000)).operational_events, 1);
});
