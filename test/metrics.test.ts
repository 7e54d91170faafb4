// Prometheus metrics over HTTP: request durations by route pattern, delivery attempts by outcome,
// the database gauges (and that a slow database leaves them at their last values), and, in a real
// process, /metrics on METRICS_PORT only.
import test from 'ava';
import { register } from 'prom-client';
import { sql } from 'slonik';
import { newId } from '../src/ids.ts';
import { startTestApp } from './helpers/app.ts';
import * as fixtures from './helpers/fixtures.ts';
import { healthy, startScript, STARTUP_TIMEOUT_MS } from './helpers/process.ts';
import { scrape, select, valueOf, type Exposition } from './helpers/metrics.ts';
import { closedPort, startReceiver } from './helpers/receiver.ts';
import { until } from './helpers/until.ts';

// Failed attempts are retried 10 minutes later: the failed delivery stays pending_scheduled
// throughout the test, whatever the machine's speed.
const app = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true', RETRY_SCHEDULE: '600,600,600,600,600,600' }, { worker: true });

const deliveryGauges = (e: Exposition) => Object.fromEntries(select(e, 'hookline_deliveries').map((s) => [s.labels.status, s.value]));
const endpointGauges = (e: Exposition) => Object.fromEntries(select(e, 'hookline_endpoints').map((s) => [s.labels.status, s.value]));

// ---------------------------------------------------------------- a receiver

/** 200 on /ok, 500 on anything else; the paths it was sent. */
async function receiver() {
  const r = await startReceiver((arrival) => (arrival.url === '/ok' ? { status: 200, body: 'thanks' } : { status: 500, body: 'broken' }));
  return { url: r.url, get arrivals() { return r.arrivals.map((a) => a.url); } };
}

// ---------------------------------------------------------------- in-process app and worker

test.serial('requests, attempts and the database gauges on /metrics of the API port (METRICS_PORT unset)', async (t) => {
  const { key } = await app.createOrg();
  const r = await receiver();
  const by = { t, on: app, key };
  const application = await fixtures.createApplication(by, { name: 'Metrics Co' });
  await fixtures.createEventType(by, 'order.paid');
  const endpoint = (url: string) => fixtures.createEndpoint(by, { application_id: application.id, url, event_types: ['order.paid'] });
  const ok = await endpoint(`${r.url}/ok`);
  const failing = await endpoint(`${r.url}/fail`);
  const paused = await endpoint(`${r.url}/ok?paused`);
  const deleted = await endpoint(`${r.url}/ok?deleted`);
  t.is((await app.request('PATCH', `/v1/endpoints/${paused.id}`, { key, body: { status: 'paused' } })).status, 200);
  t.is((await app.request('DELETE', `/v1/endpoints/${deleted.id}`, { key })).status, 200);

  t.is((await app.request('GET', `/v1/endpoints/${ok.id}`, { key })).status, 200);
  t.is((await app.request('GET', `/v1/endpoints/${newId('ep')}`, { key })).status, 404, 'a matched route that answers 404');
  t.is((await app.request('GET', '/v1/no-such-thing', { key })).status, 404, 'no route at all');
  t.is((await app.request('GET', `/v1/endpoints/${ok.id}`)).status, 401);

  // One job, three targets: one success, one failure (500), one held (paused endpoint).
  const job = await fixtures.createJob(by, { application_id: application.id, event_type: 'order.paid', payload: { n: 1 } });
  await until('both attempts recorded and the paused delivery held', async () => {
    const res = await app.request('GET', `/v1/webhook-jobs/${job.id}`, { key });
    const records = (res.body.deliveries ?? []) as Array<{ success: boolean }>;
    const held = await app.pool.exists(sql.unsafe`select 1 from deliveries where job_id = ${job.id} and endpoint_id = ${paused.id} and status = 'held'`);
    return records.some((d) => d.success) && records.some((d) => !d.success) && held ? true : undefined;
  });
  t.deepEqual(r.arrivals.sort(), ['/fail', '/ok']);

  const first = await scrape(`${app.baseUrl}/metrics`);
  t.is(first.status, 200);
  t.is(first.contentType, register.contentType);
  const e = first.exposition;

  // Types and the default process metrics, under our prefix.
  t.is(e.types.get('hookline_http_request_duration_seconds'), 'histogram');
  t.is(e.types.get('hookline_delivery_attempts_total'), 'counter');
  t.is(e.types.get('hookline_delivery_attempt_duration_seconds'), 'histogram');
  t.is(e.types.get('hookline_deliveries'), 'gauge');
  t.is(e.types.get('hookline_oldest_due_delivery_age_seconds'), 'gauge');
  t.is(e.types.get('hookline_endpoints'), 'gauge');
  t.true((valueOf(e, 'hookline_process_cpu_user_seconds_total') ?? -1) >= 0);
  t.is(select(e, 'process_cpu_user_seconds_total').length, 0, 'nothing unprefixed');

  // HTTP requests: route patterns, never ids.
  const requests = (method: string, route: string, status: string) =>
    valueOf(e, 'hookline_http_request_duration_seconds_count', { method, route, status }) ?? 0;
  t.true(requests('POST', '/v1/webhook-jobs', '201') >= 1);
  t.true(requests('POST', '/v1/endpoints', '201') >= 4);
  t.true(requests('PATCH', '/v1/endpoints/:id', '200') >= 1);
  t.true(requests('DELETE', '/v1/endpoints/:id', '200') >= 1);
  t.true(requests('GET', '/v1/endpoints/:id', '200') >= 1);
  t.true(requests('GET', '/v1/endpoints/:id', '404') >= 1, 'the route of a 404 thrown by its handler');
  t.true(requests('GET', '/v1/webhook-jobs/:id', '200') >= 1);
  t.true(requests('GET', 'unmatched', '404') >= 1);
  t.true(requests('GET', '/v1/endpoints/:id', '401') >= 1, 'refused before its route ran: labelled with its route\'s pattern all the same');
  const routes = new Set(select(e, 'hookline_http_request_duration_seconds_count').map((s) => s.labels.route));
  for (const route of routes) t.regex(route ?? '', /^(unmatched|(\/(v1|[a-z-]+|:[a-z]+))+)$/, `route label ${route}`);
  t.false([...routes].some((route) => /(ep|app|job|evt)_/.test(route ?? '')));
  // A histogram's +Inf bucket is its count; durations are positive.
  const jobsCount = requests('POST', '/v1/webhook-jobs', '201');
  t.is(valueOf(e, 'hookline_http_request_duration_seconds_bucket', { method: 'POST', route: '/v1/webhook-jobs', status: '201', le: '+Inf' }), jobsCount);
  t.true((valueOf(e, 'hookline_http_request_duration_seconds_sum', { method: 'POST', route: '/v1/webhook-jobs', status: '201' }) ?? 0) > 0);

  // Attempts: every outcome is a series; one success and one http_status failure happened.
  const outcomes = select(e, 'hookline_delivery_attempts_total').map((s) => s.labels.outcome).sort();
  t.deepEqual(outcomes, ['blocked_destination', 'connection_error', 'dns_error', 'http_status', 'success', 'timeout', 'tls_error']);
  t.is(valueOf(e, 'hookline_delivery_attempts_total', { outcome: 'success' }), 1);
  t.is(valueOf(e, 'hookline_delivery_attempts_total', { outcome: 'http_status' }), 1);
  t.is(valueOf(e, 'hookline_delivery_attempts_total', { outcome: 'timeout' }), 0);
  t.is(valueOf(e, 'hookline_delivery_attempt_duration_seconds_count', { outcome: 'success' }), 1);
  t.is(valueOf(e, 'hookline_delivery_attempt_duration_seconds_count', { outcome: 'failure' }), 1);
  t.true((valueOf(e, 'hookline_delivery_attempt_duration_seconds_sum', { outcome: 'success' }) ?? 0) > 0);

  // Gauges from the database: the failed delivery waits for its retry, the paused one is held.
  t.deepEqual(deliveryGauges(e), { pending_due: 0, pending_scheduled: 1, in_flight: 0, held: 1 });
  t.is(valueOf(e, 'hookline_oldest_due_delivery_age_seconds'), 0);
  t.deepEqual(endpointGauges(e), { active: 2, paused: 1, disabled: 0 }, 'the deleted endpoint is not counted');

  // The retry falls due (as seen by the gauges: no queue message moves) 90 s ago.
  const failedDelivery = sql.fragment`job_id = ${job.id} and endpoint_id = ${failing.id}`;
  await app.pool.query(sql.unsafe`update deliveries set next_attempt_at = now() - interval '90 seconds' where ${failedDelivery}`);
  const due = (await scrape(`${app.baseUrl}/metrics`)).exposition;
  t.deepEqual(deliveryGauges(due), { pending_due: 1, pending_scheduled: 0, in_flight: 0, held: 1 });
  const age = valueOf(due, 'hookline_oldest_due_delivery_age_seconds') ?? -1;
  t.true(age >= 90 && age < 3600, `oldest due age ${age}`);

  // A database that does not answer: the scrape still succeeds, with the last values read.
  await app.pool.query(sql.unsafe`update deliveries set next_attempt_at = now() + interval '600 seconds' where ${failedDelivery}`);
  let release: () => void = () => {};
  let locked: () => void = () => {};
  const isLocked = new Promise<void>((resolve) => { locked = resolve; });
  const holding = app.pool.transaction(async (tx) => {
    await tx.query(sql.unsafe`lock table endpoints in access exclusive mode`);
    locked();
    await new Promise<void>((resolve) => { release = resolve; });
  });
  try {
    await isLocked;
    const stale = await scrape(`${app.baseUrl}/metrics`);
    t.is(stale.status, 200);
    t.deepEqual(deliveryGauges(stale.exposition), { pending_due: 1, pending_scheduled: 0, in_flight: 0, held: 1 }, 'the last values read');
    t.is(valueOf(stale.exposition, 'hookline_oldest_due_delivery_age_seconds'), age);
    t.deepEqual(endpointGauges(stale.exposition), { active: 2, paused: 1, disabled: 0 });
    t.true((valueOf(stale.exposition, 'hookline_delivery_attempts_total', { outcome: 'success' }) ?? 0) >= 1, 'the rest of the scrape is whole');
  } finally {
    release();
    await holding;
  }
  const fresh = (await scrape(`${app.baseUrl}/metrics`)).exposition;
  t.deepEqual(deliveryGauges(fresh), { pending_due: 0, pending_scheduled: 1, in_flight: 0, held: 1 }, 'read again once the database answers');
});

// ---------------------------------------------------------------- real processes

test.serial('with METRICS_PORT, a process serves /metrics on that port only; SIGTERM still exits 0', async (t) => {
  t.timeout(STARTUP_TIMEOUT_MS + 120_000); // a start and a stop on a busy machine
  const metricsPort = await closedPort();
  const server = startScript('src/main.ts', ['all'], { DATABASE_URL: app.databaseUrl, PORT: '0', METRICS_PORT: String(metricsPort) });
  try {
    const { port } = await server.waitForLog((line) => line.msg === 'web listening') as { port: number };
    const listening = await server.waitForLog((line) => line.msg === 'metrics listening', 1000);
    t.is(listening.port, metricsPort);

    const onApi = await fetch(`http://127.0.0.1:${port}/metrics`);
    t.is(onApi.status, 404);
    t.is((await onApi.json() as { error: { code: string } }).error.code, 'not_found');
    t.is((await healthy(`http://127.0.0.1:${port}`)).status, 200);

    const metrics = await scrape(`http://127.0.0.1:${metricsPort}/metrics`);
    t.is(metrics.status, 200);
    t.is(metrics.contentType, register.contentType);
    const e = metrics.exposition;
    // The API's requests are counted in the registry served on the metrics port.
    t.is(valueOf(e, 'hookline_http_request_duration_seconds_count', { method: 'GET', route: 'unmatched', status: '404' }), 1);
    t.is(valueOf(e, 'hookline_http_request_duration_seconds_count', { method: 'GET', route: '/health', status: '200' }), 1);
    t.is(select(e, 'hookline_http_request_duration_seconds_count', { route: '/metrics' }).length, 0, 'scrapes do not pass through the API');
    t.is(valueOf(e, 'hookline_delivery_attempts_total', { outcome: 'success' }), 0, 'this process has attempted nothing');
    // Same database as the first test: its state, read by this process.
    t.deepEqual(deliveryGauges(e), { pending_due: 0, pending_scheduled: 1, in_flight: 0, held: 1 });
    t.deepEqual(endpointGauges(e), { active: 2, paused: 1, disabled: 0 });
    t.true((valueOf(e, 'hookline_process_resident_memory_bytes') ?? 0) > 0);
    t.is((await fetch(`http://127.0.0.1:${metricsPort}/v1/endpoints`)).status, 404, 'the metrics port serves nothing else');
  } finally {
    server.child.kill('SIGTERM');
  }
  t.deepEqual(await server.exited, { code: 0, signal: null });
  t.truthy(await server.waitForLog((line) => line.msg === 'stopped', 1000));
});

test.serial('a worker-only process serves /metrics on METRICS_PORT', async (t) => {
  t.timeout(STARTUP_TIMEOUT_MS + 120_000); // a start and a stop on a busy machine
  const metricsPort = await closedPort();
  const worker = startScript('src/main.ts', ['worker'], { DATABASE_URL: app.databaseUrl, METRICS_PORT: String(metricsPort) });
  try {
    await worker.waitForLog((line) => line.msg === 'worker started');
    const metrics = await scrape(`http://127.0.0.1:${metricsPort}/metrics`);
    t.is(metrics.status, 200);
    t.deepEqual(select(metrics.exposition, 'hookline_delivery_attempts_total').map((s) => s.value), [0, 0, 0, 0, 0, 0, 0]);
    t.deepEqual(endpointGauges(metrics.exposition), { active: 2, paused: 1, disabled: 0 });
    t.false(worker.stdout().includes('"msg":"web listening"'));
  } finally {
    worker.child.kill('SIGTERM');
  }
  t.deepEqual(await worker.exited, { code: 0, signal: null });
});
