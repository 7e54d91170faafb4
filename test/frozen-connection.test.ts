// A request that already holds a pooled connection when the database freezes (an outside probe,
// 2026-11-30): it hung for the whole outage (31 s for a 30 s SIGSTOP of PostgreSQL, over 60 s for
// 75 s), and one POST committed after its client had given up. PostgreSQL's statement_timeout
// cannot fire in a server that does not run, and the pool had no deadline of its own. Now each
// statement has a client-side one (the statement timeout plus 2 s, src/db/pg-driver.ts): the
// request answers 503 service_unavailable, its connection is closed, nothing it started commits,
// and the process serves again once the database is back. A `web` process over a cluster of this
// test's own, frozen with SIGSTOP (postmaster and backends: TCP still accepted, nothing answered).
import test from 'ava';
import { rm } from 'node:fs/promises';
import pg from 'pg';
import { pino } from 'pino';
import { migrate } from '../src/db/migrate.ts';
import { startCluster, tempDir, type Cluster } from './helpers/cluster.ts';
import { runScript, startScript, type Started } from './helpers/process.ts';

const STATEMENT_TIMEOUT_MS = 2_000;
/** How long the test lets a request wait on the frozen server: the outage, as far as the request can tell. */
const FREEZE_MS = 45_000;
let root = '';
let cluster: Cluster;
let web: Started;
let base = '';
let key = '';

test.before(async () => {
  root = await tempDir('frozen');
  cluster = await startCluster(root, 'pg');
  await migrate(cluster.url, pino({ level: 'silent' }));
  web = startScript('src/main.ts', ['web'], {
    DATABASE_URL: cluster.url, PORT: '0', DATABASE_POOL_SIZE: '2',
    DATABASE_STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS), DATABASE_ACQUIRE_TIMEOUT_MS: '10000',
  });
  const { port } = await web.waitForLog((line) => line.msg === 'web listening') as { port: number };
  base = `http://127.0.0.1:${port}`;
  const created = await runScript('src/cli/admin.ts', ['create-org', '--name', 'Frozen'], { DATABASE_URL: cluster.url });
  key = (JSON.parse(created.stdout) as { api_key: { key: string } }).api_key.key;
});

test.after.always(async () => {
  await cluster?.thaw().catch(() => {});
  web?.child.kill('SIGTERM');
  await web?.exited;
  await cluster?.destroy();
  if (root) await rm(root, { recursive: true, force: true });
});

const logLines = () => web.stdout().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);

async function createApplication(name: string, signal?: AbortSignal) {
  const started = performance.now();
  try {
    const res = await fetch(`${base}/v1/applications`, {
      method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name }), ...(signal ? { signal } : {}),
    });
    return { status: res.status, headers: res.headers, body: await res.json() as any, ms: performance.now() - started };
  } catch (error) {
    return { status: 0, headers: new Headers(), body: String(error), ms: performance.now() - started };
  }
}

async function createOnceBack(name: string) {
  for (const stop = Date.now() + 60_000; ;) {
    const res = await createApplication(name);
    if (res.status !== 503 || Date.now() > stop) return res;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

async function applicationExists(name: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: cluster.url });
  await client.connect();
  try {
    return (await client.query('select 1 from applications where name = $1', [name])).rowCount === 1;
  } finally {
    await client.end();
  }
}

test('a request on a pooled connection when the database freezes answers 503, commits nothing, and the process recovers', async (t) => {
  t.timeout(FREEZE_MS + 180_000);
  // Both connections open and idle in the pool: the next requests take one at once.
  const warm = await Promise.all([createApplication('warm-1'), createApplication('warm-2')]);
  t.deepEqual(warm.map((r) => r.status), [201, 201]);

  await cluster.freeze();
  let during: Awaited<ReturnType<typeof createApplication>>;
  try {
    during = await createApplication('frozen', AbortSignal.timeout(FREEZE_MS));
  } finally {
    await cluster.thaw();
  }
  t.log(`with the database frozen: ${during.status} after ${Math.round(during.ms)} ms (statement timeout ${STATEMENT_TIMEOUT_MS} ms)`);
  t.is(during.status, 503, JSON.stringify(during.body));
  t.is(during.body.error?.code, 'service_unavailable');
  t.is(during.headers.get('retry-after'), '5');
  // Bounded by the statement timeout, not the outage (generously: a busy machine).
  t.true(during.ms < FREEZE_MS / 2, `${Math.round(during.ms)} ms`);

  const after = await createOnceBack('thawed');
  t.is(after.status, 201, JSON.stringify(after.body));
  await new Promise((resolve) => setTimeout(resolve, 500));
  t.false(await applicationExists('frozen'), 'the request answered 503 never commits once the database is back');
  t.true(await applicationExists('thawed'));
  const lines = logLines();
  t.deepEqual(lines.filter((l) => (l.level as number) >= 50 && l.msg !== 'database unavailable: requests answer 503 until it is back').map((l) => l.msg), []);
  t.is(lines.filter((l) => l.msg === 'database unavailable: requests answer 503 until it is back').length, 1);
});
