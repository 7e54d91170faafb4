// Group commit of job creation (makeJobAcceptor, src/core/webhook-jobs.ts): requests that wait
// together share one transaction, and each still gets exactly the answer it would get alone;
// a refused job leaves nothing behind for the others' commit (no idempotency key claimed), and a
// group whose transaction fails has each of its jobs accepted alone.
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { makeJobAcceptor, type LimitTake, type NewJobInput, type ProvisionalKey } from '../../src/core/webhook-jobs.ts';
import { acceptJob, acceptJobs } from '../../src/db/webhook-jobs.ts';
import { DELIVERY_QUEUE } from '../../src/queue.ts';
import { newId } from '../../src/ids.ts';
import type { Taken } from '../../src/db/rate-limits.ts';
import type { Tenant } from '../../src/db/tenant.ts';
import { AppError, translateDatabaseError } from '../../src/errors.ts';
import { makePool } from '../../src/db/pool.ts';
import { RequestScope, requestScope } from '../../src/db/request-scope.ts';
import { groupsWaitForLocks } from '../helpers/group-lock.ts';
import { until } from '../helpers/until.ts';
import { app, setup, createApplication, createEventType, createEndpoint, postJob, deliveriesOf, messagesFor, jobRows, holdApplications, INVOICE_SCHEMA } from './helpers.ts';

// The tests below hold a group behind a lock as long as they need it (oneGroup): they take
// their locks through hold(), which first turns accept_job_group's lock timeout (a second,
// sql/005-accept-job.sql) off in this file's database; group-lock-wait.test.ts tests it.
let lockTimeoutOff: Promise<unknown> | undefined;
async function hold(appIds: string[]) {
  lockTimeoutOff ??= groupsWaitForLocks(app.pool);
  await lockTimeoutOff;
  return holdApplications(appIds);
}

const job = (appId: string, eventType: string, payload: Record<string, unknown>, eventId: string | null = null): NewJobInput =>
  ({ applicationId: appId, eventType, payload, eventId, headers: {} });

type Acceptor = ReturnType<typeof makeJobAcceptor>;
type Answer = { id: string; replayed: boolean } | { status: number };
const settle = (promise: Promise<{ job: { id: string }; replayed: boolean }>): Promise<Answer> => promise.then(
  ({ job: created, replayed }) => ({ id: created.id, replayed }),
  (error: unknown) => ({ status: error instanceof AppError ? error.status : translateDatabaseError(error)?.status ?? 500 }),
);

/**
 * `inputs` in one group, deterministically: a first job for `heldAppId`, whose application row
 * this test holds locked, occupies the acceptor's one group until all of `inputs` wait; then the
 * lock is let go and they go together. Answers the first job's answer, then one for each input.
 */
async function oneGroup(
  accept: Acceptor, tenant: Tenant, heldAppId: string, inputs: NewJobInput[], take: (i: number) => LimitTake | undefined = () => undefined,
  key: (i: number) => ProvisionalKey | undefined = () => undefined,
): Promise<Answer[]> {
  const release = await hold([heldAppId]);
  let first: Promise<Answer>;
  let rest: Promise<Answer[]>;
  try {
    first = settle(accept(tenant, job(heldAppId, 'invoice.paid', { invoice_id: 'held' })));
    await until('the first group to start', () => accept.busy === 1 && accept.waiting === 0);
    rest = Promise.all(inputs.map((input, i) => settle(accept(tenant, input, take(i), key(i)))));
    await until('every request to wait for the next group', () => accept.waiting === inputs.length);
  } finally {
    await release();
  }
  return [await first, ...await rest];
}

/** The transactions that wrote these jobs (xmin), as how many distinct ones. */
const transactionsOf = async (ids: string[]) => app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
  select count(distinct xmin::text)::int as n from webhook_jobs where id = any(${sql.array(ids, 'text')})`);

test('a client that goes away does not take other requests down with it: the next group runs in no request\'s scope', async (t) => {
  const { key, orgId, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  await createEndpoint(t, key, appId, ['invoice.paid']);
  const held = await createApplication(t, key);
  const tenant = { orgId, environment: 'live' as const };
  const accept = makeJobAcceptor(app.pool, app.queue, { groupsInFlight: 1 });
  const release = await hold([held]);
  const gone = new RequestScope();
  let first: Promise<Answer>;
  let others: Promise<Answer[]>;
  let abandoned: Promise<Answer>;
  try {
    // The first request starts the one group; its client leaves while that group runs.
    first = requestScope.run(gone, () => settle(accept(tenant, job(held, 'invoice.paid', { n: 0 }))));
    // Its statement is waiting for this test's lock: it has its connection.
    await until('the first group to wait for the lock', async () => await app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
      select count(*)::int as n from pg_stat_activity where ${release.pid}::int = any(pg_blocking_pids(pid))`) > 0);
    others = Promise.all([1, 2, 3].map((n) => requestScope.run(new RequestScope(), () => settle(accept(tenant, job(appId, 'invoice.paid', { n }))))));
    // A request whose own client left before its group started is not accepted.
    const left = new RequestScope();
    abandoned = requestScope.run(left, () => settle(accept(tenant, job(appId, 'invoice.paid', { n: 4 }))));
    await until('the others to wait for the next group', () => accept.waiting === 4);
    left.abort();
    gone.abort();
  } finally {
    await release();
  }
  t.false('status' in await first, 'the first group had started: its job is accepted');
  const answers = await others;
  t.deepEqual(answers.map((a) => ('status' in a ? a.status : 201)), [201, 201, 201], 'the next group is not refused for the first client\'s leaving');
  t.deepEqual(await abandoned, { status: 503 }, 'a request abandoned before its group started is not accepted');
  const stored = await app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from webhook_jobs where application_id = ${appId} and payload->>'n' = '4'`);
  t.is(stored, 0);
});

test('a group of every kind of request: created, replayed within the group, invalid, unknown type, foreign application; each answered as alone', async (t) => {
  const { key, orgId, appId } = await setup(t);
  const other = await setup(t);
  await createEventType(t, key, 'invoice.paid', INVOICE_SCHEMA);
  const endpoints = [await createEndpoint(t, key, appId, ['invoice.paid']), await createEndpoint(t, key, appId, ['invoice.paid'])];
  const held = await createApplication(t, key);
  const accept = makeJobAcceptor(app.pool, app.queue, { groupsInFlight: 1 });
  const inputs = [
    ...Array.from({ length: 6 }, (_, i) => job(appId, 'invoice.paid', { invoice_id: `in_${i}` })),
    job(appId, 'invoice.paid', { amount: 'not a number' }, 'evt-invalid'),
    job(appId, 'invoice.nope', { invoice_id: 'in_x' }, 'evt-unknown'),
    job(other.appId, 'invoice.paid', { invoice_id: 'in_y' }),
    ...Array.from({ length: 3 }, () => job(appId, 'invoice.paid', { invoice_id: 'in_dup' }, 'evt-dup')),
  ];
  const [firstAnswer, ...answers] = await oneGroup(accept, { orgId, environment: 'live' }, held, inputs);
  t.false((firstAnswer as { replayed: boolean }).replayed);
  const created = answers.slice(0, 6) as Array<{ id: string; replayed: boolean }>;
  for (const answer of created) t.false(answer.replayed, JSON.stringify(answer));
  t.deepEqual(answers.slice(6, 9), [{ status: 400 }, { status: 400 }, { status: 404 }]);
  const dups = answers.slice(9) as Array<{ id: string; replayed: boolean }>;
  t.is(new Set(dups.map((d) => d.id)).size, 1, 'one job for the duplicate event_id');
  t.deepEqual(dups.map((d) => d.replayed).sort(), [false, true, true]);

  t.is(await jobRows(appId), 7, 'six jobs and the duplicate, once');
  t.is(await jobRows(other.appId), 0);
  for (const { id } of [...created, dups[0] as { id: string }]) {
    const deliveries = await deliveriesOf(id);
    t.deepEqual(deliveries.map((d) => d.endpoint_id).sort(), [...endpoints].sort());
    for (const delivery of deliveries) t.is(await messagesFor(delivery.id), 1, 'one queue message a delivery');
  }
  // Every job of the group was written by one transaction.
  t.is(await transactionsOf([...created.map((c) => c.id), (dups[0] as { id: string }).id]), 1);

  // The refused ones claimed nothing: their event_ids are free for a valid job.
  const again = await Promise.all([
    job(appId, 'invoice.paid', { invoice_id: 'in_8' }, 'evt-invalid'), job(appId, 'invoice.paid', { invoice_id: 'in_9' }, 'evt-unknown'),
  ].map((input) => settle(accept({ orgId, environment: 'live' }, input))));
  for (const answer of again) t.false((answer as { replayed: boolean }).replayed, JSON.stringify(answer));
});

// More requests waiting than a group holds used to go in their order of arrival: another
// organization's job waited behind all of one organization's flood (its requests past its rate
// limit too, answered 429 only in their group).
test('with more waiting than a group holds, the next group takes each organization\'s requests in turn', async (t) => {
  const flood = await setup(t);
  const other = await setup(t);
  for (const org of [flood, other]) await createEventType(t, org.key, 'invoice.paid');
  const held = await createApplication(t, flood.key);
  const floodTenant = { orgId: flood.orgId, environment: 'live' } as const;
  const otherTenant = { orgId: other.orgId, environment: 'live' } as const;
  const accept = makeJobAcceptor(app.pool, app.queue, { groupsInFlight: 1, maxGroup: 10 });
  // Each organization's event type looked up once first, so that every request below waits in the order it was made.
  for (const [tenant, appId] of [[floodTenant, flood.appId], [otherTenant, other.appId]] as const) {
    t.true('id' in await settle(accept(tenant, job(appId, 'invoice.paid', { warm: true }))));
  }
  const release = await hold([held]);
  let floods: Answer[];
  let theirs: Answer;
  try {
    const first = settle(accept(floodTenant, job(held, 'invoice.paid', { n: 0 })));
    await until('the first group to start', () => accept.busy === 1 && accept.waiting === 0);
    const waitingFloods = Promise.all(Array.from({ length: 25 }, (_, n) => settle(accept(floodTenant, job(flood.appId, 'invoice.paid', { n: n + 1 })))));
    const waitingTheirs = settle(accept(otherTenant, job(other.appId, 'invoice.paid', { n: 0 })));
    await until('all of them to wait', () => accept.waiting === 26);
    await release();
    t.true('id' in await first);
    [floods, theirs] = [await waitingFloods, await waitingTheirs];
  } finally {
    await release();
  }
  const ids = [...floods, theirs].map((a) => (a as { id: string }).id);
  t.true(ids.every((id) => typeof id === 'string'), JSON.stringify([...floods, theirs]));
  t.is(await transactionsOf([ids[0] as string, ids[25] as string]), 1, 'the other organization\'s job went in the next group, beside the flood\'s first');
  t.is(await transactionsOf(ids.slice(0, 9)), 1, 'the flood\'s first nine with it');
  t.is(await transactionsOf(ids), 3, 'then the flood\'s next ten, then its last six');
});

test('one group at a time while the running group is young: requests that come meanwhile wait and go together', async (t) => {
  const { key, orgId, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  await createEndpoint(t, key, appId, ['invoice.paid']);
  const held = await createApplication(t, key);
  const tenant = { orgId, environment: 'live' } as const;
  // Three groups allowed, but none overlaps a group younger than a minute.
  const accept = makeJobAcceptor(app.pool, app.queue, { groupsInFlight: 3, overlapAfterMs: 60_000 });
  const release = await hold([held]);
  let answers: Answer[];
  try {
    const first = settle(accept(tenant, job(held, 'invoice.paid', { n: 0 })));
    await until('the first group to start', () => accept.busy === 1 && accept.waiting === 0);
    const rest = Promise.all([1, 2, 3].map((n) => settle(accept(tenant, job(appId, 'invoice.paid', { n })))));
    await until('the others to wait', () => accept.waiting === 3);
    await new Promise((resolve) => setTimeout(resolve, 300));
    t.deepEqual([accept.busy, accept.waiting], [1, 3], 'no second group beside a young one');
    await release();
    answers = [await first, ...await rest];
  } finally {
    await release();
  }
  t.true(answers.every((a) => 'id' in a && !a.replayed), JSON.stringify(answers));
  t.is(await transactionsOf(answers.slice(1).map((a) => (a as { id: string }).id)), 1, 'the three waited for one group of their own');
});

/**
 * How many group statements the acceptor had sent when its first group's answer came, with two
 * requests waiting for the next group as the first commits, and `earlyStartAt` as given.
 */
async function statementsSentAtFirstAnswer(t: ExecutionContext, earlyStartAt: number): Promise<number | undefined> {
  const { key, orgId, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  await createEndpoint(t, key, appId, ['invoice.paid']);
  const held = await createApplication(t, key);
  const tenant = { orgId, environment: 'live' } as const;
  // A pool of its own that counts the group statements it has sent.
  let sent = 0;
  const pool = await makePool(app.databaseUrl, {
    maximumPoolSize: 2,
    interceptors: [{
      name: 'count-group-statements',
      beforeQueryExecution: (_context, query) => {
        if (query.sql.includes('accept_job_group(')) sent += 1;
        return null;
      },
    }],
  });
  t.teardown(() => pool.end());
  const accept = makeJobAcceptor(pool, app.queue, { groupsInFlight: 3, overlapAfterMs: 60_000, earlyStartAt });
  const release = await hold([held]);
  let sentAtFirstAnswer: number | undefined;
  let answers: Answer[];
  try {
    const first = settle(accept(tenant, job(held, 'invoice.paid', { n: 0 })).then((answer) => {
      sentAtFirstAnswer = sent;
      return answer;
    }));
    await until('the first group to start', () => accept.busy === 1 && accept.waiting === 0);
    const rest = Promise.all([1, 2].map((n) => settle(accept(tenant, job(appId, 'invoice.paid', { n })))));
    await until('the others to wait', () => accept.waiting === 2);
    t.is(sent, 1);
    await release();
    answers = [await first, ...await rest];
  } finally {
    await release();
  }
  t.true(answers.every((a) => 'id' in a && !a.replayed), JSON.stringify(answers));
  t.is(sent, 2);
  await until('every group to end', () => accept.busy === 0);
  return sentAtFirstAnswer;
}

test('with earlyStartAt requests waiting, a group that committed sends the next group\'s statement before it answers', async (t) => {
  t.is(await statementsSentAtFirstAnswer(t, 2), 2, 'the second group\'s statement was sent before the first group answered');
});

test('with fewer than earlyStartAt waiting, a group that committed answers first, then the next group starts', async (t) => {
  t.is(await statementsSentAtFirstAnswer(t, 3), 1, 'the first group answered before the second group\'s statement was sent');
});

test('a group still running past overlapAfterMs lets the next start beside it, up to groupsInFlight at once', async (t) => {
  const { key, orgId, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  await createEndpoint(t, key, appId, ['invoice.paid']);
  const stalled = [await createApplication(t, key), await createApplication(t, key)];
  const tenant = { orgId, environment: 'live' } as const;
  const accept = makeJobAcceptor(app.pool, app.queue, { groupsInFlight: 2, overlapAfterMs: 50 });
  const release = await hold(stalled);
  let answers: Answer[];
  try {
    let firstSettled = false;
    const first = settle(accept(tenant, job(stalled[0] as string, 'invoice.paid', { n: 0 }))).finally(() => { firstSettled = true; });
    await until('the first group to start', () => accept.busy === 1 && accept.waiting === 0);
    // Another tenant's application behind a stalled one: its group starts beside it and answers.
    const other = await settle(accept(tenant, job(appId, 'invoice.paid', { n: 1 })));
    t.true('id' in other && !other.replayed, JSON.stringify(other));
    await until('the other group to end', () => accept.busy === 1);
    t.false(firstSettled, 'the stalled group still runs');
    const second = settle(accept(tenant, job(stalled[1] as string, 'invoice.paid', { n: 2 })));
    await until('a second stalled group beside the first', () => accept.busy === 2 && accept.waiting === 0);
    const third = settle(accept(tenant, job(appId, 'invoice.paid', { n: 3 })));
    await until('the next to wait', () => accept.waiting === 1);
    await new Promise((resolve) => setTimeout(resolve, 300));
    t.deepEqual([accept.busy, accept.waiting], [2, 1], 'never more than groupsInFlight at once');
    await release();
    answers = [await first, await second, await third];
  } finally {
    await release();
  }
  t.true(answers.every((a) => 'id' in a && !a.replayed), JSON.stringify(answers));
  await until('every group to end', () => accept.busy === 0);
});

test('a group whose transaction fails: each of its jobs is accepted alone, so only the job that fails gets an error', async (t) => {
  const { key, orgId, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  await createEndpoint(t, key, appId, ['invoice.paid']);
  // A server-side failure that one body triggers (this file's own database).
  await app.pool.query(sql.unsafe`
    create function fail_on_boom() returns trigger language plpgsql as $$
    begin
      if new.payload::text like '%boom%' then raise exception 'boom'; end if;
      return new;
    end $$`);
  await app.pool.query(sql.unsafe`create trigger fail_on_boom before insert on webhook_jobs for each row execute function fail_on_boom()`);
  t.teardown(() => app.pool.query(sql.unsafe`drop trigger fail_on_boom on webhook_jobs`));
  const held = await createApplication(t, key);
  const accept = makeJobAcceptor(app.pool, app.queue, { groupsInFlight: 1 });
  const answers = await oneGroup(accept, { orgId, environment: 'live' }, held, [
    job(appId, 'invoice.paid', { n: 1 }), job(appId, 'invoice.paid', { n: 'boom' }), job(appId, 'invoice.paid', { n: 2 }, 'evt-2'),
  ]);
  t.deepEqual(answers.map((a) => ('status' in a ? a.status : 201)), [201, 201, 500, 201]);
  t.is(await jobRows(appId), 2);
  t.is(await jobRows(held), 1);
});

test('over HTTP, 60 concurrent creations across two organizations: each 201 with its own job, deliveries and messages', async (t) => {
  const orgs = [await setup(t), await setup(t)];
  const targets = new Map<string, string>();
  for (const org of orgs) {
    await createEventType(t, org.key, 'invoice.paid');
    targets.set(org.appId, await createEndpoint(t, org.key, org.appId, ['invoice.paid']));
  }
  const responses = await Promise.all(Array.from({ length: 60 }, (_, i) => {
    const org = orgs[i % 2] as (typeof orgs)[number];
    return postJob(org.key, { application_id: org.appId, event_type: 'invoice.paid', payload: { i } });
  }));
  t.deepEqual(responses.map((r) => r.status), Array(60).fill(201));
  t.is(new Set(responses.map((r) => r.body.id)).size, 60);
  for (const [i, res] of responses.entries()) {
    const org = orgs[i % 2] as (typeof orgs)[number];
    t.is(res.body.application_id, org.appId);
    const deliveries = await deliveriesOf(res.body.id);
    t.deepEqual(deliveries.map((d) => d.endpoint_id), [targets.get(org.appId)]);
    t.is(await messagesFor((deliveries[0] as { id: number }).id), 1);
  }
});

test('a group counts its rate limit in its own transaction: each request its own place, those past the limit 429 and not accepted', async (t) => {
  const { key, orgId, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  const held = await createApplication(t, key);
  const accept = makeJobAcceptor(app.pool, app.queue, { groupsInFlight: 1, rule: { limit: 3, periodSeconds: 3600 } });
  const takens: Array<Taken | undefined> = Array(5).fill(undefined);
  const counter = `grouped-test:${orgId}`;
  const answers = await oneGroup(accept, { orgId, environment: 'live' }, held, [
    job(appId, 'invoice.nope', { n: 0 }), // refused as an unknown type, and counted all the same
    ...Array.from({ length: 4 }, (_, i) => job(appId, 'invoice.paid', { n: i + 1 })),
  ], (i) => ({ key: counter, at: undefined, onTaken: (taken) => { takens[i] = taken; } }));
  // The group's order among them is its own (as for concurrent requests): check places, not who got which.
  const statuses = answers.slice(1).map((a) => ('status' in a ? a.status : 201));
  t.deepEqual(takens.map((taken) => taken?.remaining).sort(), [0, 0, 0, 1, 2]);
  statuses.forEach((status, i) => t.is(status === 429, takens[i]?.allowed === false, `request ${i}: ${status}`));
  t.is(statuses.filter((status) => status === 429).length, 2);
  t.is(statuses[0] === 429 || statuses[0] === 400, true, 'the unknown type: refused by the limit or as unknown');
  t.is(await jobRows(appId), statuses.filter((status) => status === 201).length);
  const stored = await app.pool.oneFirst(sql.type(z.object({ count: z.number() }))`select count from rate_limit_counters where key = ${counter}`);
  t.is(stored, 5, 'every request of the group counted once');
});

test('a group confirms its provisional keys first: a deleted key and one without webhooks:write are refused, uncounted; the others accepted', async (t) => {
  const { key, orgId, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  const held = await createApplication(t, key);
  const keyId = async (scopes: string[]) => (await app.request('POST', '/v1/api-keys', { key, body: { name: 'k', scopes } })).body.id as string;
  const [writer, reader, gone] = [await keyId(['webhooks:write']), await keyId(['webhooks:read']), await keyId(['webhooks:write'])];
  await app.request('DELETE', `/v1/api-keys/${gone}`, { key });
  const accept = makeJobAcceptor(app.pool, app.queue, { groupsInFlight: 1, rule: { limit: 100, periodSeconds: 3600 } });
  const counter = `provisional-test:${orgId}`;
  const keys = [writer, gone, reader, undefined];
  const answers = await oneGroup(accept, { orgId, environment: 'live' }, held,
    keys.map((_, i) => job(appId, 'invoice.paid', { n: i })),
    () => ({ key: counter, at: undefined, onTaken: () => {} }),
    (i) => (keys[i] ? { keyId: keys[i] } : undefined));
  t.deepEqual(answers.slice(1).map((a) => ('status' in a ? a.status : 201)), [201, 401, 403, 201]);
  t.is(await jobRows(appId), 2);
  const stored = await app.pool.oneFirst(sql.type(z.object({ count: z.number() }))`select count from rate_limit_counters where key = ${counter}`);
  t.is(stored, 2, 'only the accepted requests counted');
});

/** `pool` with its calls counted by method (transaction, any, query…), to see how a group reached the database. */
function counted(pool: typeof app.pool) {
  const calls = new Map<string, number>();
  const proxy = new Proxy(pool, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        calls.set(String(name), (calls.get(String(name)) ?? 0) + 1);
        return value.apply(target, args);
      };
    },
  });
  return { pool: proxy, calls };
}

test('a group whose checks all pass is one statement, not a transaction: keys confirmed, requests counted, jobs accepted and enqueued together', async (t) => {
  const { key, orgId, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  const endpointId = await createEndpoint(t, key, appId, ['invoice.paid']);
  const held = await createApplication(t, key);
  const writer = (await app.request('POST', '/v1/api-keys', { key, body: { name: 'k', scopes: ['webhooks:write'] } })).body.id as string;
  await app.pool.query(sql.unsafe`update api_keys set last_used_at = null where id = ${writer}`);
  const { pool, calls } = counted(app.pool);
  const accept = makeJobAcceptor(pool, app.queue, { groupsInFlight: 1, rule: { limit: 10, periodSeconds: 3600 } });
  const counter = `one-statement-test:${orgId}`;
  const takens: Array<Taken | undefined> = Array(3).fill(undefined);
  const answers = await oneGroup(accept, { orgId, environment: 'live' }, held,
    [0, 1, 2].map((n) => job(appId, 'invoice.paid', { n })),
    (i) => ({ key: counter, at: undefined, onTaken: (taken) => { takens[i] = taken; } }),
    () => ({ keyId: writer }));
  t.deepEqual(answers.map((a) => ('status' in a ? a.status : 201)), [201, 201, 201, 201]);
  t.is(calls.get('transaction'), undefined, 'no transaction: each group was one statement');
  t.deepEqual(takens.map((taken) => taken?.remaining).sort(), [7, 8, 9], 'each request its own place in the counter');
  const stored = await app.pool.oneFirst(sql.type(z.object({ count: z.number() }))`select count from rate_limit_counters where key = ${counter}`);
  t.is(stored, 3);
  const used = await app.pool.oneFirst(sql.type(z.object({ used: z.boolean() }))`select last_used_at is not null as used from api_keys where id = ${writer}`);
  t.true(used, 'the provisional key confirmed, its use recorded');
  const ids = answers.slice(1).map((a) => ('id' in a ? a.id : ''));
  t.is(await transactionsOf(ids), 1);
  for (const id of ids) {
    const deliveries = await deliveriesOf(id);
    t.deepEqual(deliveries.map((d) => d.endpoint_id), [endpointId]);
    t.is(await messagesFor((deliveries[0] as { id: number }).id), 1);
  }
});

test('a group stores each payload as its own text, whatever it holds: quotes, backslashes, escapes, NUL, lone surrogates, emoji', async (t) => {
  const { key, orgId, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  await createEndpoint(t, key, appId, ['invoice.paid']);
  const held = await createApplication(t, key);
  const accept = makeJobAcceptor(app.pool, app.queue, { groupsInFlight: 1 });
  const payloads: Array<Record<string, unknown>> = [
    { quote: 'say "hi"', backslash: 'C:\\dir\\"x"', escaped: '\\u0041 is not A' },
    { nul: 'a\u0000b', control: '\n\t\r\b\f', lone: '\ud800 and \udfff', emoji: '🦄', cjk: '漢字' },
    { nested: { list: [1, 2.5, -0, 1e21, true, null, '"'], empty: {} }, '"key"': 'v', '': 0 },
    { n: 3 },
  ];
  const answers = await oneGroup(accept, { orgId, environment: 'live' }, held, payloads.map((payload) => job(appId, 'invoice.paid', payload)));
  t.deepEqual(answers.map((a) => ('status' in a ? a.status : 201)), [201, 201, 201, 201, 201]);
  const ids = answers.slice(1).map((a) => ('id' in a ? a.id : ''));
  t.is(await transactionsOf(ids), 1, 'the payloads went in one group');
  for (const [i, id] of ids.entries()) {
    const stored = await app.pool.oneFirst(sql.type(z.object({ text: z.string() }))`select payload::text as text from webhook_jobs where id = ${id}`);
    t.is(stored, JSON.stringify(payloads[i]), `job ${i}: its own payload, as sent`);
  }
});

test('a group with a refused key is taken step by step: the statement that tried it at once leaves nothing behind', async (t) => {
  const { key, orgId, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  const held = await createApplication(t, key);
  const gone = (await app.request('POST', '/v1/api-keys', { key, body: { name: 'k', scopes: ['webhooks:write'] } })).body.id as string;
  await app.request('DELETE', `/v1/api-keys/${gone}`, { key });
  const { pool, calls } = counted(app.pool);
  const accept = makeJobAcceptor(pool, app.queue, { groupsInFlight: 1, rule: { limit: 10, periodSeconds: 3600 } });
  const counter = `step-by-step-test:${orgId}`;
  const answers = await oneGroup(accept, { orgId, environment: 'live' }, held,
    [0, 1].map((n) => job(appId, 'invoice.paid', { n })),
    () => ({ key: counter, at: undefined, onTaken: () => {} }),
    (i) => (i === 0 ? { keyId: gone } : undefined));
  t.deepEqual(answers.map((a) => ('status' in a ? a.status : 201)), [201, 401, 201]);
  t.is(calls.get('transaction'), 1, 'the second group fell back to its transaction');
  t.is(await jobRows(appId), 1);
  const stored = await app.pool.oneFirst(sql.type(z.object({ count: z.number() }))`select count from rate_limit_counters where key = ${counter}`);
  t.is(stored, 1, 'counted once: the refused statement\'s take is gone');
});

/** This test's queue messages, without what differs between any two inserts (their ids, when they were written); a start at that moment said so. */
const messageRows = async () => (await app.pool.any(sql.unsafe`
  select j.*, extract(epoch from j.keep_until - j.start_after) as kept_seconds,
         case when j.start_after = j.created_on then 'when written' else j.start_after::text end as starts
  from pgboss.job j where (j.data->>'deliveryId')::bigint between 900000001 and 900000002
  order by j.data->>'deliveryId'`) as ReadonlyArray<Record<string, unknown>>).map(({ id: _id, created_on: _c, start_after: _s, keep_until: _k, ...rest }) => rest);
const dropMessages = () => app.pool.query(sql.unsafe`delete from pgboss.job where (data->>'deliveryId')::bigint between 900000001 and 900000002`);

test('enqueue_delivery_messages writes a queue message as pg-boss\'s own insert writes it, due now or later', async (t) => {
  const items = [{ delivery_id: 900_000_001, round: 1, start_after: null }, { delivery_id: 900_000_002, round: 2, start_after: new Date(Date.now() + 3_600_000).toISOString() }];
  await app.pool.transaction((tx) => app.queue.enqueue(tx, items));
  const byPgBoss = await messageRows();
  await dropMessages();
  await app.pool.query(sql.unsafe`
    select enqueue_delivery_messages(${DELIVERY_QUEUE}, array[900000001, 900000002]::bigint[], array[1, 2],
                                     array[null, ${items[1]?.start_after ?? ''}]::timestamptz[])`);
  const ours = await messageRows();
  await dropMessages();
  t.is(byPgBoss.length, 2);
  t.deepEqual(ours, byPgBoss);
});

/** applications.webhook_jobs_count beside the jobs the application really has. */
const countsOf = async (appIds: string[]) => app.pool.any(sql.type(z.object({ id: z.string(), counted: z.number(), jobs: z.number() }))`
  select a.id, a.webhook_jobs_count as counted, (select count(*)::int from webhook_jobs j where j.application_id = a.id) as jobs
  from applications a where a.id = any(${sql.array(appIds, 'text')}) order by a.id`);

test('a group counts its jobs into webhook_jobs_count once per application: a replay or a refused job counts nothing', async (t) => {
  const { key, orgId, appId } = await setup(t);
  const second = await createApplication(t, key);
  await createEventType(t, key, 'invoice.paid');
  await createEndpoint(t, key, appId, ['invoice.paid']);
  const held = await createApplication(t, key);
  const accept = makeJobAcceptor(app.pool, app.queue, { groupsInFlight: 1 });
  const answers = await oneGroup(accept, { orgId, environment: 'live' }, held, [
    job(appId, 'invoice.paid', { n: 1 }, 'evt-1'),
    job(appId, 'invoice.paid', { n: 2 }, 'evt-1'), // a replay of the first, in the same group
    job(second, 'invoice.paid', { n: 3 }),
    job(second, 'invoice.nope', { n: 4 }), // refused: unknown type
    job(appId, 'invoice.paid', { n: 5 }),
  ]);
  const statuses = answers.map((a) => ('status' in a ? a.status : a.replayed ? 200 : 201));
  // Which of the two with evt-1 the group takes first is its own order (by job id): one is created, one replays it.
  t.deepEqual([...statuses.slice(1, 3)].sort(), [200, 201]);
  t.deepEqual([statuses[0], ...statuses.slice(3)], [201, 201, 400, 201]);
  const counts = await countsOf([appId, second, held]);
  t.deepEqual(counts.map((c) => c.counted), counts.map((c) => c.jobs), 'the count is the number of jobs');
  t.deepEqual(Object.fromEntries(counts.map((c) => [c.id, c.counted])), { [appId]: 2, [second]: 1, [held]: 1 });
});

test('the count trigger stands down only inside accept_webhook_jobs: an insert after it, in the same transaction, is counted', async (t) => {
  const { key, orgId, appId } = await setup(t);
  const endpointId = await createEndpoint(t, key, appId, []);
  const tenant = { orgId, environment: 'live' } as const;
  await app.pool.transaction(async (tx) => {
    const [rows] = await acceptJobs(tx, [{ tenant, job: {
      id: newId('job'), applicationId: appId, eventType: 'webhook.test', eventId: null, payloadText: '{}', headers: {},
      eventTypeId: null, eventTypeVersion: null, payloadValid: true, endpointId,
    } }]);
    t.is(rows?.[0]?.outcome, 'created');
    await tx.query(sql.unsafe`
      insert into webhook_jobs (id, org_id, environment, application_id, event_type, payload, expires_at)
      values (${newId('job')}, ${orgId}, 'live', ${appId}, 'by.hand', '{}', now() + interval '1 day')`);
  });
  const [counts] = await countsOf([appId]);
  t.deepEqual(counts && [counts.counted, counts.jobs], [2, 2]);
});

test('common jobs of a group are accepted set-based as they would be alone: with targets created, without succeeded at once', async (t) => {
  const { key, orgId, appId } = await setup(t);
  await createEventType(t, key, 'invoice.paid');
  await createEventType(t, key, 'invoice.unheard'); // nobody subscribes to it
  const endpointId = await createEndpoint(t, key, appId, ['invoice.paid']);
  const held = await createApplication(t, key);
  const accept = makeJobAcceptor(app.pool, app.queue, { groupsInFlight: 1 });
  const answers = await oneGroup(accept, { orgId, environment: 'live' }, held, [
    job(appId, 'invoice.paid', { n: 1 }), job(appId, 'invoice.unheard', { n: 2 }), job(appId, 'invoice.paid', { n: 3 }),
  ]);
  const ids = answers.slice(1).map((a) => (a as { id: string }).id);
  // The same job through accept_webhook_job, one job a call, as the endpoint test and a failed group accept.
  const type = await app.pool.one(sql.type(z.object({ id: z.string(), version: z.number() }))`
    select id, event_type_version(updated_at)::float8 as version from event_types where org_id = ${orgId} and name = 'invoice.unheard'`);
  const alone = { id: newId('job') };
  await app.pool.transaction((tx) => acceptJob(tx, { orgId, environment: 'live' }, {
    id: alone.id, applicationId: appId, eventType: 'invoice.unheard', eventId: null, payloadText: '{"n":4}', headers: {},
    eventTypeId: type.id, eventTypeVersion: type.version, payloadValid: true, endpointId: null,
  }));
  const rows = await app.pool.any(sql.type(z.object({ id: z.string(), status: z.string(), completed: z.boolean(), attempt_count: z.number() }))`
    select id, status, completed_at is not null as completed, attempt_count from webhook_jobs
    where id = any(${sql.array([...ids, alone.id], 'text')})`);
  const byId = new Map(rows.map((row) => [row.id, row]));
  t.deepEqual(ids.map((id) => byId.get(id)?.status), ['created', 'succeeded', 'created']);
  t.deepEqual(ids.map((id) => byId.get(id)?.completed), [false, true, false]);
  t.deepEqual({ ...byId.get(alone.id), id: '' }, { ...byId.get(ids[1] ?? ''), id: '' }, 'as a job with no target accepted alone');
  t.deepEqual((await deliveriesOf(ids[0] ?? '')).map((d) => [d.endpoint_id, d.status, d.round]), [[endpointId, 'pending', 1]]);
  t.deepEqual(await deliveriesOf(ids[1] ?? ''), []);
  const [counts] = await countsOf([appId]);
  t.deepEqual(counts && [counts.counted, counts.jobs], [4, 4]);
});
