// Every operational event type, observed at a real receiver and verified with the
// standardwebhooks package: created, updated, failing (once per streak), delivery.exhausted,
// disabled (circuit_breaker), enabled (probe success), deleted; and what each one carries.
import test from 'ava';
import { sql } from 'slonik';
import { startTestApp } from '../helpers/app.ts';
import { createApplication, createEndpoint, createEventType, createJob } from '../helpers/fixtures.ts';
import { startReceiver } from '../helpers/receiver.ts';
import { until } from '../helpers/until.ts';
import { createOpEndpoint, eventsOf, typesOf, type OpEvent } from './helpers.ts';

// 7 attempts per target without waiting; failing at 10 consecutive failures, disabled at 20.
const app = startTestApp({
  ALLOW_PRIVATE_DESTINATIONS: 'true', RETRY_SCHEDULE: '0,0,0,0,0,0', CIRCUIT_BREAKER_THRESHOLD: '20', CIRCUIT_BREAKER_COOLDOWN: '1',
}, { worker: true });

const ENDPOINT_FIELDS = [
  'application_id', 'created_at', 'disabled_at', 'event_types', 'failure_count', 'headers', 'id', 'rate_limit_rps',
  'secret_version', 'status', 'timeout_ms', 'updated_at',
];

test('every operational event type arrives signed, with the endpoint as GET shows it (no secret)', async (t) => {
  const { key } = await app.createOrg();
  const by = { on: app, key };
  const ops = await startReceiver();
  const op = await createOpEndpoint(app, key, { url: ops.at('/ops') });

  // The tenant's receiver fails until told otherwise; its failures drive the circuit events.
  let healthy = false;
  const tenant = await startReceiver(() => (healthy ? { status: 200 } : { status: 500, body: 'down' }));
  const appId = (await createApplication(by)).id as string;
  await createEventType(by, 'order.created');
  const endpoint = await createEndpoint(by, { application_id: appId, url: tenant.at('/hook'), event_types: ['order.created'] });
  // Events are not ordered across deliveries: each step waits for the previous one's event.
  await until('endpoint.created', () => typesOf(ops).length === 1);
  const patched = await app.request('PATCH', `/v1/endpoints/${endpoint.id}`, { key, body: { headers: { 'X-Team': 'ops' } } });
  t.is(patched.status, 200);

  await until('endpoint.created and endpoint.updated', () => typesOf(ops).length >= 2);
  const job1 = await createJob(by, { application_id: appId, event_type: 'order.created', payload: { n: 1 } });
  await until('the first job to be exhausted', () => typesOf(ops).includes('delivery.exhausted'));
  const job2 = await createJob(by, { application_id: appId, event_type: 'order.created', payload: { n: 2 } });
  await until('the second job to be exhausted', () => typesOf(ops).filter((x) => x === 'delivery.exhausted').length === 2);
  await createJob(by, { application_id: appId, event_type: 'order.created', payload: { n: 3 } });
  await until('endpoint.disabled', () => typesOf(ops).includes('endpoint.disabled'));
  // A held delivery for the probes; let one probe fail (it must not fire endpoint.failing
  // again), then recover.
  await createJob(by, { application_id: appId, event_type: 'order.created', payload: { n: 4 } });
  await until('a failed probe', () => tenant.arrivals.length >= 21);
  healthy = true;
  await until('endpoint.enabled', () => typesOf(ops).includes('endpoint.enabled'), 30_000);
  t.is((await app.request('DELETE', `/v1/endpoints/${endpoint.id}`, { key })).status, 200);
  await until('endpoint.deleted', () => typesOf(ops).includes('endpoint.deleted'));

  const events = eventsOf(t, ops, op.secret);
  const unique = new Map<string, OpEvent>();
  ops.arrivals.forEach((a, i) => unique.set(String(a.headers['webhook-id']), events[i]!));
  const all = [...unique.values()].sort((x, y) => x.timestamp.localeCompare(y.timestamp));
  // The failed probe may have been job 3's last attempt (a third delivery.exhausted) or job 4's first.
  t.deepEqual(all.map((e) => e.type).slice(0, 6), [
    'endpoint.created', 'endpoint.updated', 'delivery.exhausted', 'endpoint.failing', 'delivery.exhausted', 'endpoint.disabled',
  ]);
  t.deepEqual(all.map((e) => e.type).slice(6).filter((x) => x !== 'delivery.exhausted'), ['endpoint.enabled', 'endpoint.deleted']);
  const byType = (type: string) => all.filter((e) => e.type === type);

  for (const e of all.filter((x) => x.type.startsWith('endpoint.'))) {
    t.is(e.data.id, endpoint.id);
    t.false('secret' in e.data);
    t.deepEqual(Object.keys(e.data).filter((k) => k !== 'reason' && k !== 'disabled_reason' && k !== 'url').sort(), ENDPOINT_FIELDS);
  }
  t.deepEqual(byType('endpoint.created')[0]!.data.event_types, ['order.created']);
  t.deepEqual(byType('endpoint.updated')[0]!.data.headers, { 'X-Team': 'ops' });
  t.is(byType('endpoint.failing')[0]!.data.failure_count, 10);
  const disabled = byType('endpoint.disabled')[0]!;
  t.is(disabled.data.reason, 'circuit_breaker');
  t.is(disabled.data.status, 'disabled');
  t.is(byType('endpoint.enabled')[0]!.data.status, 'active');
  t.is(byType('endpoint.enabled')[0]!.data.failure_count, 0);
  t.deepEqual(byType('endpoint.deleted')[0]!.data.event_types, ['order.created'], 'deleted: the endpoint as it was');

  const [first, second] = byType('delivery.exhausted');
  t.deepEqual(first!.data.job_id, job1.id);
  t.deepEqual(second!.data.job_id, job2.id);
  t.deepEqual(Object.keys(first!.data).sort(), ['application_id', 'endpoint_id', 'event_type', 'job_id', 'last_attempt']);
  t.like(first!.data, { endpoint_id: endpoint.id, application_id: appId, event_type: 'order.created' });
  t.like(first!.data.last_attempt, { endpoint_id: endpoint.id, attempt: 7, status_code: 500, response_body: 'down', success: false, error: 'http_status' });
  // The last attempt is the job API's own delivery record.
  const detail = await app.request('GET', `/v1/webhook-jobs/${job1.id}`, { key });
  t.deepEqual(first!.data.last_attempt, detail.body.deliveries.at(-1));
});

test('the operational endpoint\'s event_types filter what it receives', async (t) => {
  const { key } = await app.createOrg();
  const by = { on: app, key };
  const all = await startReceiver();
  const onlyDeleted = await startReceiver();
  await createOpEndpoint(app, key, { url: all.at('/') });
  const filtered = await createOpEndpoint(app, key, { url: onlyDeleted.at('/'), event_types: ['endpoint.deleted'] });
  t.deepEqual(filtered.event_types, ['endpoint.deleted']);
  const appId = (await createApplication(by)).id as string;
  const endpoint = await createEndpoint(by, { application_id: appId });
  await app.request('DELETE', `/v1/endpoints/${endpoint.id}`, { key });
  await until('both events at the catch-all', () => typesOf(all).length === 2);
  await until('the deleted event at the filtered one', () => typesOf(onlyDeleted).length === 1);
  t.deepEqual(typesOf(all).sort(), ['endpoint.created', 'endpoint.deleted']);
  t.deepEqual(typesOf(onlyDeleted), ['endpoint.deleted']);
  eventsOf(t, onlyDeleted, filtered.secret);
});

// The restore API arrives with its own work; what it does to the row (deleted_at cleared, with
// deliveries_dropped_at, which upkeep sets within a second of the delete; the subscriptions put
// back, in one transaction) is done here in SQL, as a DBA could. (Without deliveries_dropped_at
// the update failed its check whenever upkeep had come first: a full run.)
test('endpoint.restored: one event, with the subscriptions the restore put back; reset-circuit is endpoint.enabled', async (t) => {
  const { key } = await app.createOrg();
  const by = { on: app, key };
  const ops = await startReceiver();
  const op = await createOpEndpoint(app, key, { url: ops.at('/') });
  const appId = (await createApplication(by)).id as string;
  const eventType = await createEventType(by, 'invoice.paid');
  const endpoint = await createEndpoint(by, { application_id: appId, event_types: ['invoice.paid'] });
  await until('endpoint.created', () => typesOf(ops).length === 1);
  await app.request('DELETE', `/v1/endpoints/${endpoint.id}`, { key });
  await until('endpoint.deleted', () => typesOf(ops).length === 2);
  await app.pool.transaction(async (tx) => {
    await tx.query(sql.unsafe`update endpoints set deleted_at = null, deliveries_dropped_at = null where id = ${endpoint.id}`);
    await tx.query(sql.unsafe`insert into endpoint_event_types (endpoint_id, event_type_id, org_id)
      select id, ${eventType.id}, org_id from endpoints where id = ${endpoint.id}`);
  });
  await until('endpoint.restored', () => typesOf(ops).includes('endpoint.restored'));
  await app.pool.query(sql.unsafe`update endpoints set status = 'disabled', disabled_reason = 'circuit_breaker', disabled_at = now() where id = ${endpoint.id}`);
  await until('endpoint.disabled', () => typesOf(ops).includes('endpoint.disabled'));
  t.is((await app.request('POST', `/v1/endpoints/${endpoint.id}/reset-circuit`, { key })).status, 200);
  await until('endpoint.enabled', () => typesOf(ops).includes('endpoint.enabled'));
  const events = eventsOf(t, ops, op.secret);
  t.deepEqual(typesOf(ops), ['endpoint.created', 'endpoint.deleted', 'endpoint.restored', 'endpoint.disabled', 'endpoint.enabled']);
  const restored = events.find((e) => e.type === 'endpoint.restored')!;
  t.like(restored.data, { id: endpoint.id, status: 'active', event_types: ['invoice.paid'] });
  t.is(events.find((e) => e.type === 'endpoint.disabled')!.data.reason, 'circuit_breaker');
});
