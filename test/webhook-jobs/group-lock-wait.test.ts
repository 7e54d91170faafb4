// A group of job creations waits at most a second for a lock (accept_job_group's lock_timeout,
// sql/005-accept-job.sql), then gives its turn back and accepts each job alone: only the job
// behind the lock waits for it. Black-box probes held one application's row (`select ... for
// update`, as a DBA's open transaction does): every group holding one of its jobs waited the
// statement timeout, with the other tenants' jobs in it, and three such groups held every job
// creation of the web process; with the group refused at the timeout, those jobs answered 503.
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { makeJobAcceptor, type NewJobInput } from '../../src/core/webhook-jobs.ts';
import { DatabaseBusyError } from '../../src/db/availability.ts';
import { groupsWaitForLocks } from '../helpers/group-lock.ts';
import { until } from '../helpers/until.ts';
import { app, setup, createApplication, createEventType, createEndpoint, holdApplications } from './helpers.ts';

const job = (applicationId: string, n: number): NewJobInput =>
  ({ applicationId, eventType: 'invoice.paid', payload: { n }, eventId: null, headers: {} });

// Every statement waiting for a lock in this database (the second waiter for a row waits for the
// first, its tuple lock, not for the lock's holder).
const blocked = () => app.pool.any(sql.type(z.object({ query: z.string() }))`
  select query from pg_stat_activity where datname = current_database() and cardinality(pg_blocking_pids(pid)) > 0`);

/**
 * An organization whose application (setup's) and `more` applications after it, created in that
 * order, each have an endpoint subscribed to invoice.paid.
 */
async function organization<N extends 0 | 1 | 2>(t: ExecutionContext, more: N) {
  const { key, orgId, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  const apps = [appId];
  for (let i = 0; i < more; i += 1) apps.push(await createApplication(t, key));
  for (const id of apps) await createEndpoint(t, key, id, ['invoice.paid']);
  return { orgId, tenant: { orgId, environment: 'live' } as const, apps: apps as Applications[N] };
}
type Applications = [[string], [string, string], [string, string, string]];

const jobsOf = async (applicationId: string) => app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
  select count(*)::int as n from webhook_jobs where application_id = ${applicationId}`);

test('a group whose application row another transaction holds: its other jobs are created while the lock is held, the locked one once it goes', async (t) => {
  const { tenant, apps: [free, locked, first] } = await organization(t, 2);
  // One group at a time: the first job's group, behind the lock, has the turn while the two
  // others come and wait for the next one, which then holds both of them.
  const accept = makeJobAcceptor(app.pool, app.queue, { groupsInFlight: 1 });
  const release = await holdApplications([first, locked]);
  let answers: Promise<unknown[]>;
  try {
    const done = new Set<string>();
    const settle = (id: string, n: number) => accept(tenant, job(id, n)).then(() => { done.add(id); return 201; }, (error: unknown) => error);
    const firstAnswer = settle(first, 0);
    await until('the first group to start', () => accept.busy === 1);
    answers = Promise.all([firstAnswer, settle(locked, 1), settle(free, 2)]);
    // On the old code no group gave its turn back while the lock was held: this waited until
    // the statement timeout.
    await until('the free application\'s job created, the lock still held', () => done.has(free), 20_000);
    t.is(await jobsOf(free), 1);
    t.is(await jobsOf(locked), 0, 'the locked application\'s job waits alone');
    t.false(done.has(first) || done.has(locked));
  } finally {
    await release();
  }
  t.deepEqual(await answers, [201, 201, 201], 'the jobs behind the lock are created once it goes');
  t.is(await jobsOf(locked), 1);
  t.is(await jobsOf(first), 1);
});

test('a group behind a lock gives up after its lock timeout, writing nothing, and its job waits alone and is created once', async (t) => {
  const { tenant, apps: [appId] } = await organization(t, 0);
  const accept = makeJobAcceptor(app.pool, app.queue, { groupsInFlight: 1 });
  const release = await holdApplications([appId]);
  try {
    const answer = accept(tenant, job(appId, 1));
    const waits = await until('the job to wait alone, after its group gave up', async () => {
      const rows = await app.pool.any(sql.type(z.object({ query: z.string() }))`
        select query from pg_stat_activity where ${release.pid}::int = any(pg_blocking_pids(pid))`);
      return rows.some((row) => !row.query.includes('accept_job_group')) && rows;
    }, 20_000);
    t.false(waits.some((row) => row.query.includes('accept_job_group')), 'the group statement no longer waits');
    await release();
    t.like(await answer, { replayed: false });
  } finally {
    await release();
  }
  t.is(await jobsOf(appId), 1, 'one job: the group wrote nothing');
});

// Serial: it lets groups wait for locks as long as they are held for a while (ava runs the serial
// tests of a file before the others, which need the second).
test.serial('an application whose lock held a group back: its next jobs go alone, one at a time, while the lock stays, and another application\'s group no longer waits behind them', async (t) => {
  const { tenant, apps: [free, locked] } = await organization(t, 1);
  const accept = makeJobAcceptor(app.pool, app.queue, { groupsInFlight: 1, waitLimitMs: 60_000 });
  const release = await holdApplications([locked]);
  const answers: Promise<unknown>[] = [];
  try {
    answers.push(accept(tenant, job(locked, 0)));
    await until('the first job\'s group to give up after its lock timeout', () => accept.apart === 1, 20_000);
    // From here a group would wait as long as the lock is held: a job of the locked application
    // taken into one (the old code) holds the one turn a group has (groupsInFlight 1), and the
    // free application's job waits for it.
    const restore = await groupsWaitForLocks(app.pool);
    try {
      answers.push(accept(tenant, job(locked, 1)));
      await until('the second job to wait for its turn', () => accept.turns === 1, 20_000);
      const waits = await blocked();
      t.is(waits.length, 1, 'one job of the locked application waits in the database, the other in the process');
      t.false(waits.some((row) => row.query.includes('accept_job_group')), 'the first job waits alone, not in a group');
      t.is(accept.busy, 0, 'no group');
      t.like(await accept(tenant, job(free, 2)), { replayed: false }, 'the free application\'s job is created, the lock still held');
      t.is(await jobsOf(free), 1);
      t.is(await jobsOf(locked), 0);
    } finally {
      await restore();
    }
  } finally {
    await release();
  }
  t.deepEqual((await Promise.all(answers)).map((answer) => (answer as { replayed: boolean }).replayed), [false, false]);
  t.is(await jobsOf(locked), 2, 'both jobs behind the lock are created once it goes: the first, then the second on its turn');
  t.is(accept.apart, 0, 'the second went through without a wait: its application is back in the groups');
  t.is(accept.turns, 0);
});

test.serial('at a lock\'s start, while a group waits for the locked application: the next group leaves out its next job, and takes its organization\'s other jobs without waiting for the group\'s rate-limit counter', async (t) => {
  const { orgId, tenant, apps: [free, locked] } = await organization(t, 1);
  // Every job counted against one counter of the organization, as the route counts them.
  const take = () => ({ key: `jobs:${orgId}`, at: undefined, onTaken: () => {} });
  const accept = makeJobAcceptor(app.pool, app.queue, { rule: { limit: 10_000, periodSeconds: 60 } });
  // The first group waits as long as the lock is held (no second to give up after).
  const restore = await groupsWaitForLocks(app.pool);
  const release = await holdApplications([locked]);
  let answers: Promise<unknown[]>;
  try {
    const first = accept(tenant, job(locked, 0), take());
    await until('the first group to wait for the lock', async () => accept.busy === 1 && (await blocked()).length === 1, 20_000);
    const second = accept(tenant, job(locked, 1), take());
    answers = Promise.all([first, second]);
    // On the code before, the next group took the locked application's next job and waited for
    // the lock too; and with the counter taken before the applications, a group of the other
    // application's job alone waited for the first group's counter.
    let created = false;
    const freeAnswer = accept(tenant, job(free, 2), take()).then((answer) => {
      created = true;
      return answer;
    });
    await until('the free application\'s job created, the lock still held', () => created, 10_000);
    t.like(await freeAnswer, { replayed: false });
    t.is(accept.waiting, 1, 'the locked application\'s next job waits for the running group');
    t.is(await jobsOf(free), 1);
  } finally {
    await release();
    await restore();
  }
  t.deepEqual((await answers).map((answer) => (answer as { replayed: boolean }).replayed), [false, false]);
  t.is(await jobsOf(locked), 2);
});

test.serial('a group taken step by step (one of its keys refused) locks its applications before it counts: waiting for a locked one, it holds no counter', async (t) => {
  const { orgId, tenant, apps: [first, locked, other] } = await organization(t, 2);
  const counter = `jobs-step:${orgId}`;
  const take = () => ({ key: counter, at: undefined, onTaken: () => {} });
  const accept = makeJobAcceptor(app.pool, app.queue, { groupsInFlight: 1, rule: { limit: 1000, periodSeconds: 3600 } });
  const releaseFirst = await holdApplications([first]);
  const release = await holdApplications([locked]);
  const answers: Promise<unknown>[] = [];
  try {
    // The first group waits for its application (up to its second) while the next two gather;
    // its count makes the counter's row.
    answers.push(accept(tenant, job(first, 0), take()));
    await until('the first group to start', () => accept.busy === 1, 20_000);
    // The other application's request goes on a key that no longer exists: accept_job_group
    // refuses the group before anything else, and it is taken step by step (that request 401).
    answers.push(accept(tenant, job(locked, 1), take()), accept(tenant, job(other, 2), take(), { keyId: 'key_gone' }));
    await until('both to wait for the next group', () => accept.waiting === 2, 20_000);
    await releaseFirst();
    await until('the step-by-step group to wait for the locked application', async () =>
      (await blocked()).some((row) => row.query.includes('lock_job_applications')), 20_000);
    // Within the second the step-by-step transaction waits (boundGroupLockWait). On the code
    // before, it had counted first: the counter's row was locked, and this failed at once.
    const free = await app.pool.maybeOneFirst(sql.type(z.object({ key: z.string() }))`
      select key from rate_limit_counters where key = ${counter} for update nowait`).then((row) => row, (error: unknown) => error);
    t.is(free, counter, 'the counter is not held by the waiting group');
  } finally {
    await releaseFirst();
    await release();
  }
  const settled = await Promise.all(answers.map((answer) => answer.then(() => 201, (error: unknown) => (error as { status?: number }).status)));
  t.deepEqual(settled, [201, 201, 401], 'the first and the locked application\'s created (alone after the second), the gone key\'s refused');
});

test.serial('the locked application\'s jobs waiting for their turn answer 503 after the wait limit, with nothing written; the one in the database is created once the lock goes', async (t) => {
  const { tenant, apps: [appId] } = await organization(t, 0);
  const accept = makeJobAcceptor(app.pool, app.queue, { groupsInFlight: 1, waitLimitMs: 1_000 });
  const release = await holdApplications([appId]);
  let first: Promise<unknown>;
  try {
    first = accept(tenant, job(appId, 0));
    await until('the first job\'s group to give up after its lock timeout', () => accept.apart === 1, 20_000);
    const refused = await Promise.all([1, 2, 3].map((n) => accept(tenant, job(appId, n)).then(() => 'created', (error: unknown) => error)));
    for (const error of refused) t.true(error instanceof DatabaseBusyError, String(error));
    t.is((await blocked()).length, 1, 'only the first job waited in the database');
    t.is(accept.turns, 0);
  } finally {
    await release();
  }
  t.like(await first, { replayed: false });
  t.is(await jobsOf(appId), 1, 'the refused jobs wrote nothing');
});
