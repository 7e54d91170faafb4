// `npm run bench:cold-start`: what the first requests after a pause cost when the pool has closed
// its connections. Two web processes of this tree on one database: one whose pool closes an idle
// connection after 1 s (as the pool's 10 s did after every longer pause), one with the default
// DATABASE_IDLE_TIMEOUT_MS. Interleaved ROUNDS (default 8): after 2.5 s idle, one job, its
// answer time; after 2.5 s more, BURST (default 20) jobs at once, the time until all are answered.
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import pg from 'pg';
import { pino } from 'pino';
import { Pool } from 'undici';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { createDatabase, freePort, healthy, prepareTree, sleep, startRole, stop, type Fixture } from './ab.ts';
import { jobPost, percentile, startReceiver } from './workload.ts';
const here = process.cwd();
const logger = pino({ level: 'warn' }, pino.destination(2));
const embedded = await startEmbeddedPostgres({ dataDir: path.join(here, '.data', `cold-start-${process.pid}`), logger, ephemeral: true, durable: true });
const admin = new pg.Client({ connectionString: embedded.url });
await admin.connect();
const { receiver, port: rport } = await startReceiver(['ignore', 'inherit', 'inherit', 'ipc']);
const url = await createDatabase(admin, embedded.url, 'cold');
const orgs = await prepareTree(here, url, `http://127.0.0.1:${rport}/hook`, logger);
const webs: Array<{ name: string; port: number; web: ChildProcess; single: number[]; burst: number[] }> = [];
for (const [name, idle] of [['closed after 1 s idle', '1000'], ['the default', '']] as const) {
  const port = await freePort();
  const web = await startRole(here, 'web', { DATABASE_URL: url, PORT: String(port), ...(idle ? { DATABASE_IDLE_TIMEOUT_MS: idle } : {}) });
  await healthy(port);
  webs.push({ name, port, web, single: [], burst: [] });
}
const BURST = Number(process.env.BURST ?? 20);
async function post(port: number, i: number): Promise<number> {
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 50 });
  const t = performance.now();
  const res = await pool.request({ method: 'POST', path: '/v1/webhook-jobs', ...jobPost(orgs[i % orgs.length] as Fixture) });
  await res.body.dump();
  const ms = performance.now() - t;
  if (res.statusCode !== 201) throw new Error(String(res.statusCode));
  await pool.close();
  return ms;
}
try {
  // Each web's pool opened and used by a burst first.
  for (const w of webs) await Promise.all(Array.from({ length: BURST }, (_, i) => post(w.port, i)));
  for (let round = 0; round < Number(process.env.ROUNDS ?? 8); round++) {
    for (const w of (round % 2 ? [...webs].reverse() : webs)) {
      await sleep(2500);
      w.single.push(await post(w.port, round));
      await sleep(2500);
      const t = performance.now();
      await Promise.all(Array.from({ length: BURST }, (_, i) => post(w.port, i)));
      w.burst.push(performance.now() - t);
    }
  }
  for (const w of webs) {
    const s = [...w.single].sort((a, b) => a - b), b = [...w.burst].sort((a, b) => a - b);
    console.log(w.name, 'one job after 2.5 s idle, ms:', s.map((x) => x.toFixed(1)).join(' '), '| median', percentile(s, 50).toFixed(1),
      `| ${BURST} at once, all answered, ms:`, b.map((x) => x.toFixed(1)).join(' '), '| median', percentile(b, 50).toFixed(1));
  }
} finally {
  for (const w of webs) await stop(w.web);
  receiver.kill();
  await admin.end();
  await embedded.stop();
}
process.exit(0);
