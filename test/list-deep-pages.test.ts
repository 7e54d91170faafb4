// A deep page of the endpoint and application lists reads about a page of rows from the table,
// not every row before the page: at 100,000 endpoints, page 999 (of 100) read each skipped
// endpoint and its subscriptions and took 0.73 s (docs/sql.md, "The lists and their indexes").
// Counted in rows the tables gave up and in the subscriptions' lookups (PostgreSQL's
// statistics), which needs no timing. (The job lists: test/webhook-jobs/list-deep-pages.test.ts.)
import test from 'ava';
import { listApplications } from '../src/db/applications.ts';
import { listEndpoints } from '../src/db/endpoints.ts';
import { makePool } from '../src/db/pool.ts';
import { startTestApp } from './helpers/app.ts';
import { planFixture, ROWS_READ, tableCount, vacuumAllVisible } from './helpers/plans.ts';

const app = startTestApp();
const ROWS = 20_000;
const PER_PAGE = 100;
const DEEP = ROWS / PER_PAGE - 1;

/** Ids `<prefix>deep<n>` padded to the id format, newest first (one statement wrote them all: one created_at, so by id). */
const pageOf = (prefix: string, page: number) => Array.from({ length: PER_PAGE }, (_, i) => ROWS - (page - 1) * PER_PAGE - i)
  .map((n) => `${prefix}deep${String(n).padStart(23, '0')}`);

test.serial('a deep page of the endpoint lists reads about a page of endpoints and of subscriptions, not every one before it', async (t) => {
  const fixture = await planFixture(t, app);
  // Endpoints of a real width (a header of about 600 bytes): with narrow rows the whole table is
  // a few hundred pages, and reading it all is the planner's cheaper choice for the total. Written
  // without their triggers (the application's count rewritten 20,000 times in one statement took
  // 15 s): the lists count rows, not the counters.
  await fixture.db.query('set session_replication_role = replica');
  await fixture.db.query(`
    insert into endpoints
    select r.* from endpoints e, generate_series(1, $2::int) g,
      jsonb_populate_record(null::endpoints, to_jsonb(e) || jsonb_build_object(
        'id', 'ep_deep' || lpad(g::text, 23, '0'), 'created_at', now(), 'headers', jsonb_build_object('x-pad', repeat('x', 600)))) r
    where e.id = $1`, [fixture.endpointId, ROWS]);
  await fixture.db.query(`
    insert into endpoint_event_types (endpoint_id, event_type_id, org_id)
    select e.id, s.event_type_id, s.org_id from endpoints e, endpoint_event_types s
    where e.id like 'ep_deep%' and s.endpoint_id = $1`, [fixture.endpointId]);
  await fixture.db.query('set session_replication_role = default');
  for (const table of ['endpoints', 'endpoint_event_types']) await vacuumAllVisible(fixture.db, table);
  const pool = await makePool(app.databaseUrl, { maximumPoolSize: 1 });
  t.teardown(() => pool.end());
  const tenant = { orgId: fixture.orgId, environment: 'live' as const };

  for (const [what, applicationId] of [['of the application', fixture.applicationId], ['of the organization', undefined]] as const) {
    for (const page of [1, DEEP]) {
      const before = { rows: await tableCount(pool, fixture.db, 'endpoints', ROWS_READ), lookups: await tableCount(pool, fixture.db, 'endpoint_event_types', 'idx_scan') };
      const { rows, total } = await listEndpoints(pool, tenant, applicationId, { page, perPage: PER_PAGE });
      const read = await tableCount(pool, fixture.db, 'endpoints', ROWS_READ) - before.rows;
      const lookups = await tableCount(pool, fixture.db, 'endpoint_event_types', 'idx_scan') - before.lookups;
      t.is(total, ROWS + 1, `${what}, page ${page}: the total (the fixture's own endpoint, the oldest, too)`);
      t.deepEqual(rows.map((r) => r.id), pageOf('ep_', page), `${what}, page ${page}: the page's endpoints, newest first`);
      t.true(rows.every((r) => r.application_id === fixture.applicationId && r.status === 'active' && r.event_types.join() === 'plan.item'),
        `${what}, page ${page}: the rows' fields and subscriptions`);
      t.true(read <= 3 * PER_PAGE, `${what}, page ${page}: ${read} endpoints read from the table for a page of ${PER_PAGE} and its total`);
      t.true(lookups <= PER_PAGE, `${what}, page ${page}: the subscriptions looked up ${lookups} times for a page of ${PER_PAGE}`);
    }
  }

  // Another tenant, the other environment, a portal token of another application: nothing, however deep.
  const other = await app.createOrg();
  for (const stranger of [
    { orgId: other.orgId, environment: 'live' as const },
    { orgId: fixture.orgId, environment: 'test' as const },
    { orgId: fixture.orgId, environment: 'live' as const, applicationId: 'app_someoneelse' },
  ]) {
    for (const page of [1, DEEP]) {
      const { rows, total } = await listEndpoints(pool, stranger, fixture.applicationId, { page, perPage: PER_PAGE });
      t.deepEqual({ rows, total }, { rows: [], total: 0 }, `${JSON.stringify(stranger)}, page ${page}`);
    }
  }
  const portal = await listEndpoints(pool, { ...tenant, applicationId: fixture.applicationId }, fixture.applicationId, { page: DEEP, perPage: PER_PAGE });
  t.deepEqual(portal.rows.map((r) => r.id), pageOf('ep_', DEEP), 'a portal token of the application lists its endpoints');
});

test.serial('a deep page of the application list reads about a page of applications, not every one before it', async (t) => {
  const fixture = await planFixture(t, app);
  // Applications of a real width (metadata of about 600 bytes), for the reason given above.
  await fixture.db.query(`
    insert into applications
    select r.* from applications a, generate_series(1, $2::int) g,
      jsonb_populate_record(null::applications, to_jsonb(a) || jsonb_build_object(
        'id', 'app_deep' || lpad(g::text, 23, '0'), 'uid', null, 'name', 'Deep ' || g, 'created_at', now(),
        'metadata', jsonb_build_object('pad', repeat('x', 600)))) r
    where a.id = $1`, [fixture.applicationId, ROWS]);
  await vacuumAllVisible(fixture.db, 'applications');
  const pool = await makePool(app.databaseUrl, { maximumPoolSize: 1 });
  t.teardown(() => pool.end());
  const tenant = { orgId: fixture.orgId, environment: 'live' as const };

  for (const page of [1, DEEP]) {
    const before = await tableCount(pool, fixture.db, 'applications', ROWS_READ);
    const { rows, total } = await listApplications(pool, tenant, { page, perPage: PER_PAGE });
    const read = await tableCount(pool, fixture.db, 'applications', ROWS_READ) - before;
    t.is(total, ROWS + 1, `page ${page}: the total (the fixture's own application, the oldest, too)`);
    t.deepEqual(rows.map((r) => r.id), pageOf('app_', page), `page ${page}: the page's applications, newest first`);
    t.true(rows.every((r) => r.name === `Deep ${r.id.slice('app_deep'.length).replace(/^0+/, '')}` && r.endpoints_count === 1),
      `page ${page}: the rows' fields`);
    t.true(read <= 3 * PER_PAGE, `page ${page}: ${read} applications read from the table for a page of ${PER_PAGE} and its total`);
  }
  const other = await app.createOrg();
  t.deepEqual(await listApplications(pool, { orgId: other.orgId, environment: 'live' }, { page: DEEP, perPage: PER_PAGE }),
    { rows: [], total: 0 }, 'another tenant finds none of them');
  const portal = await listApplications(pool, { ...tenant, applicationId: fixture.applicationId }, { page: 1, perPage: PER_PAGE });
  t.deepEqual({ ids: portal.rows.map((r) => r.id), total: portal.total }, { ids: [fixture.applicationId], total: 1 },
    'a portal token lists its own application alone');
});
