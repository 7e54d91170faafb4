// PgBouncer in transaction mode (issue 13, point 8): a `web` and a `worker` process reach the
// database only through Debian's pgbouncer (transaction pooling, 2 server connections, so
// consecutive transactions of one client land on different server sessions); migrations and the
// worker's LISTEN connection use DATABASE_DIRECT_URL. Jobs run end to end: nothing else depends
// on session state (temp tables, session advisory locks, named prepared statements). Slow:
// marked by its name.
import test from 'ava';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import pg from 'pg';
import { freePort, startCluster, tempDir, type Cluster } from './helpers/cluster.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import { runScript, startScript, STARTUP_TIMEOUT_MS, type Started } from './helpers/process.ts';

const PGBOUNCER = '/usr/sbin/pgbouncer';
// Skipped, and said so, where Debian's pgbouncer is not installed (a machine that has not run
// .ci/run, which installs it and fails when it cannot): `npm test` passes after `npm ci` alone.
const hasPgBouncer = existsSync(PGBOUNCER);
const bouncerTest = hasPgBouncer ? test : test.skip;
const skipReason = hasPgBouncer ? '' : ` (skipped: PgBouncer not installed (${PGBOUNCER}); .ci/run installs it)`;
const JOBS = 40;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let database: TestDatabase | undefined;
const dirs: string[] = [];
const bouncers: ChildProcess[] = [];
const processes: Started[] = [];
const clusters: Cluster[] = [];

test.after.always(async () => {
  for (const p of processes) {
    p.child.kill('SIGTERM');
    await p.exited;
  }
  for (const bouncer of bouncers) {
    bouncer.kill('SIGTERM');
    if (bouncer.exitCode === null) await new Promise((resolve) => bouncer.once('exit', resolve));
  }
  await database?.drop();
  for (const cluster of clusters) await cluster.destroy();
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

async function startPgBouncer(direct: URL, settings = ''): Promise<string> {
  const dir = await tempDir('pgbouncer');
  dirs.push(dir);
  const port = await freePort();
  const name = direct.pathname.slice(1);
  await writeFile(path.join(dir, 'pgbouncer.ini'), `[databases]
${name} = host=${direct.hostname} port=${direct.port} dbname=${name} user=${decodeURIComponent(direct.username)}${direct.password ? ` password=${decodeURIComponent(direct.password)}` : ''}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = ${port}
unix_socket_dir =
auth_type = any
pool_mode = transaction
default_pool_size = 2
max_client_conn = 200
; slonik and pg send these at connect; in transaction mode they cannot follow a client anyway
ignore_startup_parameters = extra_float_digits,statement_timeout,idle_in_transaction_session_timeout,options
logfile = ${path.join(dir, 'pgbouncer.log')}
${settings}`, { mode: 0o644 });
  // pgbouncer refuses to run as root: then run it as the postgres user.
  const asRoot = process.getuid?.() === 0;
  const passwd = asRoot ? (await readFile('/etc/passwd', 'utf8')).split('\n').find((l) => l.startsWith('postgres:'))?.split(':') : undefined;
  const { chown } = await import('node:fs/promises');
  if (passwd) await chown(dir, Number(passwd[2]), Number(passwd[3]));
  bouncers.push(spawn(PGBOUNCER, [path.join(dir, 'pgbouncer.ini')], {
    stdio: 'ignore', ...(passwd ? { uid: Number(passwd[2]), gid: Number(passwd[3]) } : {}),
  }));
  const url = new URL(direct);
  url.port = String(port);
  // Ready once it accepts a real query.
  const pg = (await import('pg')).default;
  for (let tries = 0; ; tries += 1) {
    const client = new pg.Client({ connectionString: url.toString() });
    try {
      await client.connect();
      await client.query('select 1');
      await client.end();
      return url.toString();
    } catch (error) {
      await client.end().catch(() => {});
      if (tries > 100) throw error;
      await sleep(100);
    }
  }
}

bouncerTest(`slow: web and worker through PgBouncer in transaction mode deliver every job once${skipReason}`, async (t) => {
  database = await createTestDatabase();
  const direct = new URL(database.url);
  const pooled = await startPgBouncer(direct);
  const env = {
    DATABASE_URL: pooled, DATABASE_DIRECT_URL: database.url, PORT: '0', ALLOW_PRIVATE_DESTINATIONS: 'true',
    DATABASE_POOL_SIZE: '4', WORKER_CONCURRENCY: '20', RATE_LIMIT_JOBS_PER_SECOND: '100000',
  };
  const web = startScript('src/main.ts', ['web'], env);
  processes.push(web);
  const worker = startScript('src/main.ts', ['worker'], env);
  processes.push(worker);
  const { port } = await web.waitForLog((line) => line.msg === 'web listening') as { port: number };
  await worker.waitForLog((line) => line.msg === 'worker started');
  const base = `http://127.0.0.1:${port}`;

  const arrivals = new Map<string, number>();
  const receiver = http.createServer((req, res) => {
    const id = String(req.headers['webhook-id']);
    arrivals.set(id, (arrivals.get(id) ?? 0) + 1);
    req.resume();
    req.on('end', () => res.end('ok'));
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => { receiver.closeAllConnections(); receiver.close(() => resolve()); }));

  const created = await runScript('src/cli/admin.ts', ['create-org', '--name', 'Pooled'], { DATABASE_URL: pooled, DATABASE_DIRECT_URL: database.url });
  t.is(created.code, 0, created.stderr);
  const key = (JSON.parse(created.stdout) as { api_key: { key: string } }).api_key.key;
  const call = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(`${base}${p}`, {
      method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: await res.json() as any };
  };
  const application = await call('POST', '/v1/applications', { name: 'Pooled' });
  t.is(application.status, 201);
  t.is((await call('POST', '/v1/event-types', { name: 'pooled.item' })).status, 201);
  const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  t.is((await call('POST', '/v1/endpoints', { application_id: application.body.id, url, event_types: ['pooled.item'] })).status, 201);
  const jobIds: string[] = [];
  for (let i = 0; i < JOBS; i += 1) {
    const job = await call('POST', '/v1/webhook-jobs', { application_id: application.body.id, event_type: 'pooled.item', payload: { i } });
    t.is(job.status, 201, JSON.stringify(job.body));
    jobIds.push(job.body.id);
  }
  for (const stop = Date.now() + 45_000; Date.now() < stop && arrivals.size < JOBS;) await sleep(100);
  t.is(arrivals.size, JOBS);
  t.deepEqual([...arrivals.values()].filter((n) => n !== 1), []);
  // Recorded as delivered, read back through the pooler.
  for (const stop = Date.now() + 20_000; Date.now() < stop;) {
    const last = await call('GET', `/v1/webhook-jobs/${jobIds.at(-1)}`);
    if (last.body.status === 'succeeded') break;
    await sleep(100);
  }
  for (const id of jobIds) t.is((await call('GET', `/v1/webhook-jobs/${id}`)).body.status, 'succeeded', id);
  const errors = [web, worker].flatMap((p) => p.stdout().split('\n').filter((l) => l.includes('"level":50')));
  t.deepEqual(errors, [], 'no error logged by web or worker');
});

bouncerTest(`a process started while PgBouncer still refuses logins after the database's restart waits for it, and starts${skipReason}`, async (t) => {
  // A probe: the migrations (DATABASE_DIRECT_URL) worked once the database was back, but the
  // pooler refused logins for its server_login_retry (15 s by default) after the failed ones of
  // the outage, and the process exited at once on that error (08P01) instead of waiting.
  const root = await tempDir('bouncer-restart');
  dirs.push(root);
  const cluster = await startCluster(root, 'db');
  clusters.push(cluster);
  // Its refusal lasts SERVER_LOGIN_RETRY_S from its failed login: longer than the default 15 s,
  // which a web process started on a busy machine (a full test run beside a probe) outlasted
  // before its first connection, so that it had nothing to wait for.
  const SERVER_LOGIN_RETRY_S = 30;
  const pooled = await startPgBouncer(new URL(cluster.url), `server_login_retry = ${SERVER_LOGIN_RETRY_S}\n`);
  await cluster.stop('fast');
  // A client of the pooler during the outage: its login to the server fails, and the pooler
  // then refuses logins until its server_login_retry has passed.
  // (The pooler keeps the client waiting for a server up to its query_wait_timeout, 120 s: the
  // client gives up after 3 s, when the pooler has long tried the server.)
  const during = new pg.Client({ connectionString: pooled, query_timeout: 3_000 });
  await t.throwsAsync(during.connect().then(() => during.query('select 1')));
  await during.end().catch(() => {});
  await cluster.start();
  const refused = new pg.Client({ connectionString: pooled });
  const refusedAt = performance.now();
  const refusal = await refused.connect().then(() => refused.query('select 1')).then(() => null, (error: Error) => error.message);
  await refused.end().catch(() => {});
  t.log(`the pooler right after the database came back: ${refusal ?? 'already serving'}`);

  const web = startScript('src/main.ts', ['web'], {
    DATABASE_URL: pooled, DATABASE_DIRECT_URL: cluster.url, PORT: '0', DATABASE_START_TIMEOUT_MS: String(3 * SERVER_LOGIN_RETRY_S * 1000),
  });
  processes.push(web);
  const { port } = await web.waitForLog((line) => line.msg === 'web listening', STARTUP_TIMEOUT_MS + SERVER_LOGIN_RETRY_S * 1000) as { port: number };
  const listening = performance.now() - refusedAt;
  const health = await fetch(`http://127.0.0.1:${port}/health`);
  t.is(health.status, 200);
  // It waited for the pooler, unless it first asked once the refusal was over: listening within
  // the refusal's window means it asked during it.
  const waited = web.stdout().includes('the database cannot be reached at start');
  t.log(`listening ${Math.round(listening)} ms after the refusal; waited: ${waited}`);
  if (refusal !== null && !waited) t.true(listening >= (SERVER_LOGIN_RETRY_S - 1) * 1000, `listening ${Math.round(listening)} ms after the refusal, without waiting`);
  web.child.kill('SIGTERM');
  t.deepEqual(await web.exited, { code: 0, signal: null });
});
