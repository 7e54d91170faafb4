// `node bench/delivery-ab.ts <other worktree>...`: the delivery phase alone, this tree against
// others (e.g. checkouts of the commits before a change), interleaved in one run on one database
// server so the machine's load falls on all alike. Each tree gets a database migrated by its own
// code and 50 tenants with one endpoint each at one receiver. Each round, for each tree in a
// rotating order: its web process accepts AB_JOBS jobs (posted by 50 connections, no worker
// running), then one worker of that tree, just started, delivers them all; the rate counts from
// the first arrival to the last, and CPU (the worker's, the database server's) from the first
// arrival on, as the bench's delivery phase does; each database is vacuumed before and after its
// drain, so the figures leave out vacuuming (autovacuum's, at any other time). Each role runs
// with the Node flags of its tree's `npm run web` / `npm run worker`; AB_NODE_ARGS (e.g.
// `--cpu-prof`) is added to each worker's.
// With AB_STATEMENTS=1 the server loads pg_stat_statements (track = all) and each round prints
// the sixteen statements that took the most time to plan and run during the drain, per delivery.
// With AB_HISTORY=1 every endpoint starts with a day of per-minute attempt stats (1,440 minutes),
// as after a day of steady traffic, which a fresh database never has (the success rates' cost
// once grew with it: bench/statement-costs.ts).
// Prints deliveries/s, worker and database CPU per delivery and the worker's peak RSS, each round
// and the medians (the peak: the highest); each round also what the server wrote and read during
// the drain (WAL bytes and full-page images per delivery, checkpoints begun, blocks read from
// outside shared_buffers per delivery).
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { pino } from 'pino';
import {
  allArrived, cpuSeconds, firstArrival, freePort, healthy, peakMb, prepareTree, printMedians, startAbRun, startRole, STATEMENT_SETTINGS, stop,
  topStatements, treeDatabase, type Fixture,
} from './ab.ts';
import { databaseCpuSeconds, postmasterPidOf } from './database-cpu.ts';
import { insertStatsHistory, jobRequests } from './workload.ts';

const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ROUNDS = Number(process.env.AB_ROUNDS ?? 3);
const JOBS = Number(process.env.AB_JOBS ?? 15_000);
const STATEMENTS = process.env.AB_STATEMENTS === '1';
const HISTORY = process.env.AB_HISTORY === '1';
const logger = pino({ level: 'warn' }, pino.destination(2));

/** Posts exactly `count` jobs through the tree's web process (50 connections). */
async function accept(dir: string, url: string, orgs: Fixture[], count: number): Promise<void> {
  const port = await freePort();
  const web = await startRole(dir, 'web', { DATABASE_URL: url, PORT: String(port) });
  try {
    await healthy(port);
    const run = await autocannon({ url: `http://127.0.0.1:${port}`, connections: 50, amount: count, requests: jobRequests(orgs) });
    if (run['2xx'] !== count) throw new Error(`${dir}: ${run['2xx']} of ${count} jobs accepted (${run.non2xx} refused)`);
  } finally {
    await stop(web);
  }
}

type ServerCounters = Record<'wal_bytes' | 'wal_fpi' | 'checkpoints' | 'blks_read', number>;

/** The server's WAL written, full-page images, checkpoints begun and blocks read from outside its buffers, so far. */
async function serverCounters(admin: import('pg').Client): Promise<ServerCounters> {
  const { rows: [row] } = await admin.query<Record<keyof ServerCounters, string>>(`
    select (select wal_bytes from pg_stat_wal) as wal_bytes, (select wal_fpi from pg_stat_wal) as wal_fpi,
           (select num_timed + num_requested from pg_stat_checkpointer) as checkpoints,
           (select sum(blks_read) from pg_stat_database) as blks_read`);
  return Object.fromEntries(Object.entries(row!).map(([k, v]) => [k, Number(v)])) as ServerCounters;
}

const { embedded, admin, receiver, receiverPort, ask, trees, close } = await startAbRun(here, 'delivery-ab', logger, STATEMENTS ? STATEMENT_SETTINGS : {});
const setups = [];
for (const [i, tree] of trees.entries()) {
  const { url, db } = await treeDatabase(admin, embedded.url, `dab_${i}`, STATEMENTS);
  setups.push({ ...tree, url, db, orgs: await prepareTree(tree.dir, url, `http://127.0.0.1:${receiverPort}/hook`, logger) });
  if (HISTORY) await insertStatsHistory(db);
}
const postmasterPid = await postmasterPidOf(admin);
const rows: Record<string, { deliveries_per_second: number; worker_us: number; db_us: number; worker_peak_mb: number }[]> = Object.fromEntries(trees.map((tree) => [tree.name, []]));
try {
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const s of [...setups.slice(round % setups.length), ...setups.slice(0, round % setups.length)]) {
      await accept(s.dir, s.url, s.orgs, JOBS);
      // Vacuumed before and after its drain, so no drain pays for another's cleanup in the
      // database server's CPU (autovacuum of the tree before would run during the next).
      await s.db.query('vacuum analyze');
      receiver.send('reset');
      if (STATEMENTS) await s.db.query('select pg_stat_statements_reset()');
      const worker = await startRole(s.dir, 'worker', { DATABASE_URL: s.url }, process.env.AB_NODE_ARGS);
      const started = await firstArrival(ask, s.name);
      const firstCount = started.count;
      const before = await cpuSeconds(worker.pid ?? 0);
      const dbBefore = await databaseCpuSeconds(postmasterPid) ?? 0;
      const serverBefore = await serverCounters(admin);
      const stats = await allArrived(ask, started, JOBS, s.name);
      const used = await cpuSeconds(worker.pid ?? 0) - before;
      const peak = await peakMb(worker.pid ?? 0);
      const dbUsed = (await databaseCpuSeconds(postmasterPid) ?? 0) - dbBefore;
      const serverAfter = await serverCounters(admin);
      await stop(worker);
      await s.db.query('vacuum');
      const counted = Math.max(1, stats.count - firstCount);
      const row = {
        deliveries_per_second: Math.round(stats.count / Math.max(0.001, (stats.last - stats.first) / 1000)),
        worker_us: Math.round(used * 1e6 / counted), db_us: Math.round(dbUsed * 1e6 / counted), worker_peak_mb: peak,
      };
      // What the server wrote and read meanwhile (the whole server's counters: nothing else runs).
      const server = {
        wal_bytes_per_delivery: Math.round((serverAfter.wal_bytes - serverBefore.wal_bytes) / counted),
        full_page_images_per_delivery: Number(((serverAfter.wal_fpi - serverBefore.wal_fpi) / counted).toFixed(3)),
        checkpoints: serverAfter.checkpoints - serverBefore.checkpoints,
        blocks_read_per_delivery: Number(((serverAfter.blks_read - serverBefore.blks_read) / counted).toFixed(3)),
      };
      process.stderr.write(`round ${round + 1} ${s.name} server: ${JSON.stringify(server)}\n`);
      rows[s.name]!.push(row);
      process.stderr.write(`round ${round + 1} ${s.name}: ${JSON.stringify(row)}\n`);
      if (STATEMENTS) console.table(await topStatements(s.db, stats.count));
    }
  }
} finally {
  await close(setups.map((s) => s.db));
}
printMedians(rows);
process.exit(0);
