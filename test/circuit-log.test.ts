// An endpoint whose circuit opens, or closes again after a probe, is one log line of the worker
// (issue 12 point 11): warn when disabled, info when enabled, each naming the endpoint, its
// application and its organization. Read from the worker's real pino output.
import test from 'ava';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { startTestApp } from './helpers/app.ts';

type Line = { level: number; msg: string; endpoint_id?: string; application_id?: string; org_id?: string };
const lines: Line[] = [];
const logger = pino({ level: 'info' }, { write: (line: string) => { lines.push(JSON.parse(line) as Line); } });

// Two failures open the circuit; the first probe comes a second later.
const app = startTestApp(
  { ALLOW_PRIVATE_DESTINATIONS: 'true', RETRY_SCHEDULE: '1,1,1,1,1,1', CIRCUIT_BREAKER_THRESHOLD: '2', CIRCUIT_BREAKER_COOLDOWN: '1' },
  { worker: true, logger },
);

const servers: http.Server[] = [];
test.after.always(async () => {
  for (const server of servers) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

async function until<T>(what: string, check: () => Promise<T | undefined> | T | undefined): Promise<T> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

test('the circuit opening logs one warn line and a successful probe one info line, with endpoint, application and organization', async (t) => {
  let healthy = false;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.statusCode = healthy ? 200 : 500;
      res.end();
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;

  const { key, orgId } = await app.createOrg();
  const application = await app.request('POST', '/v1/applications', { key, body: { name: 'flaky' } });
  await app.request('POST', '/v1/event-types', { key, body: { name: 'flaky.event' } });
  const endpoint = await app.request('POST', '/v1/endpoints', {
    key, body: { application_id: application.body.id, url, event_types: ['flaky.event'] },
  });
  t.is(endpoint.status, 201);
  const ids = { endpoint_id: endpoint.body.id as string, application_id: application.body.id as string, org_id: orgId };
  const about = () => lines.filter((l) => l.endpoint_id === ids.endpoint_id);
  const job = () => app.request('POST', '/v1/webhook-jobs', {
    key, body: { application_id: application.body.id, event_type: 'flaky.event', payload: {} },
  });

  await job();
  await until('the endpoint to be disabled', async () => {
    const res = await app.request('GET', `/v1/endpoints/${ids.endpoint_id}`, { key });
    return res.body.status === 'disabled' ? true : undefined;
  });
  const disabled = await until('the disabled line', () => (about().length > 0 ? about() : undefined));
  t.is(disabled.length, 1, JSON.stringify(disabled));
  t.like(disabled[0], { level: 40, ...ids });
  t.regex(disabled[0]!.msg, /disabled/);

  healthy = true;
  await until('the endpoint to be active again', async () => {
    const res = await app.request('GET', `/v1/endpoints/${ids.endpoint_id}`, { key });
    return res.body.status === 'active' ? true : undefined;
  });
  const both = await until('the enabled line', () => (about().length > 1 ? about() : undefined));
  t.like(both[1], { level: 30, ...ids });
  t.regex(both[1]!.msg, /enabled/);
  // Nothing more: later successes and failed attempts of an open circuit are no transitions.
  const last = await job();
  await until('the last job to succeed', async () => {
    const res = await app.request('GET', `/v1/webhook-jobs/${last.body.id}`, { key });
    return res.body.status === 'succeeded' ? true : undefined;
  });
  t.is(about().length, 2, JSON.stringify(about()));
});
