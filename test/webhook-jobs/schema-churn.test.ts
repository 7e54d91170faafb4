// Job creations while their event type's schema is being changed: each job is validated against
// the version it read, and a job whose version changed before it was written is looked up again
// and accepted alone, up to three times. Past that it is a 503 that created nothing (it was a
// 500: a sweep of concurrent PATCHes and POSTs made 77-177 of them), and another tenant's jobs
// in the same accept groups are answered without waiting for those lookups.
import test from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { startTestApp } from '../helpers/app.ts';
import { createApplication, createEventType } from '../helpers/fixtures.ts';

const app = startTestApp({ RATE_LIMIT_JOBS_PER_SECOND: '100000' });

const schemaOf = (n: number) => ({
  type: 'object', required: ['n'],
  properties: { n: { type: 'integer' } },
  patternProperties: Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`^p${i}_[a-z]{1,${n % 7 + 3}}$`, { type: 'string' }])),
});

test('jobs created while their event type keeps changing: 201 or 503, never a 500; every 201 is a job, nothing else is', async (t) => {
  t.timeout(180_000);
  const { key, orgId } = await app.createOrg();
  const by = { on: app, key };
  const typeId = (await createEventType(by, { name: 'order.churned', schema: schemaOf(0) })).id as string;
  const appId = (await createApplication(by)).id as string;
  const other = await app.createOrg();
  await createEventType({ on: app, key: other.key }, 'order.steady');
  const otherApp = (await createApplication({ on: app, key: other.key })).id as string;

  let patching = true;
  const patcher = async () => {
    for (let n = 1; patching; n += 1) {
      const res = await app.request('PATCH', `/v1/event-types/${typeId}`, { key, body: { schema: schemaOf(n) } });
      t.is(res.status, 200, JSON.stringify(res.body));
    }
  };
  const statuses: number[] = [];
  const created: string[] = [];
  const creator = async (jobs: number) => {
    for (let i = 0; i < jobs; i += 1) {
      const res = await app.request('POST', '/v1/webhook-jobs', { key, body: { application_id: appId, event_type: 'order.churned', payload: { n: i } } });
      statuses.push(res.status);
      if (res.status === 201) created.push(res.body.id);
      else t.is(res.body.error.code, 'service_unavailable', JSON.stringify(res.body));
    }
  };
  const steady: number[] = [];
  const bystander = async (jobs: number) => {
    for (let i = 0; i < jobs; i += 1) {
      steady.push((await app.request('POST', '/v1/webhook-jobs', { key: other.key, body: { application_id: otherApp, event_type: 'order.steady', payload: {} } })).status);
    }
  };
  const patchers = [patcher(), patcher(), patcher()];
  await Promise.all([creator(30), creator(30), creator(30), creator(30), bystander(30)]);
  patching = false;
  await Promise.all(patchers);

  t.deepEqual([...new Set(statuses)].filter((s) => s !== 201 && s !== 503), [], `statuses: ${JSON.stringify(statuses)}`);
  t.true(created.length > 0, 'some jobs were created');
  t.deepEqual([...new Set(steady)], [201], 'the other tenant\'s jobs are all created');
  const stored = await app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from webhook_jobs where org_id = ${orgId}`);
  t.is(stored, created.length, 'a 503 created nothing');
});
