// The baseline's worker: a pg-boss `work` handler that POSTs each job to its endpoint with got,
// signed as Standard Webhooks says (HMAC-SHA256 of "<id>.<timestamp>.<body>" with the secret's
// base64-decoded key), and records the attempt. WORKER_CONCURRENCY deliveries in flight at most
// (localConcurrency pollers of batchSize jobs each), as the service's worker holds as many.
import { createHmac } from 'node:crypto';
import got from 'got';
import pg from 'pg';
import { PgBoss, type Job } from 'pg-boss';

const url = process.env.DATABASE_URL ?? '';
const inFlight = Number(process.env.WORKER_CONCURRENCY ?? 200);
const pool = new pg.Pool({ connectionString: url, max: Number(process.env.DATABASE_POOL_SIZE ?? 10) });
const boss = new PgBoss(url);
boss.on('error', (error) => console.error(error));
await boss.start();
await boss.createQueue('deliveries');

type Delivery = { jobId: string; endpointId: string };

async function deliver(job: Job<Delivery>): Promise<void> {
  const { jobId, endpointId } = job.data;
  const found = await pool.query('select j.payload, e.url, e.secret from jobs j, endpoints e where j.id = $1 and e.id = $2', [jobId, endpointId]);
  const row = found.rows[0] as { payload: unknown; url: string; secret: string };
  const body = JSON.stringify(row.payload);
  const timestamp = Math.floor(Date.now() / 1000);
  const key = Buffer.from(row.secret.replace(/^whsec_/, ''), 'base64');
  const signature = createHmac('sha256', key).update(`${jobId}.${timestamp}.${body}`).digest('base64');
  const response = await got.post(row.url, {
    body,
    headers: {
      'content-type': 'application/json', 'webhook-id': jobId, 'webhook-timestamp': String(timestamp), 'webhook-signature': `v1,${signature}`,
    },
    throwHttpErrors: false, followRedirect: false, retry: { limit: 0 }, timeout: { request: 30_000 },
  });
  const success = response.statusCode >= 200 && response.statusCode < 300;
  await pool.query('insert into attempts (job_id, endpoint_id, status_code, success) values ($1, $2, $3, $4)',
    [jobId, endpointId, response.statusCode, success]);
  if (!success) throw new Error(`${row.url} answered ${response.statusCode}`); // pg-boss retries the batch
}

const batchSize = 20;
await boss.work<Delivery>('deliveries', {
  batchSize, localConcurrency: Math.max(1, Math.floor(inFlight / batchSize)), pollingIntervalSeconds: 0.5, burstWhenBatchFull: true,
}, async (jobs) => {
  await Promise.all(jobs.map(deliver));
});
process.send?.({ ready: true });
// pg-boss first, waiting for the running handlers, then the pool they use (ending both at once
// failed the handlers still running, and pg-boss then marked them failed on a closed connection).
process.on('SIGTERM', () => void boss.stop({ graceful: true, timeout: 5000 }).then(() => pool.end()).then(() => process.exit(0)));
