// `node bench/accept-ab.ts <other worktree>...`: the accept phase alone, this tree against
// others (e.g. checkouts of the commits before a change), interleaved in one run on one database
// server so the machine's load falls on all alike: AB_ROUNDS rounds of the bare Express ceiling,
// then each tree's web process (in a rotating order) loaded for AB_SECONDS, each tree on a
// database migrated by its own code. Each web process runs with the Node flags of its tree's
// `npm run web`, and AB_NODE_ARGS (e.g. `--cpu-prof`).
// Prints jobs/s, the share of the bare Express POST, web and database CPU per job and the web's
// peak RSS, each round and the medians (the peak: the highest).
import { fork } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { pino } from 'pino';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { cpuSeconds, createDatabase, freePort, healthy, peakMb, prepareTree, startRole, stop, type Fixture } from './ab.ts';
import { databaseCpuSeconds, postmasterPidOf } from './database-cpu.ts';
import { jobRequests } from './workload.ts';

const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ROUNDS = Number(process.env.AB_ROUNDS ?? 3);
const SECONDS = Number(process.env.AB_SECONDS ?? 8);
const logger = pino({ level: 'warn' }, pino.destination(2));

async function load(port: number, orgs: Fixture[]) {
  return autocannon({ url: `http://127.0.0.1:${port}`, connections: 50, duration: SECONDS, requests: jobRequests(orgs) });
}

const embedded = await startEmbeddedPostgres({ dataDir: path.join(here, '.data', `ab-${process.pid}`), logger, ephemeral: true, durable: true });
const admin = new pg.Client({ connectionString: embedded.url });
await admin.connect();
const trees = [{ name: 'this', dir: here }, ...process.argv.slice(2).map((dir) => ({ name: path.basename(dir), dir: path.resolve(dir) }))];
const setups = [];
for (const [i, tree] of trees.entries()) {
  const url = await createDatabase(admin, embedded.url, `ab_${i}`);
  // Endpoints at a closed port: no worker runs, nothing is delivered.
  setups.push({ ...tree, url, orgs: await prepareTree(tree.dir, url, 'http://127.0.0.1:9/hook', logger) });
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
      const web = await startRole(s.dir, 'web', { DATABASE_URL: s.url, PORT: String(port) }, process.env.AB_NODE_ARGS);
      await healthy(port);
      const before = await cpuSeconds(web.pid ?? 0);
      const dbBefore = await databaseCpuSeconds(postmasterPid) ?? 0;
      const run = await load(port, s.orgs);
      const used = await cpuSeconds(web.pid ?? 0) - before;
      const peak = await peakMb(web.pid ?? 0);
      const dbUsed = (await databaseCpuSeconds(postmasterPid) ?? 0) - dbBefore;
      await stop(web);
      const jobs = run['2xx'] / SECONDS;
      rows[s.name]!.push({ express: Math.round(express), jobs: Math.round(jobs), share: +(jobs / express).toFixed(3), cpu_us: Math.round(used * 1e6 / Math.max(1, run['2xx'])), db_cpu_us: Math.round(dbUsed * 1e6 / Math.max(1, run['2xx'])), peak_mb: peak });
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
