// A stop that outlives its waits is cut short (src/main.ts, stopDeadline). A probe: a worker
// behind PgBouncer, with the database down, took 25-117 s to stop on SIGTERM with
// SHUTDOWN_TIMEOUT_MS=3000 (the pooler held each of its statements), past any platform's grace
// period. Here the worker's database is a cluster of the test's own, frozen with SIGSTOP (TCP
// accepted, nothing answered), as the pooler looks to its clients: the worker exits 0 with a
// warning after SHUTDOWN_TIMEOUT_MS plus the margin, where each of its statements alone would wait
// for the client-side statement deadline (the statement timeout plus 2 s).
import test from 'ava';
import { rm } from 'node:fs/promises';
import { pino } from 'pino';
import { migrate } from '../src/db/migrate.ts';
import { STOP_MARGIN_MS } from '../src/stop-deadline.ts';
import { startCluster, tempDir, type Cluster } from './helpers/cluster.ts';
import { startScript, STARTUP_TIMEOUT_MS } from './helpers/process.ts';

const SHUTDOWN_TIMEOUT_MS = 1_000;
const STATEMENT_TIMEOUT_MS = 60_000;

test('a worker whose database stops answering exits on SIGTERM after SHUTDOWN_TIMEOUT_MS and the margin, with a warning', async (t) => {
  t.timeout(STARTUP_TIMEOUT_MS + 3 * STATEMENT_TIMEOUT_MS);
  const root = await tempDir('stop-deadline');
  let cluster: Cluster | undefined;
  t.teardown(async () => {
    await cluster?.thaw().catch(() => {});
    await cluster?.destroy();
    await rm(root, { recursive: true, force: true });
  });
  cluster = await startCluster(root, 'pg');
  await migrate(cluster.url, pino({ level: 'silent' }));
  const worker = startScript('src/main.ts', ['worker'], {
    DATABASE_URL: cluster.url, SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS), DATABASE_STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS),
  });
  t.teardown(() => { if (worker.child.exitCode === null) worker.child.kill('SIGKILL'); });
  await worker.waitForLog((line) => line.msg === 'worker started', STARTUP_TIMEOUT_MS);

  await cluster.freeze();
  // The worker's loops go on asking the database (claims every second at most, upkeep): its
  // statements now wait on the frozen server.
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  const signalled = performance.now();
  worker.child.kill('SIGTERM');
  const exited = await worker.exited;
  const ms = performance.now() - signalled;
  t.log(`exited ${JSON.stringify(exited)} ${Math.round(ms)} ms after SIGTERM`);
  t.deepEqual(exited, { code: 0, signal: null });
  const lines = worker.stdout().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { msg: string; waited_ms?: number });
  const cut = lines.find((l) => l.msg.startsWith('stopping took longer than SHUTDOWN_TIMEOUT_MS allows'));
  t.is(cut?.waited_ms, SHUTDOWN_TIMEOUT_MS + STOP_MARGIN_MS, lines.map((l) => l.msg).join('\n'));
  // Not before its time; and well before one statement's client-side deadline (a busy machine
  // may add seconds; the cut itself is what the log line above shows).
  t.true(ms >= SHUTDOWN_TIMEOUT_MS + STOP_MARGIN_MS - 500, `${Math.round(ms)} ms`);
  t.true(ms < STATEMENT_TIMEOUT_MS, `${Math.round(ms)} ms`);
});
