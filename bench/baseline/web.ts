// The baseline's web process: Express + pg, accepting a job as the packages' docs show it.
// Authenticate the API key by its hash, then in one transaction: check the application,
// insert the job, find the subscribed endpoints, one pg-boss `send` per endpoint (through the
// transaction's client, so the messages commit with the job), commit, 201.
import { createHash, randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import express from 'express';
import pg from 'pg';
import { PgBoss } from 'pg-boss';

const url = process.env.DATABASE_URL ?? '';
const pool = new pg.Pool({ connectionString: url, max: Number(process.env.DATABASE_POOL_SIZE ?? 10) });
const boss = new PgBoss(url);
boss.on('error', (error) => console.error(error));
await boss.start();
await boss.createQueue('deliveries');

const app = express();
// Requests still running: autocannon ends a phase by destroying its sockets, so the server can
// close while handlers still wait on the database; the pools end only after the last of them.
let running = 0;
app.use(express.json({ limit: '1mb' }));

app.post('/v1/webhook-jobs', async (req, res) => {
  running += 1;
  try {
    await accept(req, res);
  } finally {
    running -= 1;
  }
});

async function accept(req: express.Request, res: express.Response): Promise<void> {
  const key = /^Bearer (\S+)$/.exec(req.get('authorization') ?? '')?.[1];
  const keyHash = key ? createHash('sha256').update(key).digest('hex') : null;
  const caller = keyHash ? await pool.query('select org_id from api_keys where key_hash = $1', [keyHash]) : null;
  const orgId = caller?.rows[0]?.org_id as string | undefined;
  if (!orgId) return void res.status(401).json({ error: { code: 'unauthorized', message: 'Invalid API key.' } });
  const { application_id: applicationId, event_type: eventType, payload } = (req.body ?? {}) as Record<string, unknown>;
  if (typeof applicationId !== 'string' || typeof eventType !== 'string' || typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
    return void res.status(400).json({ error: { code: 'validation_error', message: 'application_id, event_type and payload are required.' } });
  }
  const client = await pool.connect();
  try {
    await client.query('begin');
    const owned = await client.query('select 1 from applications where id = $1 and org_id = $2', [applicationId, orgId]);
    if (owned.rowCount === 0) {
      await client.query('rollback');
      return void res.status(404).json({ error: { code: 'not_found', message: 'Application not found.' } });
    }
    const id = `job_${randomUUID()}`;
    await client.query('insert into jobs (id, application_id, event_type, payload) values ($1, $2, $3, $4)',
      [id, applicationId, eventType, payload]);
    const endpoints = await client.query('select id from endpoints where application_id = $1 and $2 = any(event_types)',
      [applicationId, eventType]);
    const db = { executeSql: (text: string, values?: unknown[]) => client.query(text, values) };
    for (const endpoint of endpoints.rows) await boss.send('deliveries', { jobId: id, endpointId: endpoint.id }, { db });
    await client.query('commit');
    res.status(201).json({ id, application_id: applicationId, event_type: eventType, status: 'created' });
  } catch (error) {
    await client.query('rollback');
    throw error;
  } finally {
    client.release();
  }
}

const server = app.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => process.send?.({ port: (server.address() as AddressInfo).port }));
process.on('SIGTERM', () => server.close(async () => {
  while (running > 0) await new Promise((resolve) => setTimeout(resolve, 10));
  await Promise.all([boss.stop(), pool.end()]);
  process.exit(0);
}));
