// Deliveries say what they are (issue 12 point 12): every attempt carries
// `webhook-event-type: <event type name>`, also the endpoint test action's `webhook.test`, while
// the body stays the job payload byte for byte and the signature still verifies.
import test from 'ava';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'slonik';
import { Webhook } from 'standardwebhooks';
import { z } from 'zod';
import { startTestApp } from './helpers/app.ts';
import { until } from './helpers/until.ts';

const app = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true' }, { worker: true });

type Arrival = { headers: http.IncomingHttpHeaders; body: Buffer };

const servers: http.Server[] = [];
test.after.always(async () => {
  for (const server of servers) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

async function receiver(): Promise<{ url: string; arrivals: Arrival[] }> {
  const arrivals: Arrival[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      arrivals.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.end('ok');
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`, arrivals };
}


test('each delivery carries webhook-event-type with its job\'s event type; the body is the payload byte for byte and verifies', async (t) => {
  const { key } = await app.createOrg();
  const application = await app.request('POST', '/v1/applications', { key, body: { name: 'typed' } });
  for (const name of ['invoice.paid', 'invoice.voided']) {
    t.is((await app.request('POST', '/v1/event-types', { key, body: { name } })).status, 201);
  }
  const r = await receiver();
  const endpoint = await app.request('POST', '/v1/endpoints', {
    key, body: { application_id: application.body.id, url: r.url, event_types: ['invoice.paid', 'invoice.voided'] },
  });
  t.is(endpoint.status, 201);
  const jobs = new Map<string, string>();
  for (const [type, payload] of [['invoice.paid', { id: 'in_1', amount: 4200, note: 'ünïcode ✓' }], ['invoice.voided', { id: 'in_2', nested: { a: [1, 2] } }]] as const) {
    const job = await app.request('POST', '/v1/webhook-jobs', {
      key, body: { application_id: application.body.id, event_type: type, payload },
    });
    t.is(job.status, 201);
    jobs.set(job.body.id, type);
  }
  await until('both deliveries', () => r.arrivals.length >= 2);

  const stored = await app.pool.any(sql.type(z.object({ id: z.string(), payload: z.string() }))`
    select id, payload::text as payload from webhook_jobs where id = any(${sql.array([...jobs.keys()], 'text')})`);
  const payloads = new Map(stored.map((row) => [row.id, row.payload]));
  t.is(r.arrivals.length, 2);
  for (const arrival of r.arrivals) {
    const jobId = String(arrival.headers['webhook-id']);
    t.is(arrival.headers['webhook-event-type'], jobs.get(jobId), `job ${jobId}`);
    t.true(arrival.body.equals(Buffer.from(payloads.get(jobId) ?? '', 'utf8')), 'the body is the stored payload, byte for byte');
    t.notThrows(() => new Webhook(endpoint.body.secret).verify(arrival.body, {
      'webhook-id': jobId,
      'webhook-timestamp': String(arrival.headers['webhook-timestamp']),
      'webhook-signature': String(arrival.headers['webhook-signature']),
    }));
  }
});

test('the endpoint test action delivers with webhook-event-type: webhook.test', async (t) => {
  const { key } = await app.createOrg();
  const application = await app.request('POST', '/v1/applications', { key, body: { name: 'tested' } });
  const r = await receiver();
  const endpoint = await app.request('POST', '/v1/endpoints', { key, body: { application_id: application.body.id, url: r.url } });
  t.is(endpoint.status, 201);
  const queued = await app.request('POST', `/v1/endpoints/${endpoint.body.id}/test`, { key });
  t.is(queued.status, 202);
  await until('the test delivery', () => r.arrivals.length >= 1);
  t.is(r.arrivals[0]!.headers['webhook-event-type'], 'webhook.test');
  t.is(r.arrivals[0]!.headers['webhook-id'], queued.body.job_id);
  t.is(typeof JSON.parse(r.arrivals[0]!.body.toString('utf8')), 'object');
});
