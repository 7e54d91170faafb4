// `npm run bench [-- --quick]`: measures, in one run and beside the machine's own ceilings,
// how fast the service accepts jobs (one web process, load from this process) and delivers
// them (one worker process, to a receiver in a third process), with peak memory and CPU per
// delivery. Prints a table and writes bench/results/<timestamp>.json.
// Not yet measured here (see the issue): latency at a steady 300 jobs/s and the backlog drain.
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { pino } from 'pino';
import { Pool } from 'undici';
import { createApiKey } from '../src/core/api-keys.ts';
import { createEndpoint } from '../src/core/endpoints.ts';
import { insertApplication } from '../src/db/applications.ts';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { insertEventType } from '../src/db/event-types.ts';
import { migrate } from '../src/db/migrate.ts';
import { insertOrganization } from '../src/db/organizations.ts';
import { makePool } from '../src/db/pool.ts';
import { newId } from '../src/ids.ts';
import { startQueue } from '../src/queue.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const quick = process.argv.includes('--quick');
const SECONDS = quick ? 5 : 20;
const ORGS = 50;
const PAYLOAD = { type: 'invoice.paid', data: { id: 'in_'.padEnd(40, 'x'), lines: Array.from({ length: 12 }, (_, i) => ({ sku: `sku-${i}`, qty: i, price: 1999 })) } };
const logger = pino({ level: 'warn' }, pino.destination(2));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

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

type Fixture = { key: string; applicationId: string };

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
    await createEndpoint(pool, tenant, {
      applicationId: app.id, url: `http://127.0.0.1:${receiverPort}/hook`, eventTypes: ['invoice.paid'], headers: {},
      rateLimitRps: 10_000, timeoutMs: 30_000,
    });
    out.push({ key, applicationId: app.id });
  }
  await queue.stop();
  await pool.end();
  return out;
}

/** BENCH_NODE_ARGS (e.g. `--cpu-prof`) are passed to the web and worker processes, for profiling. */
function startRole(role: 'web' | 'worker', env: Record<string, string>): ChildProcess {
  const nodeArgs = process.env.BENCH_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
  return spawn(process.execPath, [...nodeArgs, path.join(root, 'src/main.ts'), role], {
    cwd: root, stdio: ['ignore', 'ignore', 'inherit'], env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', ...env },
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

async function acceptRate(port: number, orgs: Fixture[]) {
  let next = 0;
  const result = await autocannon({
    url: `http://127.0.0.1:${port}`,
    connections: 50,
    duration: SECONDS,
    requests: [{
      method: 'POST',
      path: '/v1/webhook-jobs',
      setupRequest: (request: autocannon.Request) => {
        const org = orgs[next++ % orgs.length] as Fixture;
        return {
          ...request,
          headers: { 'content-type': 'application/json', authorization: `Bearer ${org.key}` },
          body: JSON.stringify({ application_id: org.applicationId, event_type: 'invoice.paid', payload: PAYLOAD }),
        };
      },
    }],
  });
  return { perSecond: result['2xx'] / SECONDS, non2xx: result.non2xx, p99Ms: result.latency.p99 };
}

function receiverStats(receiver: ChildProcess): Promise<{ count: number; first: number; last: number }> {
  return new Promise((resolve) => {
    receiver.once('message', (message) => resolve(message as { count: number; first: number; last: number }));
    receiver.send('stats');
  });
}

async function main() {
  const embedded = process.env.DATABASE_URL
    ? null
    : await startEmbeddedPostgres({ dataDir: path.join(root, '.data', `bench-${process.pid}`), logger, ephemeral: true });
  const adminUrl = embedded?.url ?? process.env.DATABASE_URL ?? '';
  const database = `bench_${process.pid}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`create database ${database}`);
  const url = new URL(adminUrl);
  url.pathname = `/${database}`;
  const dbUrl = url.toString();
  const children: ChildProcess[] = [];
  try {
    await migrate(dbUrl, logger);
    const receiver = fork(path.join(root, 'bench/receiver.ts'), { stdio: 'inherit' });
    children.push(receiver);
    const { port: receiverPort } = await new Promise<{ port: number }>((resolve) => receiver.once('message', (m) => resolve(m as { port: number })));

    process.stderr.write(`ceilings (${SECONDS} s each)…\n`);
    const commitsPerSecond = await commitCeiling(dbUrl);
    const postsPerSecond = await postCeiling(receiverPort);
    receiver.send('reset');
    const orgs = await fixtures(dbUrl, receiverPort);

    const env = {
      DATABASE_URL: dbUrl, ALLOW_PRIVATE_DESTINATIONS: 'true', RATE_LIMIT_JOBS_PER_SECOND: '1000000', WORKER_CONCURRENCY: '200',
      ...(process.env.DATABASE_POOL_SIZE ? { DATABASE_POOL_SIZE: process.env.DATABASE_POOL_SIZE } : {}),
    };
    const webPort = await freePort();
    const web = startRole('web', { ...env, PORT: String(webPort) });
    children.push(web);
    await waitForHealth(webPort);
    process.stderr.write('accept rate…\n');
    const accept = await acceptRate(webPort, orgs);
    const webUsage = await usage(web.pid ?? 0);

    const pending = new pg.Client({ connectionString: dbUrl });
    await pending.connect();
    const backlog = (await pending.query('select count(*)::int as n from deliveries')).rows[0].n as number;

    process.stderr.write(`delivery rate (${backlog} deliveries)…\n`);
    const worker = startRole('worker', env);
    children.push(worker);
    const cpuBefore = (await usage(worker.pid ?? 0)).cpuSeconds;
    const deadline = Date.now() + Math.max(60, SECONDS * 6) * 1000;
    let stats = await receiverStats(receiver);
    while (stats.count < backlog && Date.now() < deadline) {
      await sleep(250);
      stats = await receiverStats(receiver);
    }
    const workerUsage = await usage(worker.pid ?? 0);
    const deliveredPerSecond = stats.count / Math.max(0.001, (stats.last - stats.first) / 1000);
    const succeeded = (await pending.query(`select count(*)::int as n from deliveries where status = 'succeeded'`)).rows[0].n as number;
    await pending.end();

    const report = {
      at: new Date().toISOString(),
      mode: quick ? 'quick' : 'default',
      seconds: SECONDS,
      ceilings: { commits_per_second: Math.round(commitsPerSecond), posts_per_second: Math.round(postsPerSecond) },
      accept: { jobs_per_second: Math.round(accept.perSecond), p99_ms: accept.p99Ms, non_2xx: accept.non2xx,
        ratio_to_commit_ceiling: +(accept.perSecond / commitsPerSecond).toFixed(3) },
      delivery: { deliveries: stats.count, succeeded, backlog, deliveries_per_second: Math.round(deliveredPerSecond),
        ratio_to_post_ceiling: +(deliveredPerSecond / postsPerSecond).toFixed(3),
        cpu_us_per_delivery: Math.round(((workerUsage.cpuSeconds - cpuBefore) * 1e6) / Math.max(1, stats.count)) },
      memory_mb: { web_peak: Math.round(webUsage.peakMb), worker_peak: Math.round(workerUsage.peakMb) },
      not_measured: ['latency at a steady 300 jobs/s', 'backlog drain of 100,000 due deliveries'],
    };
    await mkdir(path.join(root, 'bench/results'), { recursive: true });
    const file = path.join(root, 'bench/results', `${report.at.replaceAll(':', '-')}.json`);
    await writeFile(file, `${JSON.stringify(report, null, 2)}\n`);
    console.table({
      'raw commit ceiling (commits/s)': report.ceilings.commits_per_second,
      'raw POST ceiling (req/s)': report.ceilings.posts_per_second,
      'accept rate (jobs/s)': `${report.accept.jobs_per_second} (${(report.accept.ratio_to_commit_ceiling * 100).toFixed(0)}% of commits; goal >= 40%)`,
      'delivery rate (deliveries/s)': `${report.delivery.deliveries_per_second} (${(report.delivery.ratio_to_post_ceiling * 100).toFixed(0)}% of POSTs; goal >= 3000 and >= 20%)`,
      'worker CPU per delivery (us)': report.delivery.cpu_us_per_delivery,
      'peak RSS web / worker (MB)': `${report.memory_mb.web_peak} / ${report.memory_mb.worker_peak} (goal <= 150 / 200)`,
    });
    console.log(`report: ${path.relative(root, file)}`);
  } finally {
    for (const child of children) child.kill('SIGTERM');
    await sleep(1000);
    await admin.query(`drop database if exists ${database} with (force)`).catch(() => {});
    await admin.end();
    await embedded?.stop();
  }
}

await main();
