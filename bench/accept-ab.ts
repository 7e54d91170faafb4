// `node bench/accept-ab.ts <other worktree>...`: the accept phase alone, this tree against
// others (e.g. checkouts of the commits before a change), interleaved in one run on one database
// server so the machine's load falls on all alike: AB_ROUNDS rounds of the bare Express ceiling,
// then each tree's web process (in a rotating order) loaded for AB_SECONDS, each tree on a
// database migrated by its own code. Each web process runs with the Node flags of its tree's
// `npm run web`, and AB_NODE_ARGS (e.g. `--cpu-prof`).
// Prints jobs/s, the share of the bare Express POST, web and database CPU per job and the web's
// peak RSS, each round and the medians (the peak: the highest).
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { pino } from 'pino';
import { createApiKey } from '../src/core/api-keys.ts';
import { createEndpoint } from '../src/core/endpoints.ts';
import { insertApplication } from '../src/db/applications.ts';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { insertEventType } from '../src/db/event-types.ts';
import { insertOrganization } from '../src/db/organizations.ts';
import { makePool } from '../src/db/pool.ts';
import { newId } from '../src/ids.ts';
import { databaseCpuSeconds, postmasterPidOf } from './database-cpu.ts';
import { PAYLOAD } from './workload.ts';

const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ROUNDS = Number(process.env.AB_ROUNDS ?? 3);
const SECONDS = Number(process.env.AB_SECONDS ?? 8);
const logger = pino({ level: 'warn' }, pino.destination(2));
type Fixture = { key: string; applicationId: string };

const freePort = () => new Promise<number>((resolve) => {
  const server = net.createServer().listen(0, '127.0.0.1', () => {
    const { port } = server.address() as net.AddressInfo;
    server.close(() => resolve(port));
  });
});
const cpu = async (pid: number) => {
  const stat = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]?.split(' ') ?? [];
  return (Number(stat[11]) + Number(stat[12])) / 100;
};
const stop = (child: ChildProcess) => new Promise((resolve) => { child.once('exit', resolve); child.kill('SIGTERM'); });

async function load(port: number, orgs: Fixture[]) {
  let next = 0;
  return autocannon({
    url: `http://127.0.0.1:${port}`, connections: 50, duration: SECONDS,
    requests: [{
      method: 'POST', path: '/v1/webhook-jobs',
      setupRequest: (request) => {
        const org = orgs[next++ % orgs.length] as Fixture;
        return { ...request, headers: { 'content-type': 'application/json', authorization: `Bearer ${org.key}` },
          body: JSON.stringify({ application_id: org.applicationId, event_type: 'invoice.paid', payload: PAYLOAD }) };
      },
    }],
  });
}

async function prepare(tree: string, url: string): Promise<Fixture[]> {
  const { migrate } = await import(path.join(tree, 'src/db/migrate.ts')) as { migrate: (u: string, l: unknown) => Promise<void> };
  await migrate(url, logger);
  const pool = await makePool(url, { maximumPoolSize: 4 });
  const out: Fixture[] = [];
  for (let i = 0; i < 50; i += 1) {
    const org = await insertOrganization(pool, { id: newId('org'), name: `ab ${i}` });
    const tenant = { orgId: org.id, environment: 'live' as const };
    const { key } = await createApiKey(pool, { orgId: org.id, environment: 'live', name: 'ab', scopes: ['*'], expiresAt: null });
    const app = await insertApplication(pool, tenant, { id: newId('app'), name: 'ab', uid: null, metadata: {} });
    await insertEventType(pool, tenant, { id: newId('evt'), name: 'invoice.paid', description: null, schema: null });
    await createEndpoint(pool, tenant, { applicationId: app.id, url: 'http://127.0.0.1:9/hook', eventTypes: ['invoice.paid'], headers: {}, rateLimitRps: 10_000, timeoutMs: 30_000 });
    out.push({ key, applicationId: app.id });
  }
  await pool.end();
  return out;
}

const embedded = await startEmbeddedPostgres({ dataDir: path.join(here, '.data', `ab-${process.pid}`), logger, ephemeral: true, durable: true });
const admin = new pg.Client({ connectionString: embedded.url });
await admin.connect();
const trees = [{ name: 'this', dir: here }, ...process.argv.slice(2).map((dir) => ({ name: path.basename(dir), dir: path.resolve(dir) }))];
const setups = [];
for (const [i, tree] of trees.entries()) {
  await admin.query(`create database ab_${i}`);
  const url = new URL(embedded.url);
  url.pathname = `/ab_${i}`;
  setups.push({ ...tree, url: url.toString(), orgs: await prepare(tree.dir, url.toString()) });
}
const postmasterPid = await postmasterPidOf(admin);
const rows: Record<string, { express: number; jobs: number; share: number; cpu_us: number; db_cpu_us: number; peak_mb: number }[]> = Object.fromEntries(trees.map((tree) => [tree.name, []]));
try {
  for (let round = 0; round < ROUNDS; round += 1) {
    const bare = fork(path.join(here, 'bench/bare-express.ts'), { stdio: 'inherit' });
    const { port: barePort } = await new Promise<{ port: number }>((resolve) => bare.once('message', (m) => resolve(m as { port: number })));
    const express = (await load(barePort, setups[0]!.orgs))['2xx'] / SECONDS;
    await stop(bare);
    for (const s of [...setups.slice(round % setups.length), ...setups.slice(0, round % setups.length)]) {
      const port = await freePort();
      const { scripts } = JSON.parse(await readFile(path.join(s.dir, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
      const own = (/\bnode (.*)src\/main\.ts/.exec(scripts.web ?? '')?.[1] ?? '').split(' ');
      const nodeArgs = [...own, ...(process.env.AB_NODE_ARGS ?? '').split(' ')].filter(Boolean);
      const web = spawn(process.execPath, [...nodeArgs, path.join(s.dir, 'src/main.ts'), 'web'], {
        cwd: s.dir, stdio: ['ignore', 'ignore', 'inherit'],
        env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', DATABASE_URL: s.url, PORT: String(port), RATE_LIMIT_JOBS_PER_SECOND: '1000000' },
      });
      for (let i = 0; i < 200 && !(await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.ok, () => false)); i += 1) await new Promise((r) => setTimeout(r, 100));
      const before = await cpu(web.pid ?? 0);
      const dbBefore = await databaseCpuSeconds(postmasterPid) ?? 0;
      const run = await load(port, s.orgs);
      const used = await cpu(web.pid ?? 0) - before;
      const peakMb = Math.round(Number(/VmHWM:\s+(\d+)/.exec(await readFile(`/proc/${web.pid}/status`, 'utf8'))?.[1] ?? 0) / 1024);
      const dbUsed = (await databaseCpuSeconds(postmasterPid) ?? 0) - dbBefore;
      await stop(web);
      const jobs = run['2xx'] / SECONDS;
      rows[s.name]!.push({ express: Math.round(express), jobs: Math.round(jobs), share: +(jobs / express).toFixed(3), cpu_us: Math.round(used * 1e6 / Math.max(1, run['2xx'])), db_cpu_us: Math.round(dbUsed * 1e6 / Math.max(1, run['2xx'])), peak_mb: peakMb });
      process.stderr.write(`round ${round + 1} ${s.name}: ${JSON.stringify(rows[s.name]!.at(-1))} non-2xx ${run.non2xx}\n`);
    }
  }
} finally {
  await admin.end();
  await embedded.stop();
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
for (const [name, list] of Object.entries(rows)) {
  console.log(name, {
    jobs: median(list.map((r) => r.jobs)), share: median(list.map((r) => r.share)), cpu_us: median(list.map((r) => r.cpu_us)),
    db_cpu_us: median(list.map((r) => r.db_cpu_us)), peak_mb: Math.max(...list.map((r) => r.peak_mb)),
  });
}
process.exit(0);
