// Finished-but-unrecorded outcomes are bounded (issue 13, point 7): while recording is blocked
// (a transaction holds delivery_attempts locked, as a slow or stalled database would), the
// delivery loop must wait rather than go on claiming and attempting: deliveries marked
// in_flight never exceed WORKER_CONCURRENCY, so a crash would redo at most that many.
import test from 'ava';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { sql } from 'slonik';
import { startTestApp } from './helpers/app.ts';

const CONCURRENCY = 10;
const JOBS = 150;
const app = startTestApp({
  ALLOW_PRIVATE_DESTINATIONS: 'true', WORKER_CONCURRENCY: String(CONCURRENCY), RATE_LIMIT_JOBS_PER_SECOND: '100000',
}, { worker: true });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

test('recording blocked mid-drain: in_flight deliveries stay within WORKER_CONCURRENCY, attempts wait, then all finish once each', async (t) => {
  const arrivals = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const id = String(req.headers['webhook-id']);
    arrivals.set(id, (arrivals.get(id) ?? 0) + 1);
    req.resume();
    req.on('end', () => res.end('ok'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;

  const { key } = await app.createOrg();
  const appId = (await app.request('POST', '/v1/applications', { key, body: { name: 'Backlog' } })).body.id as string;
  t.is((await app.request('POST', '/v1/event-types', { key, body: { name: 'backlog.item' } })).status, 201);
  t.is((await app.request('POST', '/v1/endpoints', { key, body: { application_id: appId, url, event_types: ['backlog.item'] } })).status, 201);

  // Recording is blocked from the start: every outcome waits to be written.
  const blocker = new pg.Client({ connectionString: app.databaseUrl });
  await blocker.connect();
  t.teardown(() => blocker.end());
  await blocker.query('begin');
  await blocker.query('lock table delivery_attempts in exclusive mode');

  for (let i = 0; i < JOBS; i += 5) {
    await Promise.all(Array.from({ length: 5 }, () => app.request('POST', '/v1/webhook-jobs', {
      key, body: { application_id: appId, event_type: 'backlog.item', payload: { i } },
    })));
  }
  // Let the worker run against the blocked recorder for a while, sampling what it holds.
  let maxInFlight = 0;
  for (const stop = Date.now() + 2_000; Date.now() < stop;) {
    const inFlight = await app.pool.oneFirst(sql.unsafe`select count(*)::int from deliveries where status = 'in_flight'`) as number;
    maxInFlight = Math.max(maxInFlight, inFlight);
    await sleep(50);
  }
  const attemptedWhileBlocked = arrivals.size;
  await blocker.query('commit');
  t.log(`recording blocked for 2 s: ${attemptedWhileBlocked} deliveries attempted, at most ${maxInFlight} in_flight (WORKER_CONCURRENCY ${CONCURRENCY})`);
  t.true(maxInFlight > 0, 'the worker did take deliveries');
  t.true(maxInFlight <= CONCURRENCY, `${maxInFlight} in_flight`);
  t.true(attemptedWhileBlocked <= CONCURRENCY, `${attemptedWhileBlocked} attempted while nothing could be recorded`);

  // Unblocked: the drain finishes, each delivery once.
  for (const stop = Date.now() + 60_000; Date.now() < stop;) {
    const open = await app.pool.oneFirst(sql.unsafe`select count(*)::int from deliveries where status in ('pending', 'in_flight')`) as number;
    if (open === 0) break;
    await sleep(100);
  }
  t.is(arrivals.size, JOBS);
  t.deepEqual([...arrivals.values()].filter((n) => n !== 1), []);
});
