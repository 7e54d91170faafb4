// What the A/B scripts (bench/accept-ab.ts, delivery-ab.ts, latency-ab.ts) share: each tree's
// database migrated by that tree's own code with the same 50 tenants, its processes started with
// the Node flags and environment settings of its own `npm run <role>`, and the /proc readings of
// a process.
import { fork, spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { closeSync, createWriteStream, openSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import pg from 'pg';
import { pino, type Logger } from 'pino';
import { createApiKey } from '../src/core/api-keys.ts';
import { createEndpoint } from '../src/core/endpoints.ts';
import { insertApplication } from '../src/db/applications.ts';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { insertEventType } from '../src/db/event-types.ts';
import { insertOrganization } from '../src/db/organizations.ts';
import { makePool } from '../src/db/pool.ts';
import { newId } from '../src/ids.ts';
import { startQueue } from '../src/queue.ts';
import { nodeFlagsOf, readNodeScript } from './scripts.ts';
import { startReceiver, type Sender } from './workload.ts';

export type Fixture = Sender;

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export const freePort = () => new Promise<number>((resolve) => {
  const server = net.createServer().listen(0, '127.0.0.1', () => {
    const { port } = server.address() as net.AddressInfo;
    server.close(() => resolve(port));
  });
});

/** CPU seconds a process has used so far (user + system), from /proc. */
export async function cpuSeconds(pid: number): Promise<number> {
  const stat = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]?.split(' ') ?? [];
  return (Number(stat[11]) + Number(stat[12])) / 100;
}

/** Peak resident memory (VmHWM) of a process, in MB. */
export async function peakMb(pid: number): Promise<number> {
  return Math.round(Number(/VmHWM:\s+(\d+)/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024);
}

/** SIGTERM, and resolves when the process has exited. */
export function stop(child: ChildProcess): Promise<unknown> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve(null);
    child.once('exit', resolve);
    child.kill('SIGTERM');
  });
}

/** A database named `name` on the server `admin` is connected to (at `serverUrl`): its URL. */
export async function createDatabase(admin: pg.Client, serverUrl: string, name: string): Promise<string> {
  await admin.query(`create database ${name}`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * Migrates `url` with the tree's own code, then 50 tenants: each an organization with a key, an
 * application, the event type invoice.paid and one endpoint at `endpointUrl` (10,000 starts/s).
 */
export async function prepareTree(tree: string, url: string, endpointUrl: string, logger: Logger): Promise<Fixture[]> {
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
    await createEndpoint(pool, tenant, {
      applicationId: app.id, url: endpointUrl, eventTypes: ['invoice.paid'], headers: {}, rateLimitRps: 10_000, timeoutMs: 30_000,
    }, Number.MAX_SAFE_INTEGER); // a bench's own setup: no limit of endpoints
    out.push({ key, applicationId: app.id });
  }
  await pool.end();
  return out;
}

/**
 * The accept floor's database (bench/accept-floor-server.ts): this tree's code and tenants, as
 * prepareTree makes them, with endpoints no worker serves, and the queue the floor enqueues on.
 */
export async function prepareAcceptFloor(tree: string, url: string, logger: Logger): Promise<Fixture[]> {
  const orgs = await prepareTree(tree, url, 'http://127.0.0.1:9/hook', logger);
  await (await startQueue({ databaseUrl: url, logger, leaseSeconds: 60, supervise: false, retentionHours: 24 })).stop();
  return orgs;
}

/**
 * The accept floor of `tree` on `url` (or `server`, another script of the same kind: the stack's
 * limit), with these Node flags after this process's own; resolves once it listens.
 */
export async function startAcceptFloor(
  tree: string, url: string, nodeArgs: string[], stdio: StdioOptions, env: Record<string, string> = {}, server = 'bench/accept-floor-server.ts',
): Promise<{ child: ChildProcess; port: number }> {
  const child = fork(path.join(tree, server), {
    execArgv: [...process.execArgv, ...nodeArgs], stdio, env: { PATH: process.env.PATH ?? '', ...env, DATABASE_URL: url },
  });
  const { port } = await new Promise<{ port: number }>((resolve) => child.once('message', (m) => resolve(m as { port: number })));
  return { child, port };
}

/**
 * How the tree's `npm run <role>` starts the role (its package.json, read once): its Node flags,
 * then `extra`, and its environment settings (e.g. MALLOC_ARENA_MAX).
 */
export function roleScriptOf(dir: string, role: 'web' | 'worker', extra = ''): { nodeArgs: string[]; env: Record<string, string> } {
  const script = readNodeScript(dir, role);
  return { nodeArgs: [...nodeFlagsOf(script), ...extra.split(' ')].filter(Boolean), env: script.env };
}

/** The tree's `src/main.ts <role>`, with its own flags, settings and `extraNodeArgs`, local destinations allowed and job creation unlimited. */
export function startRole(dir: string, role: 'web' | 'worker', env: Record<string, string>, extraNodeArgs = ''): ChildProcess {
  const script = roleScriptOf(dir, role, extraNodeArgs);
  return spawn(process.execPath, [...script.nodeArgs, path.join(dir, 'src/main.ts'), role], {
    cwd: dir, stdio: ['ignore', process.env.AB_ROLE_STDOUT === '1' ? 'inherit' : 'ignore', 'inherit'],
    env: {
      PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', ALLOW_PRIVATE_DESTINATIONS: 'true', RATE_LIMIT_JOBS_PER_SECOND: '1000000',
      ...script.env, ...env,
    },
  });
}

/**
 * Starts `role` of the tree in `dir` with the Node flags and settings of its `npm run <role>`,
 * then `env` (and nothing else of this process's environment but PATH), its stdout and stderr
 * in `logFile`.
 */
export function startLoggedRole(dir: string, role: 'web' | 'worker', env: Record<string, string>, logFile: string): ChildProcess {
  const script = roleScriptOf(dir, role);
  const fd = openSync(logFile, 'w');
  try {
    return spawn(process.execPath, [...script.nodeArgs, path.join(dir, 'src/main.ts'), role], {
      cwd: dir, stdio: ['ignore', fd, fd], env: { PATH: process.env.PATH ?? '', ...script.env, ...env },
    });
  } finally {
    closeSync(fd);
  }
}

/**
 * The logger of a bench that starts its own server: the server's log lines, which reach
 * embedded.ts's logger as `trace` lines ({ postgres }), go whole to `file` (rather than the last
 * 50 lines embedded.ts keeps for a failed start) and to `onLine`; this process's warnings and
 * errors go to stderr. `close()` ends the file.
 */
export function serverLogger(file: string, onLine: (line: string) => void = () => {}): { logger: Logger; close(): Promise<void> } {
  const stream = createWriteStream(file);
  const logger = pino({
    level: 'trace',
    hooks: {
      logMethod(args, method, level) {
        const text = (args[0] as { postgres?: unknown } | null)?.postgres;
        if (typeof text === 'string') {
          onLine(text);
          stream.write(`${text}\n`);
        } else if (level >= 40) Reflect.apply(method, this, args);
      },
    },
  }, pino.destination(2));
  return { logger, close: () => new Promise((resolve) => { stream.end(resolve); }) };
}

/** Waits until the web process on `port` answers /health (20 s at most). */
export async function healthy(port: number): Promise<void> {
  for (let i = 0; i < 200 && !(await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.ok, () => false)); i += 1) await sleep(100);
}

/** What bench/receiver.ts reports: requests seen, first and last arrival (epoch ms). */
export type ReceiverStats = { count: number; first: number; last: number };

/** Polls `ask` every 100 ms until the receiver has seen a request (60 s at most). */
export async function firstArrival(ask: () => Promise<ReceiverStats>, name: string): Promise<ReceiverStats> {
  let stats = await ask();
  for (let waited = 0; stats.count === 0; waited += 1) {
    if (waited > 600) throw new Error(`${name}: no delivery within 60 s`);
    await sleep(100);
    stats = await ask();
  }
  return stats;
}

/** Polls `ask` every 100 ms until the receiver has seen `target` requests; fails after 30 s without one. */
export async function allArrived(ask: () => Promise<ReceiverStats>, from: ReceiverStats, target: number, name: string): Promise<ReceiverStats> {
  let stats = from;
  for (let idle = 0; stats.count < target; ) {
    await sleep(100);
    const next = await ask();
    idle = next.count > stats.count ? 0 : idle + 1;
    if (idle > 300) throw new Error(`${name}: stalled at ${next.count} of ${target}`);
    stats = next;
  }
  return stats;
}

/** The sixteen statements of `db`'s database that took the most time to plan and run (pg_stat_statements), in µs per one of `count`, with how often each was planned. */
export async function topStatements(db: pg.Client, count: number): Promise<unknown[]> {
  const { rows } = await db.query(`
    select round((total_exec_time * 1000 / $1)::numeric, 1) as us_per_delivery, calls,
           round((total_plan_time * 1000 / $1)::numeric, 1) as plan_us_per_delivery, plans, left(regexp_replace(query, '\\s+', ' ', 'g'), 90) as query
    from pg_stat_statements where dbid = (select oid from pg_database where datname = current_database())
    order by total_exec_time + total_plan_time desc limit 16`, [count]);
  return rows;
}

/** Each tree's rounds summed up: the median of every figure, the highest of a peak (`*_peak_mb`). */
export function printMedians(rows: Record<string, Array<Record<string, number>>>): void {
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  for (const [name, list] of Object.entries(rows)) {
    const keys = Object.keys(list[0] ?? {});
    console.log(name, Object.fromEntries(keys.map((key) => {
      const values = list.map((r) => r[key] ?? NaN);
      return [key, key.endsWith('_peak_mb') ? Math.max(...values) : median(values)];
    })));
  }
}

/**
 * What the delivery, recovery and latency A/Bs start with: one embedded server of their own
 * (`.data/<name>-<pid>`, `settings` added), a client of it, bench/receiver.ts in a process of its
 * own with `ask` (a message to it, 'stats' by default, and its answer), the trees: this one
 * (`here`), then each directory on the command line, and `close` for the end.
 */
export async function startAbRun(here: string, name: string, logger: Logger, settings: Record<string, string> = {}) {
  const embedded = await startEmbeddedPostgres({ dataDir: path.join(here, '.data', `${name}-${process.pid}`), logger, ephemeral: true, durable: true, settings });
  const admin = new pg.Client({ connectionString: embedded.url });
  await admin.connect();
  const { receiver, port: receiverPort } = await startReceiver(['ignore', 'inherit', 'inherit', 'ipc']);
  const ask = <T = ReceiverStats>(message = 'stats') =>
    new Promise<T>((resolve) => { receiver.once('message', (m) => resolve(m as T)); receiver.send(message); });
  const trees = [{ name: 'this', dir: here }, ...process.argv.slice(2).map((dir) => ({ name: path.basename(dir), dir: path.resolve(dir) }))];
  /** Closes the trees' clients `dbs`, then the receiver, the client and the server. */
  const close = async (dbs: pg.Client[]) => {
    for (const db of dbs) await db.end();
    receiver.kill();
    await admin.end();
    await embedded.stop();
  };
  return { embedded, admin, receiver, receiverPort, ask, trees, close };
}

/** The settings that load pg_stat_statements, tracking nested statements too (AB_STATEMENTS=1). */
export const STATEMENT_SETTINGS = { shared_preload_libraries: 'pg_stat_statements', 'pg_stat_statements.track': 'all', 'pg_stat_statements.track_planning': 'on' };

/** A database of the run's server named `name`, with a client of it (pg_stat_statements created when `statements`). */
export async function treeDatabase(admin: pg.Client, serverUrl: string, name: string, statements: boolean): Promise<{ url: string; db: pg.Client }> {
  const url = await createDatabase(admin, serverUrl, name);
  const db = new pg.Client({ connectionString: url });
  await db.connect();
  if (statements) await db.query('create extension if not exists pg_stat_statements');
  return { url, db };
}
