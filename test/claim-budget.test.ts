// A claim hands out at most a budget of payload bytes (claim_deliveries' p_max_bytes,
// sql/006-claim.sql): the worker holds every payload of its claimed attempts, and
// WORKER_CONCURRENCY payloads of up to 256 KB would not fit in its heap. Sends past the budget
// are deferred to now (a new message, no attempt spent); the first send is made whatever its
// size. Then a real worker delivers more payload bytes than its in-flight budget
// (IN_FLIGHT_BYTES), each job exactly once.
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { claimDeliveries } from '../src/db/deliveries.ts';
import { BACKLOG_PRIORITY, deferredPriority } from '../src/queue.ts';

/** A backlog's message parked by a fetch that passed its busy organization over (sql/006-claim.sql). */
const PARKED_BACKLOG_PRIORITY = -3;
import { claimBytes, IN_FLIGHT_BYTES } from '../src/worker/delivery-loop.ts';
import { startTestApp, type TestApp } from './helpers/app.ts';
import * as fixtures from './helpers/fixtures.ts';
import { startReceiver } from './helpers/receiver.ts';
import { until } from './helpers/until.ts';

// No worker: nothing is claimed unless a test claims it.
const app = startTestApp();
const workerApp = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true', RATE_LIMIT_JOBS_PER_SECOND: '100000' }, { worker: true });

const pendingRow = z.object({ id: z.number(), round: z.number(), job_id: z.string(), status: z.string(), next_attempt_at: z.string().nullable() });

/**
 * A tenant with an endpoint for invoice.paid at each of `urls` and `count` jobs whose payloads
 * are about `bytes` long; with `paused`, the endpoints are paused before the jobs, so that their
 * deliveries wait for them together.
 */
async function tenantJobs(
  t: ExecutionContext, on: TestApp, count: number, bytes: number,
  options: { urls?: string[]; paused?: boolean; filler?: string; storedHeaders?: Record<string, string> } = {},
) {
  const { key } = await on.createOrg();
  const by = { t, on, key };
  const application = await fixtures.createApplication(by, { name: 'Budget' });
  await fixtures.createEventType(by, 'invoice.paid');
  const endpointIds: string[] = [];
  for (const url of options.urls ?? ['https://hooks.example.com/in']) {
    const endpoint = await fixtures.createEndpoint(by, {
      application_id: application.id, url, event_types: ['invoice.paid'], rate_limit_rps: 10_000,
    });
    endpointIds.push(endpoint.id);
    if (options.paused) t.is((await on.request('PATCH', `/v1/endpoints/${endpoint.id}`, { key, body: { status: 'paused' } })).status, 200);
  }
  const ids: string[] = [];
  for (let i = 0; i < count; i += 1) {
    // `bytes` of UTF-8 in the filler, whatever the bytes of its character.
    const filler = options.filler ?? 'x';
    const payload = { n: i, filler: filler.repeat(Math.round(bytes / Buffer.byteLength(filler))) };
    ids.push((await fixtures.createJob(by, { application_id: application.id, event_type: 'invoice.paid', payload })).id);
  }
  if (options.storedHeaders) {
    // Past what the API takes now (MAX_CUSTOM_HEADER_BYTES a set), as rows made before that cap
    // can still hold: written in the rows, on the endpoints and on each job.
    const headers = sql.jsonb(options.storedHeaders);
    await on.pool.query(sql.unsafe`update endpoints set headers = ${headers} where id = any(${sql.array(endpointIds, 'text')})`);
    await on.pool.query(sql.unsafe`update webhook_jobs set headers = ${headers} where id = any(${sql.array(ids, 'text')})`);
  }
  return { key, endpointIds, jobIds: ids };
}

const deliveriesOf = (on: TestApp, jobIds: string[]) => on.pool.any(sql.type(pendingRow)`
  select d.id, d.round, d.job_id, d.status, d.next_attempt_at::text from deliveries d
  where d.job_id = any(${sql.array(jobIds, 'text')}) order by d.id`);

test.serial('sends stop at the byte budget, in delivery order; the rest are deferred to now, without their payload', async (t) => {
  const { jobIds } = await tenantJobs(t, app, 3, 40_000);
  const pending = await deliveriesOf(app, jobIds);
  const before = Date.now();
  const claims = await app.pool.transaction((tx) =>
    claimDeliveries(tx, pending.map((d) => ({ deliveryId: d.id, round: d.round })), 60_000, 100, 100_000));

  t.deepEqual(claims.map((c) => c.action), ['send', 'send', 'defer'], 'two payloads of ~40 KB fit in 100,000 bytes, the third does not');
  t.true(claims.slice(0, 2).every((c) => c.payload.length > 40_000 && JSON.parse(c.payload).filler.length === 40_000));
  const deferred = claims[2];
  t.is(deferred?.payload, '', 'a deferral carries no payload');
  const dueAt = Date.parse(deferred?.start_at ?? '');
  t.true(dueAt >= before - 1000 && dueAt <= Date.now() + 1000, `deferred to now, not to a rate-limit slot: ${deferred?.start_at}`);
  const after = await deliveriesOf(app, jobIds);
  t.deepEqual(after.map((d) => d.status), ['in_flight', 'in_flight', 'pending']);
  t.is(Date.parse(after[2]?.next_attempt_at ?? ''), dueAt, 'the delivery is due when its new message is');
});

/** `count` custom headers of `bytes` each (20 of 4,096: the most a set could hold before MAX_CUSTOM_HEADER_BYTES). */
const fullHeaders = (count: number, bytes: number): Record<string, string> =>
  Object.fromEntries(Array.from({ length: count }, (_, i) => [`X-Filler-${i}`, 'h'.repeat(bytes)]));

test.serial('headers count toward the budget: sends of small payloads with large headers stop at it too', async (t) => {
  // Each send: ~1 KB of payload, 10 headers of 2,000 bytes on its endpoint and the same on its job (~40 KB).
  const { jobIds } = await tenantJobs(t, app, 3, 1000, { storedHeaders: fullHeaders(10, 2000) });
  const pending = await deliveriesOf(app, jobIds);
  const claims = await app.pool.transaction((tx) =>
    claimDeliveries(tx, pending.map((d) => ({ deliveryId: d.id, round: d.round })), 60_000, 100, 100_000));
  t.deepEqual(claims.map((c) => c.action), ['send', 'send', 'defer'], 'two sends of ~41 KB fit in 100,000 bytes, the third does not');
  t.true(claims.slice(0, 2).every((c) => claimBytes(c) > 40_000 && claimBytes(c) < 45_000));
});

test('claimBytes counts what the claim counts: the payload and both sets of headers as jsonb writes them, in bytes', async (t) => {
  const cases: Array<Record<string, string>> = [{}, { 'X-A': 'b' }, { 'X-A': 'b', 'X-Long': 'v'.repeat(4096) }, fullHeaders(20, 4096)];
  for (const headers of cases) {
    const inDatabase = await app.pool.oneFirst(sql.type(z.object({ bytes: z.number() }))`
      select octet_length(${JSON.stringify(headers)}::jsonb::text) as bytes`);
    t.is(claimBytes({ payload: '', endpoint_headers: headers, job_headers: {} }), inDatabase + 2, JSON.stringify(Object.keys(headers)));
  }
  t.is(claimBytes({ payload: '{"a":"中"}', endpoint_headers: {}, job_headers: {} }), 8 + 3 + 2 + 2, 'the payload in UTF-8 bytes, and two empty sets of headers');
});

test.serial('the first send is made whatever its size: a claim never stalls on one large payload', async (t) => {
  const { jobIds } = await tenantJobs(t, app, 2, 200_000);
  const pending = await deliveriesOf(app, jobIds);
  const claims = await app.pool.transaction((tx) =>
    claimDeliveries(tx, pending.map((d) => ({ deliveryId: d.id, round: d.round })), 60_000, 100, 1));
  t.deepEqual(claims.map((c) => c.action), ['send', 'defer']);
  t.true((claims[0]?.payload.length ?? 0) > 200_000);
});

const holdsItsBudget = test.macro(async (t, filler: string, count: number, headers?: Record<string, string>) => {
  // Each answer takes 400 ms, so the attempts the worker holds at once are the requests open at
  // once. Three receivers, so three origins: the worker keeps at most 64 connections per origin.
  let open = 0;
  let mostOpen = 0;
  const slow = () => {
    open += 1;
    mostOpen = Math.max(mostOpen, open);
    return new Promise<{ status: number }>((resolve) => setTimeout(() => {
      open -= 1;
      resolve({ status: 200 });
    }, 400));
  };
  const receivers = await Promise.all([1, 2, 3].map(() => startReceiver(slow, { maxHeaderSize: 256 * 1024 })));
  t.teardown(() => Promise.all(receivers.map((r) => r.close())));
  // 3 × count deliveries of ~240 KB (270: about 65 MB, four times IN_FLIGHT_BYTES, 16 MB), all
  // due at once when their endpoints are un-paused; or of ~1 KB with headers of ~165 KB. WORKER_CONCURRENCY (800) and 64 connections
  // to each of three origins alone would start 192 at once.
  const bytes = headers ? 1000 : 240_000;
  const { key, endpointIds, jobIds } = await tenantJobs(t, workerApp, count, bytes, {
    urls: receivers.map((r) => r.at('/hooks')), paused: true, filler, ...(headers ? { storedHeaders: headers } : {}),
  });
  await until('every delivery held by its paused endpoint', async () => {
    const rows = await deliveriesOf(workerApp, jobIds);
    return rows.length === 3 * count && rows.every((d) => d.status === 'held') ? true : undefined;
  }, 60_000);
  // Un-paused, their held deliveries are a backlog (BACKLOG_PRIORITY): the sends a claim defers
  // past the budget stay one, never ahead of other tenants' fresh deliveries.
  for (const id of endpointIds) t.is((await workerApp.request('PATCH', `/v1/endpoints/${id}`, { key, body: { status: 'active' } })).status, 200);
  const priorities = new Set<number>();
  await until('every delivery made', async () => {
    for (const priority of await workerApp.pool.anyFirst(sql.type(z.object({ priority: z.number() }))`
      select distinct q.priority from pgboss.job q join deliveries d on d.id = (q.data->>'deliveryId')::bigint
      where q.name = 'deliveries' and q.state = 'created' and d.job_id = any(${sql.array(jobIds, 'text')})`)) {
      priorities.add(priority);
    }
    const rows = await deliveriesOf(workerApp, jobIds);
    return rows.length === 3 * count && rows.every((d) => d.status === 'succeeded') ? true : undefined;
  }, 60_000);
  // Behind fresh work: at -2, or parked at -3 when an exchange took over a second and made the
  // organization slow (a busy machine: the fetch then passes its messages over); never at 0 or -1.
  t.true(priorities.has(BACKLOG_PRIORITY), [...priorities].join(','));
  t.true([...priorities].every((p) => p === BACKLOG_PRIORITY || p === PARKED_BACKLOG_PRIORITY),
    `deferred past the budget, a backlog stays behind fresh work: ${[...priorities].join(',')}`);
  for (const receiver of receivers) {
    t.deepEqual(receiver.arrivals.map((a) => a.headers['webhook-id']).sort(), [...jobIds].sort(), 'each job arrived once at each receiver');
    t.true(receiver.arrivals.every((a) => Buffer.byteLength(a.body) > bytes), 'with its whole payload');
  }
  const perSend = bytes + (headers ? 2 * claimBytes({ payload: '', endpoint_headers: headers, job_headers: {} }) : 0);
  const budget = Math.floor(IN_FLIGHT_BYTES / perSend) + 1;
  t.log(`${mostOpen} attempts held at once, budget ${budget}`);
  t.true(mostOpen <= budget, `at most ${budget} attempts held at once: ${mostOpen}`);
  t.true(mostOpen >= budget / 2, `the budget, not something else, bounded them: ${mostOpen} at once`);
});

test.serial('a worker holds at most its in-flight budget of payloads, and delivers them all, each once', holdsItsBudget, 'x', 90);
// The budget is of bytes, as the claim counts them: counted in UTF-16 units, payloads of
// three-byte characters counted a third of their size, and the worker held almost three times
// the budget of them (a probe of a running service).
test.serial('the budget counts bytes: payloads of three-byte characters are held to it too', holdsItsBudget, '中', 60);
// And headers: 20 of 4 KB on the endpoint and on each job are about 165 KB a send, held past the
// budget while only payloads counted (a probe of a running service). The API now takes at most
// 6 KB a set (test/custom-header-limits.test.ts); rows made before that cap can still hold these.
test.serial('the budget counts headers: small payloads with the most headers are held to it too', holdsItsBudget, 'x', 90, fullHeaders(20, 4096));

test('a deferral keeps its message\'s priority, unparked', (t) => {
  t.deepEqual([1, 0, -1, -2, -3, undefined].map(deferredPriority), [1, 0, 0, -2, -2, 0],
    'a probe stays ahead, a backlog behind; parked messages come back to their own band; pg-boss\'s own fetch names none');
});
