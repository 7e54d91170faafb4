// 410 Gone (decisions 13/14): the endpoint is disabled at once with disabled_reason "gone",
// the answer counts as a failed attempt, no automatic probe ever (however long past the
// cooldown), a 410 answering a breaker probe turns the reason into gone, and only
// reset-circuit re-enables it (then its held deliveries go out).
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { startTestApp } from '../helpers/app.ts';
import * as fixtures from '../helpers/fixtures.ts';
import { startReceiver, type Receiver } from '../helpers/receiver.ts';
import { until } from '../helpers/until.ts';

// Threshold 3 and a 1 s cooldown: a breaker-disabled endpoint would be probed after 1 s.
// The tests run one at a time: each calls run_delivery_upkeep() itself (to be sure an upkeep
// ran past the cooldown), and that call picks the probes of every endpoint due for one
// without enqueueing them, so run beside the other test it took that test's probe (its
// delivery pending, no queue message: the probe never came).
const app = startTestApp(
  { ALLOW_PRIVATE_DESTINATIONS: 'true', RETRY_SCHEDULE: '1,1,1,1,1,1', CIRCUIT_BREAKER_THRESHOLD: '3', CIRCUIT_BREAKER_COOLDOWN: '1' },
  { worker: true },
);

type Ctx = { key: string; appId: string };

const setup = (t: ExecutionContext): Promise<Ctx> => fixtures.createOrgWithApplication(app, t, ['order.created']);

const endpoint = async (ctx: Ctx, r: Receiver) =>
  (await fixtures.createEndpoint({ on: app, key: ctx.key }, { application_id: ctx.appId, url: r.url, event_types: ['order.created'] })).id as string;
const job = async (ctx: Ctx) =>
  (await fixtures.createJob({ on: app, key: ctx.key }, { application_id: ctx.appId, event_type: 'order.created', payload: { n: 1 } })).id as string;
const get = async (ctx: Ctx, id: string) => (await app.request('GET', `/v1/endpoints/${id}`, { key: ctx.key })).body;

const circuitRow = z.object({ next_probe_at: z.string().nullable(), cooldown_seconds: z.number().nullable(), probes: z.number() });
const circuit = (id: string) => app.pool.one(sql.type(circuitRow)`
  select next_probe_at, cooldown_seconds,
         (select count(*)::int from deliveries d where d.endpoint_id = e.id and d.is_probe) as probes
  from endpoints e where id = ${id}`);
const heldOf = (jobId: string) => app.pool.oneFirst(sql.type(z.object({ status: z.string() }))`
  select status from deliveries where job_id = ${jobId}`);

test.serial('a 410 disables at once (reason gone, failure_count + 1), no probe after the cooldown, reset-circuit re-enables', async (t) => {
  const ctx = await setup(t);
  let gone = true;
  const r = await startReceiver(() => (gone ? { status: 410, body: 'gone' } : { status: 200, body: 'ok' }));
  const id = await endpoint(ctx, r);

  const first = await job(ctx);
  const disabled = await until('the endpoint to be disabled', async () => {
    const e = await get(ctx, id);
    return e.status === 'disabled' ? e : undefined;
  });
  t.is(disabled.disabled_reason, 'gone');
  t.is(disabled.failure_count, 1, 'one 410 is one failed attempt, far below the threshold of 3');
  t.truthy(disabled.disabled_at);
  t.is(r.arrivals.length, 1);
  const list = await app.request('GET', `/v1/endpoints?application_id=${ctx.appId}`, { key: ctx.key });
  t.false('disabled_reason' in list.body.data[0], 'list items keep their seven fields');
  const attempt = (await app.request('GET', `/v1/webhook-jobs/${first}`, { key: ctx.key })).body.deliveries[0];
  t.like(attempt, { status_code: 410, success: false, error: 'http_status' });

  // Later deliveries are held; well past the 1 s cooldown nothing is probed.
  const second = await job(ctx);
  await until('the new delivery to be held', async () => (await heldOf(second)) === 'held');
  const heldSince = Date.now();
  await until('3 s past the cooldown', () => Date.now() - heldSince > 3_000, 10_000, 100);
  await app.pool.query(sql.unsafe`select * from run_delivery_upkeep()`);
  t.is(r.arrivals.length, 1, 'no probe reached the receiver');
  t.like(await circuit(id), { next_probe_at: null, cooldown_seconds: null, probes: 0 });
  t.is(await heldOf(second), 'held');
  t.like(await get(ctx, id), { status: 'disabled', disabled_reason: 'gone' });

  // PATCH cannot re-enable it; reset-circuit does, and the held delivery goes out.
  const patched = await app.request('PATCH', `/v1/endpoints/${id}`, { key: ctx.key, body: { status: 'active' } });
  t.is(patched.status, 409);
  t.is(patched.body.error.message, 'This endpoint is disabled: its receiver answered 410 Gone; re-enable it with POST /v1/endpoints/{id}/reset-circuit.');
  gone = false;
  const reset = await app.request('POST', `/v1/endpoints/${id}/reset-circuit`, { key: ctx.key });
  t.is(reset.status, 200);
  t.like(await get(ctx, id), { status: 'active', disabled_reason: null, disabled_at: null, failure_count: 0 });
  await until('the held delivery to arrive', () => r.forJob(second).length === 1);
});

test.serial('a 410 answering a circuit-breaker probe turns the reason into gone, and no further probe follows', async (t) => {
  const ctx = await setup(t);
  // Three 500s open the breaker (threshold 3; one delivery, so arrivals are its attempts in
  // order), and the fourth arrival is the probe: it is held open until the test has seen the
  // endpoint disabled by the breaker, then answered 410. Answering by arrival, not by a flag
  // flipped when the test looks, keeps a busy machine (a probe before the test looked, a
  // retry budget spent on failed probes) out of it.
  let seenOpen!: () => void;
  const opened = new Promise<void>((resolve) => { seenOpen = resolve; });
  const r = await startReceiver(async (_arrival, index) => {
    if (index < 3) return { status: 500, body: 'no' };
    await opened;
    return { status: 410, body: 'gone' };
  });
  const id = (await fixtures.createEndpoint({ on: app, key: ctx.key }, {
    application_id: ctx.appId, url: r.url, event_types: ['order.created'], timeout_ms: 120_000,
  })).id as string;
  await job(ctx);
  const open = await until('the breaker to open', async () => {
    const e = await get(ctx, id);
    return e.status === 'disabled' ? e : undefined;
  });
  t.is(open.disabled_reason, 'circuit_breaker');
  t.is(open.failure_count, 3);
  seenOpen();
  const probed = await until('the probe answered 410 to be recorded', async () => {
    const e = await get(ctx, id);
    return e.disabled_reason === 'gone' ? e : undefined;
  });
  t.is(probed.status, 'disabled');
  t.is(probed.failure_count, 4);
  t.is(probed.disabled_at, open.disabled_at, 'still the time it was first disabled');
  t.is(r.arrivals.length, 4);
  const goneSince = Date.now();
  await until('3 s past the cooldown', () => Date.now() - goneSince > 3_000, 10_000, 100);
  await app.pool.query(sql.unsafe`select * from run_delivery_upkeep()`);
  t.is(r.arrivals.length, 4, 'no further probe');
  t.like(await circuit(id), { next_probe_at: null });
});
