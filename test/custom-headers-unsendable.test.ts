// Custom header names the HTTP client refuses in a request: `Keep-Alive`, `Upgrade` and `Expect`
// were accepted on endpoints and jobs, and then `Keep-Alive` or `Upgrade` left each delivery
// executing until its 48 h window ended (undici's InvalidArgumentError was taken for a bug of
// ours: no outcome recorded, an error logged and the delivery claimed again every half minute)
// and `Expect` failed every attempt as a connection_error, nothing sent, until the endpoint's
// circuit opened. Found by a probe against real receivers. They are now refused (400), and a set
// stored before is delivered without them.
import test from 'ava';
import { sql } from 'slonik';
import { assertError, startTestApp } from './helpers/app.ts';
import * as fixtures from './helpers/fixtures.ts';
import { startReceiver } from './helpers/receiver.ts';

const app = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true' }, { worker: true });
const UNSENDABLE = ['Keep-Alive', 'upgrade', 'EXPECT'];

test('an endpoint\'s or a job\'s header named Keep-Alive, Upgrade or Expect is a 400 naming it', async (t) => {
  const { key } = await app.createOrg();
  const by = { on: app, key, t };
  const application = await fixtures.createApplication(by);
  await fixtures.createEventType(by, 'order.created');
  for (const name of UNSENDABLE) {
    const endpoint = await app.request('POST', '/v1/endpoints', {
      key, body: { application_id: application.id, url: 'https://hooks.example.com/a', event_types: ['order.created'], headers: { [name]: 'x' } },
    });
    assertError(t, endpoint, 400, 'validation_error');
    t.deepEqual(endpoint.body.error.details, [{ path: `headers.${name}`, message: 'is reserved: a header of the connection, which a delivery cannot carry' }]);
    const job = await app.request('POST', '/v1/webhook-jobs', {
      key, body: { application_id: application.id, event_type: 'order.created', payload: { n: 1 }, headers: { [name]: 'x' } },
    });
    assertError(t, job, 400, 'validation_error');
    t.deepEqual(job.body.error.details?.map((d: { path: string }) => d.path), [`headers.${name}`]);
  }
  t.is((await app.request('GET', `/v1/endpoints?application_id=${application.id}`, { key })).body.data.length, 0);
});

test('sets stored before these names were refused are delivered without them, the other headers kept', async (t) => {
  const receiver = await startReceiver();
  const { key } = await app.createOrg();
  const by = { on: app, key, t };
  const application = await fixtures.createApplication(by);
  await fixtures.createEventType(by, 'order.created');
  // Paused, so that the job waits while both sets are written as an older version let them be.
  const endpoint = await fixtures.createEndpoint(by, {
    application_id: application.id, url: receiver.at('/hooks'), event_types: ['order.created'], headers: { 'X-Endpoint': 'e' },
  });
  t.is((await app.request('PATCH', `/v1/endpoints/${endpoint.id}`, { key, body: { status: 'paused' } })).status, 200);
  const job = await fixtures.createJob(by, { application_id: application.id, event_type: 'order.created', payload: { n: 1 }, headers: { 'X-Job': 'j' } });
  await app.pool.query(sql.unsafe`update endpoints set headers = '{"X-Endpoint": "e", "Keep-Alive": "timeout=5", "Expect": "100-continue"}' where id = ${endpoint.id}`);
  await app.pool.query(sql.unsafe`update webhook_jobs set headers = '{"X-Job": "j", "Upgrade": "websocket"}' where id = ${job.id}`);
  t.is((await app.request('PATCH', `/v1/endpoints/${endpoint.id}`, { key, body: { status: 'active' } })).status, 200);

  const done = await fixtures.finishedJob(by, job.id);
  t.is(done.status, 'succeeded', JSON.stringify(done.deliveries));
  const [arrival] = receiver.forJob(job.id);
  t.is(arrival?.headers['x-endpoint'], 'e');
  t.is(arrival?.headers['x-job'], 'j');
  for (const name of ['keep-alive', 'expect', 'upgrade']) t.is(arrival?.headers[name], undefined, name);
});
