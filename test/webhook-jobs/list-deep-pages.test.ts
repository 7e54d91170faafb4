// A page of a job list and its total read the list's index, not every job before the page: at
// 1,000,000 jobs of one application, page 9,000 (of 100) read 900,000 rows from the table and
// took 8.4 s (docs/sql.md, "The lists and their indexes"). Counted in rows the table gave up
// (sequential and by index, from PostgreSQL's statistics), which needs no timing.
import test from 'ava';
import { makePool } from '../../src/db/pool.ts';
import { listJobs } from '../../src/db/webhook-jobs.ts';
import { startTestApp } from '../helpers/app.ts';
import { insertPlanJobs, planFixture, ROWS_READ, tableCount, vacuumAllVisible } from '../helpers/plans.ts';

const app = startTestApp();
const JOBS = 20_000;
const PER_PAGE = 100;

test.serial('a deep page of a job list and its total read about a page of rows from the table, not every job before it', async (t) => {
  const fixture = await planFixture(t, app);
  // Jobs of a real size (a payload of about 600 bytes, as the bench's): with empty payloads the
  // whole table is a few hundred pages, and reading it all is the planner's cheaper choice.
  await fixture.db.query(`
    insert into webhook_jobs (id, org_id, environment, application_id, event_type, payload, expires_at)
    select 'job_deep' || lpad(g::text, 23, '0'), $1, 'live', $2, 'plan.item', json_build_object('pad', repeat('x', 600)), now() + interval '48 hours'
    from generate_series(1, $3::int) g`, [fixture.orgId, fixture.applicationId, JOBS]);
  await vacuumAllVisible(fixture.db, 'webhook_jobs');
  const pool = await makePool(app.databaseUrl, { maximumPoolSize: 1 });
  t.teardown(() => pool.end());
  /** Rows webhook_jobs gave up to scans so far, this pool's own counted (it has one connection). */
  const rowsRead = () => tableCount(pool, fixture.db, 'webhook_jobs', ROWS_READ);
  const tenant = { orgId: fixture.orgId, environment: 'live' as const };
  // Every job was inserted by one statement: one created_at, so newest first is by id.
  const expected = (page: number) => Array.from({ length: PER_PAGE }, (_, i) => JOBS - (page - 1) * PER_PAGE - i)
    .map((n) => `job_deep${String(n).padStart(23, '0')}`);

  for (const [what, filters] of [['of the application', { applicationId: fixture.applicationId }], ['of the organization', {}]] as const) {
    for (const page of [1, JOBS / PER_PAGE - 1]) {
      const before = await rowsRead();
      const { rows, total } = await listJobs(pool, tenant, filters, { page, perPage: PER_PAGE });
      const read = await rowsRead() - before;
      t.is(total, JOBS, `${what}, page ${page}: the total`);
      t.deepEqual(rows.map((r) => r.id), expected(page), `${what}, page ${page}: the page's jobs, newest first`);
      t.true(rows.every((r) => r.status === 'created' && r.event_type === 'plan.item'), `${what}, page ${page}: the rows' fields`);
      t.true(read <= 3 * PER_PAGE, `${what}, page ${page}: ${read} rows read from the table for a page of ${PER_PAGE} and its total`);
    }
  }
});

test.serial('a list through another tenant\'s application finds nothing, however deep', async (t) => {
  const fixture = await planFixture(t, app);
  await insertPlanJobs(fixture, 300, 'held', 'theirs');
  const other = await app.createOrg();
  const pool = await makePool(app.databaseUrl, { maximumPoolSize: 1 });
  t.teardown(() => pool.end());
  for (const tenant of [
    { orgId: other.orgId, environment: 'live' as const },
    { orgId: fixture.orgId, environment: 'test' as const },
    { orgId: fixture.orgId, environment: 'live' as const, applicationId: 'app_someoneelse' },
  ]) {
    for (const page of [1, 2]) {
      const { rows, total } = await listJobs(pool, tenant, { applicationId: fixture.applicationId }, { page, perPage: PER_PAGE });
      t.deepEqual({ rows, total }, { rows: [], total: 0 }, JSON.stringify(tenant));
    }
  }
  const own = await listJobs(pool, { orgId: fixture.orgId, environment: 'live', applicationId: fixture.applicationId }, {}, { page: 3, perPage: PER_PAGE });
  t.is(own.total, 300);
  t.is(own.rows.length, 100);
});

test.serial('a list by status created, executing or awaiting_retry reads about a page of deliveries, not one per open job', async (t) => {
  // A probe: after a recover left 44,000 jobs open, `?status=created` took 3.1 s and
  // `?status=executing` 5.6 s. The filter asked, per open job, whether one of its deliveries was
  // in flight: one read of its deliveries each (392,973 buffers for the total alone).
  const fixture = await planFixture(t, app);
  await insertPlanJobs(fixture, JOBS, 'pending', 'open');
  const executing = [1, 7, 12_345].map((n) => `job_open${String(n).padStart(23, '0')}`);
  await fixture.db.query(`update deliveries set status = 'in_flight' where job_id = any($1)`, [executing]);
  await vacuumAllVisible(fixture.db, 'deliveries');
  const pool = await makePool(app.databaseUrl, { maximumPoolSize: 1 });
  t.teardown(() => pool.end());
  const rowsRead = () => tableCount(pool, fixture.db, 'deliveries', ROWS_READ);
  const tenant = { orgId: fixture.orgId, environment: 'live' as const };
  for (const [status, total] of [['created', JOBS - executing.length], ['executing', executing.length], ['awaiting_retry', 0]] as const) {
    for (const page of [1, Math.max(1, Math.ceil(total / PER_PAGE) - 1)]) {
      const before = await rowsRead();
      const listed = await listJobs(pool, tenant, { status }, { page, perPage: PER_PAGE });
      const read = await rowsRead() - before;
      t.is(listed.total, total, `${status}, page ${page}: the total`);
      t.true(listed.rows.every((r) => r.status === status), `${status}, page ${page}: every row is ${status}`);
      if (status === 'executing') t.deepEqual(listed.rows.map((r) => r.id).sort(), [...executing].sort());
      t.true(read <= 3 * PER_PAGE, `${status}, page ${page}: ${read} deliveries read for a page of ${PER_PAGE} and its total`);
    }
  }
});
