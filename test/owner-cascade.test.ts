// A job belongs to its application and a delivery to its job. Their org_id (and a delivery's
// application_id) are copied at creation for the lists' indexes, and have no foreign keys of
// their own (three index lookups per accepted job): deleting an application or an organization
// removes its jobs and their deliveries through the cascade organization -> applications ->
// webhook_jobs -> deliveries. Here, as a DBA would, in SQL.
import test from 'ava';
import pg from 'pg';
import { startTestApp } from './helpers/app.ts';
import { createApplication, createEndpoint, createEventType } from './helpers/fixtures.ts';

const app = startTestApp();

test('jobs reference their application and deliveries their job and endpoint; deleting an application or an organization removes both', async (t) => {
  const db = new pg.Client({ connectionString: app.databaseUrl });
  await db.connect();
  t.teardown(() => db.end());
  const foreignKeys = async (table: string) => (await db.query<{ definition: string }>(`
    select pg_get_constraintdef(oid) as definition from pg_constraint
    where conrelid = $1::regclass and contype = 'f' order by 1`, [table])).rows.map((k) => k.definition);
  t.deepEqual(await foreignKeys('webhook_jobs'), ['FOREIGN KEY (application_id) REFERENCES applications(id) ON DELETE CASCADE']);
  t.deepEqual(await foreignKeys('deliveries'), [
    'FOREIGN KEY (endpoint_id) REFERENCES endpoints(id) ON DELETE CASCADE',
    'FOREIGN KEY (job_id) REFERENCES webhook_jobs(id) ON DELETE CASCADE',
  ]);

  // Two applications of one organization, a job with one delivery each, through the API.
  const { key, orgId } = await app.createOrg();
  const by = { on: app, key };
  await createEventType(by, 'cascade.item');
  const applications = [await createApplication(by), await createApplication(by)];
  for (const application of applications) {
    await createEndpoint(by, { application_id: application.id, url: 'https://example.com/hook', event_types: ['cascade.item'] });
    const res = await app.request('POST', '/v1/webhook-jobs', {
      key, body: { application_id: application.id, event_type: 'cascade.item', payload: { n: 1 } },
    });
    t.is(res.status, 201);
  }
  const rows = async () => (await db.query<{ application_id: string; jobs: number; deliveries: number }>(`
    select j.application_id, count(distinct j.id)::int as jobs, count(d.id)::int as deliveries
    from webhook_jobs j left join deliveries d on d.job_id = j.id
    where j.org_id = $1 group by j.application_id order by j.application_id`, [orgId])).rows;
  const [first, second] = [...applications].sort((a, b) => (a.id < b.id ? -1 : 1));
  t.deepEqual(await rows(), [
    { application_id: first!.id, jobs: 1, deliveries: 1 }, { application_id: second!.id, jobs: 1, deliveries: 1 },
  ]);

  await db.query('delete from applications where id = $1', [first!.id]);
  t.deepEqual(await rows(), [{ application_id: second!.id, jobs: 1, deliveries: 1 }], 'the deleted application\'s job and delivery are gone');
  await db.query('delete from organizations where id = $1', [orgId]);
  t.deepEqual(await rows(), [], 'the deleted organization\'s jobs are gone');
  const left = await db.query('select 1 from deliveries where org_id = $1', [orgId]);
  t.is(left.rowCount, 0, 'and their deliveries');
});
