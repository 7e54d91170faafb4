// One organization's requests hold at most its share of the web's database connections
// (src/db/pool-guard.ts): a burst of its requests stuck behind one row lock (as a burst of
// updates to one application queues) used to hold all ten, and every other tenant's request then
// waited for a connection until the pool's deadline gave it a 503. Shown with a lock this test
// holds itself, so that nothing depends on timing.
import test from 'ava';
import { customerShare, organizationShare } from '../src/db/pool-guard.ts';
import { startTestApp } from './helpers/app.ts';
import { twoSessions } from './helpers/sessions.ts';
import { createApplication, createEndpoint } from './helpers/fixtures.ts';
import { tokenFor } from './portal-links/helpers.ts';
import { scrape, valueOf } from './helpers/metrics.ts';
import { until } from './helpers/until.ts';

const app = startTestApp();
const POOL_SIZE = 10; // the test app's pool (test/helpers/app.ts), as DATABASE_POOL_SIZE's default

test.serial('an organization whose requests wait on a lock leaves connections to the others, and its own requests all finish', async (t) => {
  const hog = await app.createOrg();
  const other = await app.createOrg();
  const target = await createApplication({ on: app, key: hog.key });
  await createApplication({ on: app, key: other.key }, { name: 'Other' });
  // One client holds the lock; another watches (a transaction keeps one snapshot of pg_stat_activity).
  const [db, watcher] = await twoSessions(t, app.databaseUrl);
  const stuck = async () => {
    const { rows: [row] } = await watcher.query<{ n: number }>(`
      select count(*)::int as n from pg_stat_activity
      where datname = current_database() and wait_event_type = 'Lock' and query like '%update applications%'`);
    return row?.n ?? 0;
  };

  const waits = async () => valueOf((await scrape(`${app.baseUrl}/metrics`)).exposition, 'hookline_database_share_waits_total');
  t.is(await waits(), 0);
  await db.query('begin');
  await db.query('select 1 from applications where id = $1 for update', [target.id]);
  const burst = Array.from({ length: POOL_SIZE }, (_, i) =>
    app.request('PATCH', `/v1/applications/${target.id}`, { key: hog.key, body: { name: `Renamed ${i}` } }));
  const share = organizationShare(POOL_SIZE);
  t.is(share, 8);
  await until(`${share} of the burst's updates waiting on the lock`, async () => (await stuck()) >= share);

  // Another tenant's request, while the burst still waits: answered, from a connection the burst could not take.
  const list = await app.request('GET', '/v1/applications', { key: other.key });
  t.is(list.status, 200, JSON.stringify(list.body));
  t.deepEqual(list.body.data.map((a: { name: string }) => a.name), ['Other']);
  t.is(await stuck(), share, 'the burst holds its share of the connections and no more');
  await until('the rest of the burst waiting for its share', async () => (await waits()) === 2);

  await db.query('commit');
  const answers = await Promise.all(burst);
  t.deepEqual(answers.map((a) => a.status), burst.map(() => 200), 'every update of the burst answered in its turn');
  const renamed = await app.request('GET', `/v1/applications/${target.id}`, { key: hog.key });
  t.regex(renamed.body.name, /^Renamed \d+$/);
});

test.serial('a portal link\'s requests waiting on a lock hold at most half of the organization\'s share; the operator\'s own requests get the rest', async (t) => {
  // A probe: a customer's concurrent endpoint updates through its link, queued on row locks,
  // held the organization's whole share, and the operator's lists waited 6-14 s or answered 503.
  const tenant = await app.createOrg();
  const by = { on: app, key: tenant.key, t };
  const customer = await createApplication(by, { name: 'Customer' });
  const endpoint = await createEndpoint(by, { application_id: customer.id, url: 'https://hooks.example.com/locked' });
  const token = await tokenFor(t, app, tenant.key, customer.id as string);
  const [db, watcher] = await twoSessions(t, app.databaseUrl);
  const stuck = async () => {
    const { rows: [row] } = await watcher.query<{ n: number }>(`
      select count(*)::int as n from pg_stat_activity
      where datname = current_database() and wait_event_type = 'Lock' and query like '%endpoints%' and backend_type = 'client backend'
        and pid <> $1`, [await db.query('select pg_backend_pid() as pid').then((r) => r.rows[0].pid as number)]);
    return row?.n ?? 0;
  };
  await db.query('begin');
  await db.query('select 1 from endpoints where id = $1 for update', [endpoint.id]);
  const burst = Array.from({ length: POOL_SIZE }, (_, i) =>
    app.request('PATCH', `/v1/endpoints/${endpoint.id}`, { key: token, body: { url: `https://hooks.example.com/locked/${i}` } }));
  const share = customerShare(POOL_SIZE);
  t.is(share, 4);
  await until(`${share} of the customer's updates waiting on the lock`, async () => (await stuck()) >= share);

  // The operator's requests, while the customer's still wait: answered from the organization's other connections.
  const lists = await Promise.all(Array.from({ length: 3 }, () => app.request('GET', '/v1/applications', { key: tenant.key })));
  t.deepEqual(lists.map((l) => l.status), [200, 200, 200], JSON.stringify(lists.map((l) => l.body)));
  t.is(await stuck(), share, 'the customer holds half the organization\'s share and no more');

  await db.query('commit');
  const answers = await Promise.all(burst);
  t.deepEqual(answers.map((a) => a.status), burst.map(() => 200), 'every update of the burst answered in its turn');
});

test('the share is all but a fifth of the pool: one connection at least for the others (of two or more), one at least for the organization', (t) => {
  t.deepEqual([1, 2, 3, 5, 10, 20, 200].map(organizationShare), [1, 1, 2, 4, 8, 16, 160]);
  t.deepEqual([1, 2, 3, 5, 10, 20, 200].map(customerShare), [1, 1, 1, 2, 4, 8, 80], 'a portal link\'s application: half of that, at least one');
});
