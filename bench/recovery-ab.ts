// `node bench/recovery-ab.ts <other worktree>...`: the bench's recovery phase alone, this tree
// against others (e.g. checkouts of the commits before a change), interleaved in one run on one
// database server so the machine's load falls on all alike. Each tree gets a database migrated by
// its own code and the 50 tenants of bench/ab.ts at one receiver. Each round, for each tree in a
// rotating order: AB_BACKLOG (100,000) deliveries of one endpoint that gave up an hour ago are
// written by SQL (bench/workload.ts insertGiveUps, as the bench's phase writes them), the
// database is vacuumed and analyzed, the tree's web and worker start, and one
// POST /v1/endpoints/{id}/recover takes them all back; the worker's upkeep re-queues them in
// batches while it delivers them. Per round: the request's time, the re-queue's (requested_at
// to completed_at of the recovery), the deliveries' rate from the first arrival to the last, and
// the worker's and the database server's CPU per delivery from the first arrival on. Each role
// runs with the Node flags of its tree's `npm run web` / `npm run worker`; AB_NODE_ARGS is added
// to the worker's. With AB_STATEMENTS=1 the server loads pg_stat_statements (track = all) and
// each round prints the sixteen statements that took the most time to plan and run, per delivery.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import {
  allArrived, cpuSeconds, firstArrival, freePort, healthy, peakMb, prepareTree, printMedians, startAbRun, startRole, STATEMENT_SETTINGS, stop,
  topStatements, treeDatabase,
} from './ab.ts';
import { databaseCpuSeconds, postmasterPidOf } from './database-cpu.ts';
import { insertGiveUps, type JobTarget } from './workload.ts';

const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ROUNDS = Number(process.env.AB_ROUNDS ?? 3);
const BACKLOG = Number(process.env.AB_BACKLOG ?? 100_000);
const STATEMENTS = process.env.AB_STATEMENTS === '1';
const logger = pino({ level: 'warn' }, pino.destination(2));

const { embedded, admin, receiver, receiverPort, ask, trees, close } = await startAbRun(here, 'recovery-ab', logger, STATEMENTS ? STATEMENT_SETTINGS : {});
const setups = [];
for (const [i, tree] of trees.entries()) {
  const { url, db } = await treeDatabase(admin, embedded.url, `rab_${i}`, STATEMENTS);
  const [org] = await prepareTree(tree.dir, url, `http://127.0.0.1:${receiverPort}/hook`, logger);
  const { rows: [target] } = await db.query<JobTarget>(
    'select org_id as "orgId", application_id as "applicationId", id as "endpointId" from endpoints where application_id = $1', [org!.applicationId]);
  setups.push({ ...tree, url, db, key: org!.key, target: target! });
}
const postmasterPid = await postmasterPidOf(admin);
type Row = { request_ms: number; requeue_seconds: number; deliveries_per_second: number; worker_us: number; db_us: number; worker_peak_mb: number };
const rows: Record<string, Row[]> = Object.fromEntries(trees.map((tree) => [tree.name, []]));
try {
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const s of [...setups.slice(round % setups.length), ...setups.slice(0, round % setups.length)]) {
      await insertGiveUps(s.db, s.target, { prefix: `gaveup${round}r`, count: BACKLOG });
      await s.db.query('vacuum analyze');
      receiver.send('reset');
      if (STATEMENTS) await s.db.query('select pg_stat_statements_reset()');
      const port = await freePort();
      const web = await startRole(s.dir, 'web', { DATABASE_URL: s.url, PORT: String(port) });
      const worker = await startRole(s.dir, 'worker', { DATABASE_URL: s.url }, process.env.AB_NODE_ARGS);
      try {
        await healthy(port);
        const since = new Date(Date.now() - 2 * 3_600_000).toISOString();
        const requested = performance.now();
        const res = await fetch(`http://127.0.0.1:${port}/v1/endpoints/${s.target.endpointId}/recover`, {
          method: 'POST', headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/json' }, body: JSON.stringify({ since }),
        });
        const requestMs = performance.now() - requested;
        const answer = await res.json() as { deliveries?: number };
        if (answer.deliveries !== BACKLOG) throw new Error(`${s.name}: recover answered ${res.status} ${JSON.stringify(answer)}`);
        const started = await firstArrival(ask, s.name);
        const firstCount = started.count;
        const before = await cpuSeconds(worker.pid ?? 0);
        const dbBefore = await databaseCpuSeconds(postmasterPid) ?? 0;
        const stats = await allArrived(ask, started, BACKLOG, s.name);
        const used = await cpuSeconds(worker.pid ?? 0) - before;
        const dbUsed = (await databaseCpuSeconds(postmasterPid) ?? 0) - dbBefore;
        const { rows: [recovery] } = await s.db.query<{ seconds: number }>(`
          select extract(epoch from completed_at - requested_at)::float8 as seconds from endpoint_recoveries
          where endpoint_id = $1 order by id desc limit 1`, [s.target.endpointId]);
        const counted = Math.max(1, stats.count - firstCount);
        const row = {
          request_ms: Math.round(requestMs), requeue_seconds: +(recovery?.seconds ?? NaN).toFixed(1),
          deliveries_per_second: Math.round(stats.count / Math.max(0.001, (stats.last - stats.first) / 1000)),
          worker_us: Math.round(used * 1e6 / counted), db_us: Math.round(dbUsed * 1e6 / counted), worker_peak_mb: await peakMb(worker.pid ?? 0),
        };
        rows[s.name]!.push(row);
        process.stderr.write(`round ${round + 1} ${s.name}: ${JSON.stringify(row)}\n`);
      } finally {
        await stop(worker);
        await stop(web);
      }
      if (STATEMENTS) console.table(await topStatements(s.db, BACKLOG));
      await s.db.query('vacuum');
    }
  }
} finally {
  await close(setups.map((s) => s.db));
}
printMedians(rows);
process.exit(0);
