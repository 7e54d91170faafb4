// A `web` process over a PostgreSQL cluster of the test's own (migrated), with an organization's
// API key: for the tests that stop, freeze or cut that cluster under a running process
// (test/database-outage.test.ts, test/frozen-connection.test.ts).
import { rm } from 'node:fs/promises';
import pg from 'pg';
import { pino } from 'pino';
import { migrate } from '../../src/db/migrate.ts';
import { startCluster, tempDir, type Cluster } from './cluster.ts';
import { runScript, startScript, type Started } from './process.ts';

export type WebOnCluster = {
  cluster: Cluster;
  web: Started;
  /** http://127.0.0.1:<port> of the web process. */
  base: string;
  /** An API key (`*`) of an organization made by the admin CLI. */
  key: string;
  /** Stops the process (SIGTERM), then the cluster, and removes its files; the cluster thawed first if frozen. */
  stop(): Promise<void>;
  /** The process's JSON log lines so far. */
  logLines(): Array<Record<string, unknown>>;
  /** POST /v1/applications `{ name }`, with its answer and how long it took. */
  createApplication(name: string, signal?: AbortSignal): Promise<{ status: number; headers: Headers; body: any; ms: number }>;
  /** Once the database is back: the first callers may still meet the lost state (503) until one connection works. */
  createOnceBack(name: string, withinMs?: number): Promise<{ status: number; headers: Headers; body: any; ms: number }>;
  /** Whether an application of that name is in the database, read directly. */
  applicationExists(name: string): Promise<boolean>;
};

export async function startWebOnCluster(name: string, env: Record<string, string>): Promise<WebOnCluster> {
  const root = await tempDir(name);
  let cluster: Cluster | undefined;
  let web: Started | undefined;
  const stop = async () => {
    await cluster?.thaw().catch(() => {});
    web?.child.kill('SIGTERM');
    await web?.exited;
    await cluster?.destroy();
    await rm(root, { recursive: true, force: true });
  };
  try {
    cluster = await startCluster(root, 'pg');
    await migrate(cluster.url, pino({ level: 'silent' }));
    web = startScript('src/main.ts', ['web'], { DATABASE_URL: cluster.url, PORT: '0', ...env });
    const { port } = await web.waitForLog((line) => line.msg === 'web listening') as { port: number };
    const created = await runScript('src/cli/admin.ts', ['create-org', '--name', name], { DATABASE_URL: cluster.url });
    const key = (JSON.parse(created.stdout) as { api_key: { key: string } }).api_key.key;
    const base = `http://127.0.0.1:${port}`;
    const running = web;
    const url = cluster.url;
    const createApplication = async (name: string, signal?: AbortSignal) => {
      const started = performance.now();
      const res = await fetch(`${base}/v1/applications`, {
        method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name }), ...(signal ? { signal } : {}),
      });
      return { status: res.status, headers: res.headers, body: await res.json() as any, ms: performance.now() - started };
    };
    return {
      cluster, web, base, key, stop, createApplication,
      logLines: () => running.stdout().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>),
      async createOnceBack(name, withinMs = 60_000) {
        for (const end = Date.now() + withinMs; ;) {
          const res = await createApplication(name);
          if (res.status !== 503 || Date.now() > end) return res;
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
      },
      async applicationExists(name) {
        const client = new pg.Client({ connectionString: url });
        await client.connect();
        try {
          return (await client.query('select 1 from applications where name = $1', [name])).rowCount === 1;
        } finally {
          await client.end();
        }
      },
    };
  } catch (error) {
    await stop(); // a start that failed half-way leaves no cluster running
    throw error;
  }
}
