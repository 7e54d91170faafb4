// The per-endpoint delivery rate limit (decisions section 8) on a machine too busy to start
// attempts on time: the event loop of the workers is blocked again and again, so timers fire
// late and claims return late. The recorded attempt starts must still never hold more than
// rate_limit_rps in any one-second interval, in one worker and across two workers.
import test, { type ExecutionContext } from 'ava';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'slonik';
import { z } from 'zod';
import { makePool } from '../src/db/pool.ts';
import { makeLogger } from '../src/logger.ts';
import { startQueue } from '../src/queue.ts';
import { startWorker } from '../src/worker/index.ts';
import { startTestApp, type TestApp } from './helpers/app.ts';

const app = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true' }, { worker: true });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const servers: http.Server[] = [];
test.after.always(async () => {
  for (const server of servers) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

async function receiver(): Promise<{ url: string; arrivals: number[] }> {
  const arrivals: number[] = [];
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      arrivals.push(Date.now());
      res.end('ok');
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, arrivals };
}

/**
 * Blocks this process's event loop (worker, web and test alike) for `blockMs` out of every
 * `everyMs`, with a varying phase, until stopped: every timer and every query result is late.
 */
function busyLoop(blockMs: number, everyMs: number): () => void {
  let n = 0;
  const timer = setInterval(() => {
    n += 1;
    const end = Date.now() + blockMs + (n % 3) * 37;
    while (Date.now() < end) { /* busy */ }
  }, everyMs);
  return () => clearInterval(timer);
}

/** Most timestamps (ms) within any window [from, from + windowMs) starting at one of them. */
function mostInWindow(times: readonly number[], windowMs: number): number {
  let most = 0;
  for (const from of times) most = Math.max(most, times.filter((x) => x >= from && x - from < windowMs).length);
  return most;
}

const offsets = (times: readonly number[]) => times.map((x) => Math.round(x - times[0]!)).join(' ');

/** An endpoint limited to `rps`, `count` jobs for it created at once; waits until every delivery succeeded. */
async function deliverLimited(t: ExecutionContext, on: TestApp, rps: number, count: number) {
  const { key } = await on.createOrg();
  const application = await on.request('POST', '/v1/applications', { key, body: { name: 'busy' } });
  await on.request('POST', '/v1/event-types', { key, body: { name: 'busy.tested' } });
  const r = await receiver();
  const endpoint = await on.request('POST', '/v1/endpoints', {
    key, body: { application_id: application.body.id, url: r.url, event_types: ['busy.tested'], rate_limit_rps: rps },
  });
  t.is(endpoint.status, 201, JSON.stringify(endpoint.body));
  const endpointId = endpoint.body.id as string;
  const jobs = await Promise.all(Array.from({ length: count }, (_, i) => on.request('POST', '/v1/webhook-jobs', {
    key, body: { application_id: application.body.id, event_type: 'busy.tested', payload: { i } },
  })));
  t.true(jobs.every((j) => j.status === 201));
  const deadline = Date.now() + 60_000;
  for (;;) {
    const left = await on.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
      select count(*)::int as n from deliveries where endpoint_id = ${endpointId} and status <> 'succeeded'`);
    if (left === 0) break;
    if (Date.now() > deadline) throw new Error(`${left} deliveries not delivered within 60 s`);
    await sleep(100);
  }
  const starts = await on.pool.anyFirst(sql.type(z.object({ ms: z.number() }))`
    select (extract(epoch from attempted_at) * 1000)::float8 as ms from delivery_attempts
    where endpoint_id = ${endpointId} order by attempted_at`);
  t.is(starts.length, count, 'one attempt per delivery: waiting for a slot costs none');
  return { starts, arrivals: r.arrivals };
}

test.serial('rate_limit_rps 5, one worker, event loop blocked 120-194 ms every 330 ms: never 6 starts within one second', async (t) => {
  const stop = busyLoop(120, 330);
  try {
    const { starts } = await deliverLimited(t, app, 5, 16);
    const most = mostInWindow(starts, 1000);
    t.log(`most in 1 s: ${most}; start offsets (ms) ${offsets(starts)}`);
    t.true(most <= 5, `at most 5 attempt starts in any 1 s interval, saw ${most}; start offsets (ms) ${offsets(starts)}`);
  } finally {
    stop();
  }
});

test.serial('rate_limit_rps 5, two workers sharing the endpoint, event loop blocked: never 6 starts within one second', async (t) => {
  // A second worker with its own queue client and pool: the slots of one endpoint are handed
  // to two claimants, whose late starts must not crowd each other's.
  const logger = makeLogger('silent');
  const queue = await startQueue({
    databaseUrl: app.databaseUrl, logger, leaseSeconds: app.config.deliveryLeaseSeconds, supervise: true,
    retentionHours: app.config.retention.queueHours,
  });
  const pool = await makePool(app.databaseUrl, { maximumPoolSize: 4 });
  const second = await startWorker({ pool, config: app.config, logger, queue });
  const stop = busyLoop(120, 330);
  try {
    const { starts } = await deliverLimited(t, app, 5, 20);
    const most = mostInWindow(starts, 1000);
    t.log(`most in 1 s: ${most}; start offsets (ms) ${offsets(starts)}`);
    t.true(most <= 5, `at most 5 attempt starts in any 1 s interval, saw ${most}; start offsets (ms) ${offsets(starts)}`);
  } finally {
    stop();
    await second.stop();
    await queue.stop();
    await pool.end();
  }
});
