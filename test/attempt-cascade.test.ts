// An attempt belongs to its delivery. Its job_id, endpoint_id and org_id are copied from the
// delivery for the attempt log's indexes, and have no foreign keys of their own (three index
// lookups per recorded attempt): deleting a job, an endpoint or an organization removes its
// attempts through the delivery's cascade. Here, as a DBA would, in SQL.
import test from 'ava';
import pg from 'pg';
import { startTestApp } from './helpers/app.ts';
import { createApplication, createEndpoint, createEventType } from './helpers/fixtures.ts';

const app = startTestApp();

test('delivery_attempts references only deliveries; deleting a job, an endpoint or an organization removes its attempts', async (t) => {
  const db = new pg.Client({ connectionString: app.databaseUrl });
  await db.connect();
  t.teardown(() => db.end());
  const { rows: keys } = await db.query<{ definition: string }>(`
    select pg_get_constraintdef(oid) as definition from pg_constraint
    where conrelid = 'delivery_attempts'::regclass and contype = 'f'`);
  t.deepEqual(keys.map((k) => k.definition), ['FOREIGN KEY (delivery_id) REFERENCES deliveries(id) ON DELETE CASCADE']);

  // Three jobs, one attempt each: one job is deleted, one endpoint, then the organization.
  const { key, orgId } = await app.createOrg();
  const by = { on: app, key };
  const application = await createApplication(by);
  await createEventType(by, 'cascade.item');
  const endpoints = [
    await createEndpoint(by, { application_id: application.id, url: 'https://example.com/a', event_types: ['cascade.item'] }),
    await createEndpoint(by, { application_id: application.id, url: 'https://example.com/b', event_types: ['cascade.item'] }),
  ];
  const { rows: deliveries } = await db.query<{ id: string; round: number; job_id: string; endpoint_id: string }>(`
    with jobs as (
      insert into webhook_jobs (id, org_id, environment, application_id, event_type, payload, expires_at)
      select 'job_cascade' || lpad(g::text, 20, '0'), $1, 'live', $2, 'cascade.item', '{}'::json, now() + interval '48 hours'
      from generate_series(1, 3) g
      returning id)
    insert into deliveries (job_id, endpoint_id, org_id, application_id, status)
    select id, case when id like '%3' then $4 else $3 end, $1, $2, 'in_flight' from jobs
    returning id, round, job_id, endpoint_id`, [orgId, application.id, endpoints[0].id, endpoints[1].id]);
  const results = deliveries.map((d) => ({
    delivery_id: Number(d.id), round: d.round, attempt: 1, status_code: 200, response_body: '', latency_ms: 5,
    attempted_at: new Date().toISOString(), success: true, error: null, retry_at: null,
  }));
  await db.query('select * from record_attempts($1::jsonb, 5, 30)', [JSON.stringify(results)]);
  const attempts = async () => (await db.query<{ job_id: string }>(
    'select job_id from delivery_attempts where org_id = $1 order by job_id', [orgId])).rows.map((r) => r.job_id);
  t.deepEqual(await attempts(), deliveries.map((d) => d.job_id).sort());

  const [first, second, third] = [...deliveries].sort((a, b) => a.job_id.localeCompare(b.job_id));
  await db.query('delete from webhook_jobs where id = $1', [first!.job_id]);
  t.deepEqual(await attempts(), [second!.job_id, third!.job_id], 'the deleted job\'s attempt is gone');
  await db.query('delete from endpoints where id = $1', [third!.endpoint_id]);
  t.deepEqual(await attempts(), [second!.job_id], 'the deleted endpoint\'s attempt is gone');
  await db.query('delete from organizations where id = $1', [orgId]);
  t.deepEqual(await attempts(), [], 'the deleted organization\'s attempts are gone');
});
