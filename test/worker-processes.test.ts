// Worker processes for real (node src/main.ts worker) against one database: a SIGKILL mid-attempt
// loses no delivery (the lease hands it out again), SIGTERM records in-flight attempts before
// exiting 0, the per-endpoint rate limit holds across two processes, the hourly upkeep archives
// finished jobs, and success rates follow the recorded attempts.
//
// The tests are serial: every worker process delivers every queued message of the database, so
// each test starts its own worker(s) and stops them before the next test begins.
import { readdir, readFile, readlink } from 'node:fs/promises';
import test, { type ExecutionContext } from 'ava';
import pg from 'pg';
import { sql } from 'slonik';
import { z } from 'zod';
import { startTestApp } from './helpers/app.ts';
import { startScript, STARTUP_TIMEOUT_MS, type Started } from './helpers/process.ts';
import * as shared from './helpers/receiver.ts';
import { within } from '../src/within.ts';
import { until } from './helpers/until.ts';

const app = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true' });

/** node-pg-migrate's advisory lock id: held by whichever process is running migrations. */
const PG_MIGRATE_LOCK_ID = '7241865325823964';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------- receivers

type Arrival = { id: string; at: number; path: string; body: string; remotePort: number };
type Reply = (status: number, body?: string) => void;
type Receiver = { url: (path?: string) => string; arrivals: Arrival[]; close(): Promise<void> };

/**
 * The shared recording receiver, seen as this file's tests want it: each arrival by its
 * webhook-id, answered through `reply` whenever the test decides (a held request stays open).
 */
async function startReceiver(handle: (arrival: Arrival, reply: Reply) => void): Promise<Receiver> {
  const view = (a: shared.Arrival): Arrival => ({
    id: String(a.headers['webhook-id'] ?? ''), at: a.at, path: a.url, body: a.body.toString('utf8'), remotePort: a.remotePort,
  });
  const receiver = await shared.startReceiver((arrival, _index, { res }) => {
    handle(view(arrival), (status, text = 'ok') => {
      if (res.headersSent || res.destroyed) return; // answered already, or the caller hung up (a killed worker)
      res.writeHead(status, { 'content-type': 'text/plain' }).end(text);
    });
  });
  return {
    url: (path = '/hook') => receiver.at(path),
    get arrivals() { return receiver.arrivals.map(view); },
    close: () => receiver.close(),
  };
}

/**
 * A receiver that holds each request open (answered 200 after `holdMs` at most) until `letGo()`,
 * which answers those held and makes it answer every later request at once. Closed when the
 * test ends.
 */
async function holdingReceiver(t: ExecutionContext, holdMs: number): Promise<Receiver & { letGo(): void }> {
  let holding = true;
  const held: Reply[] = [];
  const receiver = await startReceiver((_arrival, reply) => {
    if (!holding) return reply(200);
    held.push(reply);
    setTimeout(() => reply(200), holdMs).unref();
  });
  t.teardown(() => receiver.close());
  return {
    url: receiver.url,
    get arrivals() { return receiver.arrivals; },
    close: () => receiver.close(),
    letGo() {
      holding = false;
      for (const reply of held) reply(200);
    },
  };
}

async function processOwningPort(port: number, pids: readonly number[]): Promise<number | null> {
  const hexPort = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  const inodes = new Set((await readFile('/proc/net/tcp', 'utf8')).split('\n').slice(1)
    .map((line) => line.trim().split(/\s+/))
    .filter((fields) => fields[1]?.endsWith(hexPort))
    .map((fields) => `socket:[${fields[9]}]`));
  for (const pid of pids) {
    for (const fd of await readdir(`/proc/${pid}/fd`).catch(() => [] as string[])) {
      if (inodes.has(await readlink(`/proc/${pid}/fd/${fd}`).catch(() => ''))) return pid;
    }
  }
  return null;
}

// ---------------------------------------------------------------- worker processes

const WORKER_ENV = {
  ALLOW_PRIVATE_DESTINATIONS: 'true',
  DELIVERY_LEASE_SECONDS: '30',
  RETRY_SCHEDULE: '1,1,1,1,1,1',
};

/** Starts `node src/main.ts worker` on the file's database; it is stopped when the test ends. */
async function startWorkerProcess(t: ExecutionContext, env: Record<string, string> = {}, spawned?: (worker: Started) => void): Promise<Started> {
  const worker = startScript('src/main.ts', ['worker'], { DATABASE_URL: app.databaseUrl, ...WORKER_ENV, ...env });
  t.teardown(() => stopWorkerProcess(worker));
  spawned?.(worker);
  await worker.waitForLog((line) => line.msg === 'worker started');
  return worker;
}

/** How the process exited, or 'still running' after `ms`. */
const exitWithin = (worker: Started, ms: number) =>
  within(worker.exited, ms, 'still running' as const);

/** The process's JSON log lines at level error or above, as written. */
const errorLines = (worker: Started) =>
  worker.stdout().split('\n').filter((line) => line.startsWith('{') && (JSON.parse(line) as { level: number }).level >= 50);

async function stopWorkerProcess(worker: Started): Promise<void> {
  if (worker.child.exitCode !== null || worker.child.signalCode !== null) return;
  worker.child.kill('SIGTERM');
  const stopped = await within(worker.exited.then(() => true), 15_000, false);
  if (!stopped) {
    worker.child.kill('SIGKILL');
    await worker.exited;
  }
}

// ---------------------------------------------------------------- API helpers

async function ok(t: ExecutionContext, method: string, path: string, key: string, body: unknown, status: number) {
  const res = await app.request(method, path, { key, body });
  t.is(res.status, status, `${method} ${path}: ${JSON.stringify(res.body)}`);
  if (res.status !== status) throw new Error(`${method} ${path} answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body;
}

/** A new organization with one application and the given event types. */
async function setup(t: ExecutionContext, eventTypes: string[]) {
  const { key } = await app.createOrg();
  const application = await ok(t, 'POST', '/v1/applications', key, { name: 'Workers' }, 201);
  for (const name of eventTypes) await ok(t, 'POST', '/v1/event-types', key, { name }, 201);
  return { key, appId: application.id as string };
}

async function createEndpoint(t: ExecutionContext, key: string, body: Record<string, unknown>): Promise<string> {
  return (await ok(t, 'POST', '/v1/endpoints', key, body, 201)).id as string;
}

/** Creates a job; a 429 of the per-organization creation limit waits its Retry-After and tries again. */
async function createJob(t: ExecutionContext, key: string, appId: string, eventType: string, payload: Record<string, unknown>) {
  for (;;) {
    const res = await app.request('POST', '/v1/webhook-jobs', { key, body: { application_id: appId, event_type: eventType, payload } });
    if (res.status === 429) {
      await sleep(1000 * Number(res.headers.get('retry-after') ?? '1'));
      continue;
    }
    t.is(res.status, 201, JSON.stringify(res.body));
    if (res.status !== 201) throw new Error(`could not create a job: ${JSON.stringify(res.body)}`);
    return res.body.id as string;
  }
}

async function jobStatus(key: string, id: string): Promise<string> {
  const res = await app.request('GET', `/v1/webhook-jobs/${id}`, { key });
  if (res.status !== 200) throw new Error(`GET job ${id}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.status as string;
}

async function jobStatuses(key: string, ids: readonly string[]): Promise<string[]> {
  return Promise.all(ids.map((id) => jobStatus(key, id)));
}

// ---------------------------------------------------------------- SQL helpers

const deliveryRow = z.object({ id: z.number(), job_id: z.string(), status: z.string(), attempt_count: z.number() });

async function deliveriesOf(jobIds: readonly string[]) {
  return app.pool.any(sql.type(deliveryRow)`
    select id, job_id, status, attempt_count from deliveries where job_id = any(${sql.array([...jobIds], 'text')}) order by id`);
}

const attemptRow = z.object({
  delivery_id: z.number(), job_id: z.string(), attempt: z.number(), status_code: z.number().nullable(),
  success: z.boolean(), error: z.string().nullable(), attempted_at: z.string(), latency_ms: z.number().nullable(),
});

async function attemptsOf(jobIds: readonly string[]) {
  return app.pool.any(sql.type(attemptRow)`
    select delivery_id, job_id, attempt, status_code, success, error, attempted_at, latency_ms
    from delivery_attempts where job_id = any(${sql.array([...jobIds], 'text')}) order by attempted_at, id`);
}

/** pg-boss message states of these deliveries' queue messages, e.g. { completed: 12 } (a rate-limit deferral completes one and queues another). */
async function messageStates(deliveryIds: readonly number[]): Promise<Record<string, number>> {
  const rows = await app.pool.any(sql.type(z.object({ state: z.string(), n: z.number() }))`
    select state::text as state, count(*)::int as n from pgboss.job
    where name = 'deliveries' and (data->>'deliveryId')::bigint = any(${sql.array([...deliveryIds], 'int8')})
    group by 1 order by 1`);
  return Object.fromEntries(rows.map((r) => [r.state, r.n]));
}

const count = (values: readonly string[]) => {
  const counts = new Map<string, number>();
  for (const value of values) counts.set(value, (counts.get(value) ?? 0) + 1);
  return counts;
};

/** The largest number of times within any half-open window [t, t + 1000 ms) starting at one of them. */
function maxPerSecond(times: readonly number[], windowMs = 1000): number {
  const sorted = [...times].sort((a, b) => a - b);
  let max = 0;
  for (let i = 0, j = 0; i < sorted.length; i += 1) {
    while (j < sorted.length && (sorted[j] ?? 0) < (sorted[i] ?? 0) + windowMs) j += 1;
    max = Math.max(max, j - i);
  }
  return max;
}

// ---------------------------------------------------------------- tests

test.serial('SIGKILL mid-attempt loses no delivery: after the lease a second worker re-attempts and every job succeeds', async (t) => {
  // Held open until the test lets go after the kill (at most 30 s); answers at once after it.
  // No shorter hold: on a loaded machine the test may take seconds to see the attempts in
  // flight and kill, and an answer before the kill would be recorded.
  const receiver = await holdingReceiver(t, 30_000);
  const { key, appId } = await setup(t, ['order.killed']);
  await createEndpoint(t, key, { application_id: appId, url: receiver.url(), event_types: ['order.killed'] });
  // An attempt is cut at the lease minus 5 s (at least 1 s): a 10 s lease lets an attempt wait
  // 5 s for its answer, so a slow kill still finds it in flight rather than timed out.
  const leaseEnv = { DELIVERY_LEASE_SECONDS: '10' };
  const first = await startWorkerProcess(t, leaseEnv);

  const jobIds: string[] = [];
  for (let i = 0; i < 10; i += 1) jobIds.push(await createJob(t, key, appId, 'order.killed', { n: i }));

  // The receiver holds requests and SQL shows their deliveries in flight (all 10, or some after 600 ms).
  const firstSeen = await until('the first worker to reach the receiver', async () => receiver.arrivals.length > 0 && Date.now());
  const inFlight = await until('deliveries in flight, each held at the receiver', async () => {
    const rows = (await deliveriesOf(jobIds)).filter((d) => d.status === 'in_flight');
    const seen = new Set(receiver.arrivals.map((a) => a.id));
    if (rows.length === 0 || !rows.every((d) => seen.has(d.job_id))) return undefined;
    return rows.length === 10 || Date.now() - firstSeen > 600 ? rows : undefined;
  });
  const killedAt = Date.now();
  first.child.kill('SIGKILL');
  t.deepEqual(await first.exited, { code: null, signal: 'SIGKILL' });
  const seenBeforeKill = new Set(receiver.arrivals.filter((a) => a.at < killedAt).map((a) => a.id));
  receiver.letGo();

  // Nothing of the killed attempts was recorded.
  t.deepEqual(await attemptsOf(jobIds), [], 'the killed worker recorded no attempt');
  t.true(inFlight.every((d) => seenBeforeKill.has(d.job_id)), 'deliveries in flight had reached the receiver');

  // The lease is 10 s and the second worker supervises every 5 s: the killed attempts are due
  // again within 15 s. 60 s leaves room for a loaded machine.
  await startWorkerProcess(t, leaseEnv);
  try {
    await until('every job to succeed after the kill', async () => (await jobStatuses(key, jobIds)).every((s) => s === 'succeeded'), 60_000);
  } catch {
    const states = await messageStates(inFlight.map((d) => d.id));
    const statuses = count((await deliveriesOf(jobIds)).map((d) => d.status));
    const redone = receiver.arrivals.filter((a) => a.at > killedAt).length;
    t.fail(`20 s after the kill (DELIVERY_LEASE_SECONDS 4) the killed attempts were not redone: deliveries ${JSON.stringify(Object.fromEntries(statuses))}, `
      + `their queue messages ${JSON.stringify(states)}, ${redone} requests since the kill`);
    return;
  }
  t.log(`every job succeeded ${Date.now() - killedAt} ms after the kill`);

  t.deepEqual(await jobStatuses(key, jobIds), Array(10).fill('succeeded'));
  const deliveries = await deliveriesOf(jobIds);
  t.is(deliveries.length, 10, 'one delivery per job, none lost, none added');
  t.deepEqual(deliveries.map((d) => d.status), Array(10).fill('succeeded'));
  t.deepEqual([...new Set(deliveries.map((d) => d.job_id))].sort(), [...jobIds].sort());

  // Every job reached the receiver (duplicates allowed), with its own webhook-id.
  const arrivedIds = count(receiver.arrivals.map((a) => a.id));
  t.deepEqual([...arrivedIds.keys()].sort(), [...jobIds].sort());

  // The deliveries that were in flight at the kill were attempted again, after it.
  const attempts = await attemptsOf(jobIds);
  for (const delivery of inFlight) {
    const after = receiver.arrivals.filter((a) => a.id === delivery.job_id && a.at > killedAt);
    t.true(after.length >= 1, `job ${delivery.job_id} was re-attempted after the kill`);
    const recorded = attempts.filter((a) => a.delivery_id === delivery.id);
    t.true(recorded.length >= 1);
    t.true(recorded.every((a) => Date.parse(a.attempted_at) >= killedAt), 'its recorded attempts started after the kill');
    t.true(recorded.some((a) => a.success && a.status_code === 200));
  }
  // Every delivery has a successful attempt on record, and its queue messages are all settled.
  for (const delivery of deliveries) {
    t.true(attempts.some((a) => a.delivery_id === delivery.id && a.success), `delivery ${delivery.id} has a success recorded`);
  }
  t.deepEqual(await messageStates(deliveries.map((d) => d.id)), {}, 'every queue message settled: deleted, none left to redo');
  t.log(`in flight at the kill: ${inFlight.length}; arrivals ${receiver.arrivals.length} for 10 jobs`);
});

test.serial('SIGKILL with the default lease: the attempts are redone after DELIVERY_HEARTBEAT_SECONDS, not after the 180 s lease', async (t) => {
  // Before the heartbeat, a dead worker's deliveries waited for the lease (DELIVERY_LEASE_SECONDS,
  // 180 s by default, as long as the largest timeout_ms allows): three minutes and more for every
  // crash. A heartbeat of 10 s (its least) is checked every 10 s: redone 10-20 s after the kill.
  const receiver = await holdingReceiver(t, 30_000);
  const { key, appId } = await setup(t, ['order.beat']);
  await createEndpoint(t, key, { application_id: appId, url: receiver.url(), event_types: ['order.beat'], timeout_ms: 60_000 });
  const env = { DELIVERY_LEASE_SECONDS: '180', DELIVERY_HEARTBEAT_SECONDS: '10' };
  const first = await startWorkerProcess(t, env);
  const jobIds: string[] = [];
  for (let i = 0; i < 3; i += 1) jobIds.push(await createJob(t, key, appId, 'order.beat', { n: i }));
  await until('the three requests held at the receiver', () => new Set(receiver.arrivals.map((a) => a.id)).size === 3);
  const killedAt = Date.now();
  first.child.kill('SIGKILL');
  await first.exited;
  receiver.letGo();
  t.deepEqual((await deliveriesOf(jobIds)).map((d) => d.status), Array(3).fill('in_flight'));

  await startWorkerProcess(t, env);
  await until('the three deliveries redone after the kill', async () => (await deliveriesOf(jobIds)).every((d) => d.status === 'succeeded'), 90_000);
  const redoneAfterMs = Date.now() - killedAt;
  t.log(`redone ${redoneAfterMs} ms after the kill`);
  t.true(redoneAfterMs < 120_000, 'well inside the lease');
  const attempts = await attemptsOf(jobIds);
  t.is(attempts.length, 3);
  t.true(attempts.every((a) => a.attempt === 1 && a.success && Date.parse(a.attempted_at) > killedAt), 'one attempt each, the redo');
});

test.serial('a live worker\'s attempt that outlasts DELIVERY_HEARTBEAT_SECONDS keeps its claim: its heartbeat is refreshed, nobody sends it twice', async (t) => {
  // Answered after 25 s: past the 10 s heartbeat and the 10 s between the queue's checks, so a
  // claim whose heartbeat nobody refreshed would have been handed out again (and sent twice).
  const receiver = await startReceiver((_arrival, reply) => setTimeout(() => reply(200), 25_000).unref());
  t.teardown(() => receiver.close());
  const { key, appId } = await setup(t, ['order.slow']);
  await createEndpoint(t, key, { application_id: appId, url: receiver.url(), event_types: ['order.slow'], timeout_ms: 60_000 });
  await startWorkerProcess(t, { DELIVERY_LEASE_SECONDS: '180', DELIVERY_HEARTBEAT_SECONDS: '10' });
  const jobId = await createJob(t, key, appId, 'order.slow', { n: 1 });
  await until('the delivery recorded', async () => (await deliveriesOf([jobId]))[0]?.status === 'succeeded', 60_000);
  t.is(receiver.arrivals.filter((a) => a.id === jobId).length, 1, 'sent once');
  const attempts = await attemptsOf([jobId]);
  t.is(attempts.length, 1);
  t.like(attempts[0], { attempt: 1, success: true, status_code: 200 });
  t.true((attempts[0]?.latency_ms ?? 0) >= 24_000, 'the answer took its 25 s');
});

const opDeliveryRow = z.object({ status: z.string(), attempt_count: z.number() });
/** The operational deliveries of an organization's events (one operational endpoint each here). */
const opDeliveriesOf = (orgId: string) => app.pool.any(sql.type(opDeliveryRow)`
  select d.status, d.attempt_count from operational_deliveries d join operational_events e on e.id = d.event_id
  where e.org_id = ${orgId} order by d.id`);

/** An organization with an operational endpoint at `url`, and one event for it: the creation of an endpoint. Returns the organization. */
async function oneOperationalEvent(t: ExecutionContext, url: string): Promise<string> {
  const { key, orgId } = await app.createOrg();
  const application = await ok(t, 'POST', '/v1/applications', key, { name: 'Operations' }, 201);
  await ok(t, 'POST', '/v1/event-types', key, { name: 'order.op' }, 201);
  await ok(t, 'POST', '/v1/operational-webhooks/endpoints', key, { url }, 201);
  await createEndpoint(t, key, { application_id: application.id, url: 'https://hooks.example.com/in', event_types: ['order.op'] });
  return orgId;
}

test.serial('SIGKILL during an operational event\'s attempt: redone after DELIVERY_HEARTBEAT_SECONDS, not after the 180 s lease', async (t) => {
  const receiver = await holdingReceiver(t, 14_000);
  const env = { DELIVERY_LEASE_SECONDS: '180', DELIVERY_HEARTBEAT_SECONDS: '10' };
  const first = await startWorkerProcess(t, env);
  const orgId = await oneOperationalEvent(t, receiver.url('/ops'));
  await until('the event held at the receiver', () => receiver.arrivals.length === 1);
  const killedAt = Date.now();
  first.child.kill('SIGKILL');
  await first.exited;
  receiver.letGo();
  t.deepEqual(await opDeliveriesOf(orgId), [{ status: 'in_flight', attempt_count: 0 }]);

  await startWorkerProcess(t, env);
  await until('the event redone after the kill', async () => (await opDeliveriesOf(orgId))[0]?.status === 'succeeded', 90_000);
  const redoneAfterMs = Date.now() - killedAt;
  t.log(`redone ${redoneAfterMs} ms after the kill`);
  t.true(redoneAfterMs < 60_000, 'well inside the lease');
  t.deepEqual(await opDeliveriesOf(orgId), [{ status: 'succeeded', attempt_count: 1 }]);
  t.is(receiver.arrivals.length, 2, 'sent twice: the attempt the kill cut, then the redo');
});

test.serial('an operational event\'s attempt that outlasts DELIVERY_HEARTBEAT_SECONDS keeps its claim: another worker does not send it again', async (t) => {
  const receiver = await startReceiver((_arrival, reply) => setTimeout(() => reply(200), 13_000).unref());
  t.teardown(() => receiver.close());
  const env = { DELIVERY_LEASE_SECONDS: '180', DELIVERY_HEARTBEAT_SECONDS: '10' };
  await startWorkerProcess(t, env);
  await startWorkerProcess(t, env);
  const orgId = await oneOperationalEvent(t, receiver.url('/ops'));
  await until('the event delivered', async () => (await opDeliveriesOf(orgId))[0]?.status === 'succeeded', 60_000);
  t.deepEqual(await opDeliveriesOf(orgId), [{ status: 'succeeded', attempt_count: 1 }]);
  t.is(receiver.arrivals.length, 1, 'sent once');
});

test.serial('SIGTERM: in-flight attempts finish and are recorded before the process exits 0; nothing new is fetched', async (t) => {
  const responded = new Map<string, number>();
  const receiver = await startReceiver((arrival, reply) => {
    setTimeout(() => {
      reply(200, 'thanks');
      responded.set(arrival.id, Date.now());
    }, 1000);
  });
  const { key, appId } = await setup(t, ['order.term']);
  await createEndpoint(t, key, { application_id: appId, url: receiver.url(), event_types: ['order.term'] });
  // A 30 s lease: anything not recorded before exit could only be redone 30 s later.
  const worker = await startWorkerProcess(t, { DELIVERY_LEASE_SECONDS: '30' });

  const jobIds: string[] = [];
  for (let i = 0; i < 5; i += 1) jobIds.push(await createJob(t, key, appId, 'order.term', { n: i }));
  await until('5 requests held at the receiver', async () => new Set(receiver.arrivals.map((a) => a.id)).size === 5);
  const inFlight = await until('5 deliveries in flight', async () => {
    const rows = await deliveriesOf(jobIds);
    return rows.filter((d) => d.status === 'in_flight').length === 5 && rows;
  });
  t.is(responded.size, 0, 'no request was answered before the signal');

  const termAt = Date.now();
  worker.child.kill('SIGTERM');
  await worker.waitForLog((line) => line.msg === 'stopping');
  await sleep(200); // let the loop see `running = false` before the next job exists
  const lateJob = await createJob(t, key, appId, 'order.term', { late: true });

  const exit = await worker.exited;
  const exitedAt = Date.now();
  t.deepEqual(exit, { code: 0, signal: null });
  t.truthy(await worker.waitForLog((line) => line.msg === 'stopped', 1000));
  t.false(worker.stdout().includes('stopping with attempts still running'));

  // Recorded at once, not after a lease: rows exist the moment the process is gone.
  const deliveries = await deliveriesOf(jobIds);
  t.deepEqual(deliveries.map((d) => d.status), Array(5).fill('succeeded'));
  t.deepEqual(deliveries.map((d) => d.attempt_count), Array(5).fill(1));
  const attempts = await attemptsOf(jobIds);
  t.is(attempts.length, 5, JSON.stringify(attempts));
  for (const delivery of inFlight) {
    const rows = attempts.filter((a) => a.delivery_id === delivery.id);
    t.is(rows.length, 1);
    t.like(rows[0], { attempt: 1, success: true, status_code: 200, error: null });
    t.true(Date.parse(rows[0]?.attempted_at ?? '') < termAt, 'the recorded attempt is the one started before SIGTERM');
    const answeredAt = responded.get(delivery.job_id);
    t.truthy(answeredAt, `the receiver answered job ${delivery.job_id}`);
    t.true((answeredAt ?? Infinity) < exitedAt, 'the process waited for the answer before exiting');
  }
  t.deepEqual(await messageStates(inFlight.map((d) => d.id)), {}, 'their queue messages are settled (deleted) too');
  t.deepEqual(await jobStatuses(key, jobIds), Array(5).fill('succeeded'));
  t.deepEqual([...count(receiver.arrivals.map((a) => a.id)).values()], Array(5).fill(1), 'each attempted exactly once');

  // The job created after SIGTERM was not fetched: still pending, never sent.
  const [late] = await deliveriesOf([lateJob]);
  t.like(late, { status: 'pending', attempt_count: 0 });
  t.false(receiver.arrivals.some((a) => a.id === lateJob));
  t.is(await jobStatus(key, lateJob), 'created');
  await ok(t, 'POST', `/v1/webhook-jobs/${lateJob}/cancel`, key, undefined, 200); // leave nothing for the next test's worker
});

test.serial('SIGTERM with an attempt still hanging: the worker gives up on it after SHUTDOWN_TIMEOUT_MS, records nothing, hands it back, exits 0; the next worker redoes it at once, not after the lease', async (t) => {
  // A graceful close of the connection pools waited for the hanging request, past the shutdown
  // timeout up to the attempt's own (here the lease's cap, 25 s), and then an error was logged:
  // the recording of its outcome met a closed database pool. And the delivery given up on waited
  // for its lease to end (DELIVERY_LEASE_SECONDS, 180 by default) before any worker redid it.
  let jobId = '';
  let sent = 0;
  const receiver = await startReceiver((arrival, reply) => {
    if (arrival.id === jobId && (sent += 1) === 1) return; // the job's first request: never answered
    reply(200);
  });
  t.teardown(() => receiver.close());
  const { key, appId } = await setup(t, ['order.hang']);
  await createEndpoint(t, key, { application_id: appId, url: receiver.url(), event_types: ['order.hang'], timeout_ms: 60_000 });
  // The default lease (180 s): only a hand-back lets the next worker redo the attempt within the test.
  const lease = { DELIVERY_LEASE_SECONDS: '180' };
  const worker = await startWorkerProcess(t, { SHUTDOWN_TIMEOUT_MS: '1000', ...lease });
  jobId = await createJob(t, key, appId, 'order.hang', { n: 1 });
  await until('the request held at the receiver', () => receiver.arrivals.some((a) => a.id === jobId));

  worker.child.kill('SIGTERM');
  t.deepEqual(await exitWithin(worker, 15_000), { code: 0, signal: null }, 'exited well before the attempt could time out');
  t.true(worker.stdout().includes('stopping with attempts still running'));
  t.deepEqual(errorLines(worker), [], 'no error logged');
  t.truthy(await worker.waitForLog((line) => line.msg === 'attempts given up on handed back to the queue: due at once' && line.messages === 1, 1000));
  // Not recorded: no attempt counted, the delivery still in flight, and its message due now.
  t.deepEqual(await attemptsOf([jobId]), []);
  const [delivery] = await deliveriesOf([jobId]);
  t.like(delivery, { status: 'in_flight', attempt_count: 0 });
  const due = await app.pool.oneFirst(sql.type(z.object({ due: z.boolean() }))`
    select bool_and(state = 'retry' and start_after <= now()) as due from pgboss.job
    where name = 'deliveries' and (data->>'deliveryId')::bigint = ${delivery?.id ?? 0}`);
  t.true(due, 'its queue message is due again at once, not leased until the lease ends');

  // The next worker, with the same 180 s lease, redoes it now; one attempt is recorded: the redo.
  const handedBackAt = Date.now();
  await startWorkerProcess(t, lease);
  await until('the delivery redone by the next worker', async () => (await deliveriesOf([jobId]))[0]?.status === 'succeeded', 60_000);
  t.log(`redone ${Date.now() - handedBackAt} ms after the first worker exited`);
  t.is(receiver.arrivals.filter((a) => a.id === jobId).length, 2, 'sent twice: the attempt given up on and its redo');
  const attempts = await attemptsOf([jobId]);
  t.is(attempts.length, 1);
  t.like(attempts[0], { attempt: 1, success: true, status_code: 200 });
  t.like((await deliveriesOf([jobId]))[0], { status: 'succeeded', attempt_count: 1 });
  t.deepEqual(await messageStates([delivery?.id ?? 0]), {}, 'its queue message settled');
});

test.serial('SIGTERM with an operational attempt still hanging: the worker stops within SHUTDOWN_TIMEOUT_MS, records nothing and hands the event back, due at once', async (t) => {
  // A probe: with SHUTDOWN_TIMEOUT_MS=2000 a worker took 14 s to stop, waiting out the
  // operational attempt's own 15 s timeout, after the deliveries' wait (25 + 15 s by default,
  // past a platform's 30 s).
  let held = 0;
  const receiver = await startReceiver(() => { held += 1; }); // never answered
  t.teardown(() => receiver.close());
  const { key, appId } = await setup(t, ['order.ops']);
  const ops = await ok(t, 'POST', '/v1/operational-webhooks/endpoints', key, { url: receiver.url(), event_types: ['endpoint.created'] }, 201);
  const worker = await startWorkerProcess(t, { SHUTDOWN_TIMEOUT_MS: '1000' });
  await createEndpoint(t, key, { application_id: appId, url: 'https://hooks.example.com/ops', event_types: ['order.ops'] });
  await until('the operational event held at the receiver', () => held === 1);

  worker.child.kill('SIGTERM');
  t.deepEqual(await exitWithin(worker, 12_000), { code: 0, signal: null }, 'exited before the attempt could time out');
  t.true(worker.stdout().includes('stopping with operational attempts still running'));
  t.deepEqual(errorLines(worker), [], 'no error logged');
  const delivery = await app.pool.one(sql.type(z.object({ status: z.string(), due: z.boolean(), attempts: z.number() }))`
    select d.status, d.next_attempt_at <= now() as due, (select count(*)::int from operational_attempts a where a.delivery_id = d.id) as attempts
    from operational_deliveries d where d.endpoint_id = ${ops.id as string}`);
  t.deepEqual(delivery, { status: 'pending', due: true, attempts: 0 }, 'not recorded, handed back due at once');
});

test.serial('rate_limit_rps 10 holds across two worker processes: 60 jobs, each once, never more than 10 starts in a second', async (t) => {
  // Each request is traced to the worker process whose socket sent it.
  const senders: Array<Promise<number | null>> = [];
  let workerPids: number[] = [];
  const receiver = await startReceiver((arrival, reply) => {
    senders.push(processOwningPort(arrival.remotePort, workerPids).catch(() => null));
    reply(200);
  });
  const { key, appId } = await setup(t, ['order.limited']);
  await createEndpoint(t, key, { application_id: appId, url: receiver.url(), event_types: ['order.limited'], rate_limit_rps: 10 });

  // Both processes run before the 60 jobs arrive, so both take part even when a loaded machine
  // starts the second one seconds after the first (queued first, the first alone could drain
  // them meanwhile). One after the other: started at the same moment, the second fails at
  // start (see the next test).
  const traced = (worker: Started) => {
    workerPids = [...workerPids, worker.child.pid ?? -1];
  };
  await startWorkerProcess(t, {}, traced);
  await startWorkerProcess(t, {}, traced);
  t.is(workerPids.length, 2);
  const jobIds: string[] = [];
  for (let i = 0; i < 60; i += 10) {
    jobIds.push(...await Promise.all(Array.from({ length: 10 }, (_, k) => createJob(t, key, appId, 'order.limited', { n: i + k }))));
  }

  await until('all 60 deliveries to succeed', async () => {
    const rows = await deliveriesOf(jobIds);
    return rows.length === 60 && rows.every((d) => d.status === 'succeeded');
  }, 40_000);
  const deliveries = await deliveriesOf(jobIds);
  t.deepEqual(await messageStates(deliveries.map((d) => d.id)), {}, 'no message left to redo');

  const perJob = count(receiver.arrivals.map((a) => a.id));
  t.is(perJob.size, 60, 'every job arrived');
  t.deepEqual([...perJob.keys()].sort(), [...jobIds].sort());
  t.true([...perJob.values()].every((n) => n === 1), `each arrived once: ${JSON.stringify([...perJob.values()])}`);

  const attempts = await attemptsOf(jobIds);
  t.is(attempts.length, 60, 'exactly one attempt per delivery');
  t.deepEqual([...count(attempts.map((a) => String(a.delivery_id))).values()], Array(60).fill(1));
  t.true(attempts.every((a) => a.success && a.attempt === 1));

  // Both processes sent: the limit was shared, not held by one process doing all the work.
  const bySender = count((await Promise.all(senders)).map(String));
  t.log(`requests per worker process: ${JSON.stringify(Object.fromEntries(bySender))}`);
  t.true(workerPids.every((pid) => (bySender.get(String(pid)) ?? 0) > 0), 'both worker processes made attempts');
  t.false(bySender.has('null'), 'every request came from one of the two worker processes');

  // Arrivals carry transport delay (a loaded machine reads requests late): their window is
  // shortened by the spread of delays measured here (arrival minus recorded start of the job).
  const startOf = new Map(attempts.map((a) => [a.job_id, Date.parse(a.attempted_at)]));
  const delays = receiver.arrivals.map((a) => a.at - (startOf.get(a.id) ?? Number.NaN));
  t.true(delays.every((d) => d >= -1), `every arrival after its recorded start: ${delays.join(' ')}`);
  const jitter = Math.ceil(Math.max(...delays) - Math.min(...delays));
  const arrivalMax = maxPerSecond(receiver.arrivals.map((a) => a.at), 1000 - jitter);
  const startMax = maxPerSecond(attempts.map((a) => Date.parse(a.attempted_at)));
  const span = Math.max(...receiver.arrivals.map((a) => a.at)) - Math.min(...receiver.arrivals.map((a) => a.at));
  t.log(`max arrivals in any 1 s window: ${arrivalMax}; max recorded starts in any 1 s window: ${startMax}; 60 arrivals over ${span} ms`);
  t.true(arrivalMax <= 10, `at most 10 arrivals in any ${1000 - jitter} ms window (delay spread ${jitter} ms), saw ${arrivalMax}`);
  t.true(startMax <= 10, `at most 10 attempt starts in any one-second window, saw ${startMax}`);
});

test.serial('a worker starting while another process migrates waits for the migration lock, then starts', async (t) => {
  // Any number of processes may start at once: play the one that is migrating right now by
  // holding node-pg-migrate's advisory lock (its PG_MIGRATE_LOCK_ID) on our own connection.
  const migrating = new pg.Client({ connectionString: app.databaseUrl });
  await migrating.connect();
  t.teardown(() => migrating.end().catch(() => {}));
  await migrating.query(`select pg_advisory_lock(${PG_MIGRATE_LOCK_ID})`);

  t.timeout(2 * STARTUP_TIMEOUT_MS + 60_000); // up to the lock, then the rest of the start: each may be slow on a busy machine
  const worker = startScript('src/main.ts', ['worker'], { DATABASE_URL: app.databaseUrl, ...WORKER_ENV });
  t.teardown(() => stopWorkerProcess(worker));
  const waiting = await until('the worker to wait on the lock, or to exit', async () => {
    if (worker.child.exitCode !== null) return 'exited';
    const { rows } = await migrating.query(`select 1 from pg_locks
      where locktype = 'advisory' and not granted and database = (select oid from pg_database where datname = current_database())`);
    return rows.length > 0 && 'waiting';
  }, STARTUP_TIMEOUT_MS);
  const fatal = worker.stdout().split('\n').filter((line) => line.includes('"level":60')).join('\n');
  t.is(waiting, 'waiting', `the worker gave up instead of waiting for the lock: exit code ${worker.child.exitCode}, ${fatal}`);

  await migrating.query(`select pg_advisory_unlock(${PG_MIGRATE_LOCK_ID})`);
  if (waiting === 'waiting') {
    await worker.waitForLog((line) => line.msg === 'worker started');
    t.is(worker.child.exitCode, null);
  }
});

test.serial('hourly upkeep archives finished jobs older than the interval; unfinished ones stay; archived jobs list and retry', async (t) => {
  const receiver = await startReceiver((_arrival, reply) => reply(200));
  const { key, appId } = await setup(t, ['order.done', 'order.waiting', 'order.nobody']);
  await createEndpoint(t, key, { application_id: appId, url: receiver.url(), event_types: ['order.done'] });
  const pausedId = await createEndpoint(t, key, { application_id: appId, url: receiver.url('/paused'), event_types: ['order.waiting'] });
  await ok(t, 'PATCH', `/v1/endpoints/${pausedId}`, key, { status: 'paused' }, 200);
  await startWorkerProcess(t);

  const [oldA, oldB, recent] = [
    await createJob(t, key, appId, 'order.done', { n: 1 }),
    await createJob(t, key, appId, 'order.done', { n: 2 }),
    await createJob(t, key, appId, 'order.done', { n: 3 }),
  ] as [string, string, string];
  const waiting = await createJob(t, key, appId, 'order.waiting', { n: 4 }); // held by the paused endpoint
  const cancelled = await createJob(t, key, appId, 'order.waiting', { n: 5 });
  const noTargets29 = await createJob(t, key, appId, 'order.nobody', { n: 6 }); // succeeded at once
  const noTargets31 = await createJob(t, key, appId, 'order.nobody', { n: 7 });

  await until('three jobs delivered', async () => (await jobStatuses(key, [oldA, oldB, recent])).every((s) => s === 'succeeded'));
  await until('the paused endpoint\'s deliveries held', async () => (await deliveriesOf([waiting, cancelled])).every((d) => d.status === 'held'));
  await ok(t, 'POST', `/v1/webhook-jobs/${cancelled}/cancel`, key, undefined, 200);
  t.deepEqual(await jobStatuses(key, [waiting, cancelled, noTargets29, noTargets31]), ['created', 'discarded', 'succeeded', 'succeeded']);

  const completedAt = z.object({ id: z.string(), completed_at: z.string().nullable(), status: z.string() });
  const readJobs = (ids: string[]) => app.pool.any(sql.type(completedAt)`
    select id, completed_at, status from webhook_jobs where id = any(${sql.array(ids, 'text')}) order by id`);

  // One transaction: `recent` finished "now" (the transaction's now), the others an hour ago;
  // the waiting job was created long ago but never finished. The two jobs without targets
  // finished "now" too: they finished at creation, and on a busy machine that can be more
  // than the 1 s interval ago (they are for the 30-day default below).
  await app.pool.transaction(async (tx) => {
    await tx.query(sql.unsafe`update webhook_jobs set completed_at = now() - interval '1 hour'
                              where id = any(${sql.array([oldA, oldB, cancelled], 'text')})`);
    await tx.query(sql.unsafe`update webhook_jobs set completed_at = now()
                              where id = any(${sql.array([recent, noTargets29, noTargets31], 'text')})`);
    await tx.query(sql.unsafe`update webhook_jobs set created_at = now() - interval '40 days' where id = ${waiting}`);
    await tx.query(sql.unsafe`select run_hourly_upkeep(interval '1 second')`);
  });
  const before = await readJobs([oldA, oldB, cancelled]);
  t.deepEqual(await jobStatuses(key, [oldA, oldB, cancelled]), ['archived', 'archived', 'archived']);
  t.is(await jobStatus(key, recent), 'succeeded', 'finished within the interval: not archived');
  t.is(await jobStatus(key, waiting), 'created', 'unfinished: untouched, however old');
  const [waitingRow] = await readJobs([waiting]);
  t.is(waitingRow?.completed_at, null);
  t.true(before.every((j) => j.completed_at !== null), 'archiving keeps completed_at');
  const cancelledJob = (await app.request('GET', `/v1/webhook-jobs/${cancelled}`, { key })).body;
  t.truthy(cancelledJob.discarded_at, 'archiving keeps discarded_at');

  // The default interval is 30 days.
  await app.pool.query(sql.unsafe`update webhook_jobs set completed_at = now() - interval '29 days' where id = ${noTargets29}`);
  await app.pool.query(sql.unsafe`update webhook_jobs set completed_at = now() - interval '31 days' where id = ${noTargets31}`);
  await app.pool.query(sql.unsafe`select run_hourly_upkeep()`);
  t.deepEqual(await jobStatuses(key, [noTargets29, noTargets31]), ['succeeded', 'archived']);

  const list = async (status: string) => {
    const body = await ok(t, 'GET', `/v1/webhook-jobs?application_id=${appId}&status=${status}&per_page=100`, key, undefined, 200);
    return (body.data as Array<{ id: string; status: string }>).map((j) => j.id).sort();
  };
  t.deepEqual(await list('archived'), [oldA, oldB, cancelled, noTargets31].sort());
  t.deepEqual(await list('succeeded'), [recent, noTargets29].sort());
  t.deepEqual(await list('created'), [waiting]);

  // Retrying an archived job starts it over: 200, created, and it is delivered again.
  const seenBefore = receiver.arrivals.filter((a) => a.id === oldA).length;
  const retried = await ok(t, 'POST', `/v1/webhook-jobs/${oldA}/retry`, key, undefined, 200);
  t.like(retried, { id: oldA, status: 'created', attempt_count: 0 });
  await until('the retried archived job to succeed again', async () => (await jobStatus(key, oldA)) === 'succeeded');
  t.is(receiver.arrivals.filter((a) => a.id === oldA).length, seenBefore + 1, 'delivered once more');
  t.deepEqual(await list('archived'), [oldB, cancelled, noTargets31].sort());
});

test.serial('success_rate of endpoints and application follows the recorded attempts (3 successes, 1 final failure)', async (t) => {
  const flakySeen = new Set<string>();
  const receiver = await startReceiver((arrival, reply) => {
    const payload = JSON.parse(arrival.body) as { fail?: boolean; flaky?: boolean };
    if (payload.fail) return reply(500, 'always failing');
    if (payload.flaky && !flakySeen.has(arrival.id)) {
      flakySeen.add(arrival.id);
      return reply(500, 'failing once');
    }
    return reply(200);
  });
  const { key, appId } = await setup(t, ['rate.alpha', 'rate.beta', 'rate.gamma']);
  const endpointA = await createEndpoint(t, key, { application_id: appId, url: receiver.url('/a'), event_types: ['rate.alpha'] });
  const endpointB = await createEndpoint(t, key, { application_id: appId, url: receiver.url('/b'), event_types: ['rate.beta'] });
  const endpointC = await createEndpoint(t, key, { application_id: appId, url: receiver.url('/c'), event_types: ['rate.gamma'] });
  await startWorkerProcess(t, { RETRY_SCHEDULE: '1,1,1,1,1,1', CIRCUIT_BREAKER_THRESHOLD: '100' });

  // A: 3 successes, then one job failing all 7 attempts (1 + 6 retries) -> 3 / 10.
  // B: one success, one job failing once then succeeding -> 2 / 3.
  const jobs = [
    await createJob(t, key, appId, 'rate.alpha', { n: 1 }),
    await createJob(t, key, appId, 'rate.alpha', { n: 2 }),
    await createJob(t, key, appId, 'rate.alpha', { n: 3 }),
    await createJob(t, key, appId, 'rate.alpha', { fail: true }),
    await createJob(t, key, appId, 'rate.beta', { n: 4 }),
    await createJob(t, key, appId, 'rate.beta', { flaky: true }),
  ];
  const failing = jobs[3] as string;
  await until('every job to finish', async () => {
    const statuses = await jobStatuses(key, jobs);
    return statuses.every((s) => s === 'succeeded' || s === 'discarded') && statuses;
  }, 40_000);
  t.deepEqual(await jobStatuses(key, jobs), ['succeeded', 'succeeded', 'succeeded', 'discarded', 'succeeded', 'succeeded']);
  const failedList = await ok(t, 'GET', `/v1/webhook-jobs?application_id=${appId}&status=failed`, key, undefined, 200);
  t.deepEqual(failedList.data.map((j: { id: string }) => j.id), [failing]);

  const attempts = await attemptsOf(jobs);
  const byEndpoint = (prefix: string) => receiver.arrivals.filter((a) => a.path === prefix).length;
  t.is(attempts.filter((a) => a.job_id === failing).length, 7, 'the failing job used all 7 attempts');
  t.is(byEndpoint('/a'), 10);
  t.is(byEndpoint('/b'), 3);
  t.is(byEndpoint('/c'), 0);

  const application = await ok(t, 'GET', `/v1/applications/${appId}`, key, undefined, 200);
  const rateOf = (id: string) => (application.endpoints as Array<{ id: string; success_rate: number }>).find((e) => e.id === id)?.success_rate;

  const fromStats = async (column: 'endpoint_id' | 'application_id', id: string) => app.pool.oneFirst(sql.type(z.object({ rate: z.number() }))`
    select round(100.0 * sum(successes) / sum(attempts), 2) as rate from endpoint_attempt_stats
    where ${sql.identifier([column])} = ${id} and minute > now() - interval '24 hours'`);

  t.is(rateOf(endpointA), 30);
  t.is(rateOf(endpointA), await fromStats('endpoint_id', endpointA));
  t.is(rateOf(endpointB), 66.67);
  t.is(rateOf(endpointB), await fromStats('endpoint_id', endpointB));
  t.is(rateOf(endpointC), 100, 'no attempts: 100');
  t.is(application.success_rate, 38.46, '5 successes in 13 attempts');
  t.is(application.success_rate, await fromStats('application_id', appId));

  // The stats agree with the attempt rows themselves.
  const statsTotals = await app.pool.one(sql.type(z.object({ attempts: z.number(), successes: z.number() }))`
    select sum(attempts)::int as attempts, sum(successes)::int as successes from endpoint_attempt_stats where application_id = ${appId}`);
  t.deepEqual(statsTotals, { attempts: attempts.length, successes: attempts.filter((a) => a.success).length });
  t.deepEqual(statsTotals, { attempts: 13, successes: 5 });
});
