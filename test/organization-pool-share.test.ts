// One organization's requests hold at most its share of the web's database connections
// (src/db/pool-guard.ts): a burst of its requests stuck behind one row lock (as a burst of
// updates to one application queues) used to hold all ten, and every other tenant's request then
// waited for a connection until the pool's deadline gave it a 503. Shown with a lock this test
// holds itself, so that nothing depends on timing.
import test from 'ava';
import { organizationShare } from '../src/db/pool-guard.ts';
import { startTestApp } from './helpers/app.ts';
import { twoSessions } from './helpers/sessions.ts';
import { createApplication } from './helpers/fixtures.ts';
import { scrape, valueOf } from './helpers/metrics.ts';
import { until } from './helpers/until.ts';

const app = startTestApp();
const POOL_SIZE = 10; // the test app's pool (test/helpers/app.ts), as DATABASE_POOL_SIZE's default

test('an organization whose requests wait on a lock leaves connections to the others, and its own requests all finish', async (t) => {
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

test('the share is all but a fifth of the pool: one connection at least for the others (of two or more), one at least for the organization', (t) => {
  t.deepEqual([1, 2, 3, 5, 10, 20, 200].map(organizationShare), [1, 1, 2, 4, 8, 16, 160]);
});
