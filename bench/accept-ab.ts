// `node bench/accept-ab.ts <other worktree>...`: the accept phase alone, this tree against
// others (e.g. checkouts of the commits before a change), interleaved in one run on one database
// server so the machine's load falls on all alike: AB_ROUNDS rounds of the bare Express ceiling,
// then each tree's web process (in a rotating order) loaded for AB_SECONDS, each tree on a
// database migrated by its own code. Each web process runs with the Node flags and environment
// settings of its tree's `npm run web`, and AB_NODE_ARGS (e.g. `--cpu-prof`).
// Prints jobs/s, the share of the bare Express POST, web and database CPU per job and the web's
// peak RSS, each round and the medians (the peak: the highest); each round also the requests'
// latencies as autocannon saw them. Each participant's database is vacuumed after its load.
// `--floor` (`npm run bench:accept-floor`) adds the accept floor (bench/accept-floor-server.ts:
// job creation with what the contract needs and nothing else of ours) as one more participant,
// on a database migrated by this tree with the same tenants, started with the V8 flags and
// settings of this tree's `npm run web` and AB_NODE_ARGS (AB_FLOOR_NODE_ARGS instead of the
// flags, when set: e.g. `--max-semi-space-size=16` for Node's default young generation).
// `--limit` adds the stack's accept limit (bench/accept-limit-server.ts: Express, pg and bare
// tables, nothing of the service's schema) in each of its modes (AB_LIMITS, default
// `contract,job`; also `queue`, `tables`): `limit-contract` writing the job, its delivery and its
// queue message, `limit-job` the job's row alone, `limit-queue` and `limit-tables` one part of the
// service's schema put back; each on a database prepared as the floor's, started as the floor is.
// With AB_STATEMENTS=1 the server loads pg_stat_statements (top-level statements; =all: those
// inside functions too) and each round prints the participant's AB_TOP (default 8) statements
// of the most time: calls per accepted job and statement time per job.
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { pino } from 'pino';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import {
  cpuSeconds, freePort, healthy, peakMb, prepareAcceptFloor, prepareTree, roleScriptOf, startAcceptFloor, startRole, stop, treeDatabase, type Fixture,
} from './ab.ts';
import { databaseCpuSeconds, postmasterPidOf } from './database-cpu.ts';
import { jobRequests } from './workload.ts';

const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ROUNDS = Number(process.env.AB_ROUNDS ?? 3);
const SECONDS = Number(process.env.AB_SECONDS ?? 8);
const logger = pino({ level: 'warn' }, pino.destination(2));

async function load(port: number, orgs: Fixture[]) {
  return autocannon({ url: `http://127.0.0.1:${port}`, connections: 50, duration: SECONDS, requests: jobRequests(orgs) });
}

const STATEMENTS = process.env.AB_STATEMENTS === '1' || process.env.AB_STATEMENTS === 'all';
const embedded = await startEmbeddedPostgres({
  dataDir: path.join(here, '.data', `ab-${process.pid}`), logger, ephemeral: true, durable: true,
  ...(STATEMENTS ? {
    settings: { shared_preload_libraries: 'pg_stat_statements', 'pg_stat_statements.track': process.env.AB_STATEMENTS === 'all' ? 'all' : 'top' },
  } : {}),
});
const admin = new pg.Client({ connectionString: embedded.url });
await admin.connect();
const args = process.argv.slice(2);
const floor = args.includes('--floor');
const limit = args.includes('--limit');
type Kind = 'service' | 'floor' | `limit-${string}`;
const trees: { name: string; dir: string; kind: Kind }[] = [
  { name: 'this', dir: here, kind: 'service' },
  ...args.filter((a) => !a.startsWith('--')).map((dir) => ({ name: path.basename(dir), dir: path.resolve(dir), kind: 'service' as const })),
  ...(floor ? [{ name: 'floor', dir: here, kind: 'floor' as const }] : []),
  ...(limit ? (process.env.AB_LIMITS ?? 'contract,job').split(',').map((mode) => ({ name: `limit-${mode}`, dir: here, kind: `limit-${mode}` as const })) : []),
];
type Setup = { name: string; dir: string; kind: Kind; url: string; db: pg.Client; orgs: Fixture[] };
const setups: Setup[] = [];
for (const [i, tree] of trees.entries()) {
  const { url, db } = await treeDatabase(admin, embedded.url, `ab_${i}`, false);
  // Endpoints at a closed port: no worker runs, nothing is delivered.
  const orgs = tree.kind !== 'service' ? await prepareAcceptFloor(tree.dir, url, logger) : await prepareTree(tree.dir, url, 'http://127.0.0.1:9/hook', logger);
  setups.push({ ...tree, url, db, orgs });
}
const postmasterPid = await postmasterPidOf(admin);
if (STATEMENTS) await admin.query('create extension if not exists pg_stat_statements');
const rows: Record<string, { express: number; jobs: number; share: number; cpu_us: number; db_cpu_us: number; peak_mb: number }[]> = Object.fromEntries(trees.map((tree) => [tree.name, []]));
/** The participant's web process (the service's `npm run web`, the accept floor or the stack's limit), ready for load. */
async function startWeb(s: Setup): Promise<{ web: ChildProcess; port: number }> {
  if (s.kind !== 'service') {
    // The web's V8 flags and settings (its memory budget: a smaller young generation collects more often).
    const script = roleScriptOf(s.dir, 'web', process.env.AB_FLOOR_NODE_ARGS ?? process.env.AB_NODE_ARGS);
    const env = s.kind === 'floor' ? script.env : { ...script.env, LIMIT_ROWS: s.kind.slice('limit-'.length) };
    const { child: web, port } = await startAcceptFloor(s.dir, s.url, script.nodeArgs, 'inherit', env, s.kind === 'floor' ? 'bench/accept-floor-server.ts' : 'bench/accept-limit-server.ts');
    return { web, port };
  }
  const port = await freePort();
  const web = await startRole(s.dir, 'web', { DATABASE_URL: s.url, PORT: String(port) }, process.env.AB_NODE_ARGS);
  await healthy(port);
  return { web, port };
}
const answered: Record<string, number> = {};
try {
  for (let round = 0; round < ROUNDS; round += 1) {
    const bare = fork(path.join(here, 'bench/bare-express.ts'), { stdio: 'inherit' });
    const { port: barePort } = await new Promise<{ port: number }>((resolve) => bare.once('message', (m) => resolve(m as { port: number })));
    const express = (await load(barePort, setups[0]!.orgs))['2xx'] / SECONDS;
    await stop(bare);
    for (const s of [...setups.slice(round % setups.length), ...setups.slice(0, round % setups.length)]) {
      const { web, port } = await startWeb(s);
      if (STATEMENTS) await admin.query('select pg_stat_statements_reset()');
      const before = await cpuSeconds(web.pid ?? 0);
      const dbBefore = await databaseCpuSeconds(postmasterPid) ?? 0;
      const run = await load(port, s.orgs);
      const used = await cpuSeconds(web.pid ?? 0) - before;
      const peak = await peakMb(web.pid ?? 0);
      const dbUsed = (await databaseCpuSeconds(postmasterPid) ?? 0) - dbBefore;
      await stop(web);
      // Vacuumed after its load, so that autovacuum of what it wrote does not run during the next
      // participant's (without this, whoever loaded first in a round had the higher rate in 4 of
      // 4 rounds of one run and 4 of 6 of another, of two webs that measured alike).
      await s.db.query('vacuum analyze');
      const jobs = run['2xx'] / SECONDS;
      answered[s.name] = (answered[s.name] ?? 0) + run['2xx'];
      rows[s.name]!.push({ express: Math.round(express), jobs: Math.round(jobs), share: +(jobs / express).toFixed(3), cpu_us: Math.round(used * 1e6 / Math.max(1, run['2xx'])), db_cpu_us: Math.round(dbUsed * 1e6 / Math.max(1, run['2xx'])), peak_mb: peak });
      // How long a request lived (autocannon's latencies, ms): what a request holds outlives a
      // scavenge only if it lives longer than the time between two.
      const lived = `p50 ${run.latency.p50} p90 ${run.latency.p90} p99 ${run.latency.p99} max ${run.latency.max} ms`;
      process.stderr.write(`round ${round + 1} ${s.name}: ${JSON.stringify(rows[s.name]!.at(-1))} non-2xx ${run.non2xx}; latency ${lived}\n`);
      if (STATEMENTS) {
        const top = await admin.query(`
          select round(calls::numeric / $1, 3) as calls_per_job, round((total_exec_time * 1000 / $1)::numeric, 1) as us_per_job,
                 left(regexp_replace(query, '\\s+', ' ', 'g'), 100) as query
          from pg_stat_statements where dbid = (select oid from pg_database where datname = $2)
          order by total_exec_time desc limit ${Number(process.env.AB_TOP ?? 8)}`, [Math.max(1, run['2xx']), new URL(s.url).pathname.slice(1)]);
        console.table(top.rows);
      }
    }
  }
  // What each participant wrote, against the creations it answered 201: a participant that
  // answered without writing would show here. (The stack's limit makes its tables anew each time
  // it starts: what it wrote in its last round.)
  for (const s of setups) {
    const { rows: [written] } = s.kind.startsWith('limit') ? await s.db.query(`select
      ((select count(*) from limit_jobs) + (select count(*) from webhook_jobs))::int as jobs,
      ((select count(*) from limit_deliveries) + (select count(*) from deliveries))::int as deliveries,
      ((select count(*) from limit_messages) + (select count(*) from pgboss.job where name = 'deliveries'))::int as messages`) : await s.db.query(`select (select count(*) from webhook_jobs)::int as jobs, (select count(*) from deliveries)::int as deliveries,
      (select count(*) from pgboss.job where name = 'deliveries')::int as messages`);
    process.stderr.write(`${s.name}: answered 201 ${answered[s.name]}, wrote ${JSON.stringify(written)}\n`);
  }
} finally {
  for (const s of setups) await s.db.end();
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
