// A worker shares its slots among organizations (src/worker/organization-share.ts): one whose
// receivers are slow (an exchange has waited a second) may hold a share of them, and the claim
// defers its sends past that share and its fetch passes it over (claim_deliveries,
// fetch_due_messages in sql/006-claim.sql). One tenant's hanging endpoints held every slot of a
// worker, and the other tenants' deliveries waited behind them for as long as they hung.
import test, { type ExecutionContext } from 'ava';
import { pino } from 'pino';
import { sql } from 'slonik';
import { z } from 'zod';
import { DELIVERY_QUEUE } from '../src/queue.ts';
import { IN_FLIGHT_BYTES } from '../src/worker/delivery-loop.ts';
import { CROWDED_AFTER_MS, HELD_AFTER_MS, makeOrganizationShare, SLOW_FOR_MS } from '../src/worker/organization-share.ts';
import { startTestApp, type TestApp } from './helpers/app.ts';
import * as fixtures from './helpers/fixtures.ts';
import { scrape, valueOf } from './helpers/metrics.ts';
import { startReceiver } from './helpers/receiver.ts';
import { until } from './helpers/until.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A send claimed and started at `at`. */
function startedAt(share: ReturnType<typeof makeOrganizationShare>, orgId: string, at: number) {
  const held = share.claimed(orgId);
  held.started(at);
  return held;
}

test('an organization is held to a share only once one of its exchanges has waited a second', (t) => {
  const share = makeOrganizationShare(10);
  const ends = [0, 10, 20].map((at) => startedAt(share, 'org_a', at));
  startedAt(share, 'org_b', 1500);
  t.deepEqual(share.limits(HELD_AFTER_MS - 1), { share: 5, holding: {}, busy: [], excess: 0, excessBytes: 0 }, 'nothing has waited a second: nobody is held');
  t.deepEqual(share.limits(HELD_AFTER_MS), { share: 5, holding: { org_a: 3 }, busy: [], excess: 0, excessBytes: 0 }, 'every exchange of a slow organization counts');
  startedAt(share, 'org_a', 2000);
  share.claimed('org_a');
  t.deepEqual(share.limits(2000), { share: 5, holding: { org_a: 5 }, busy: ['org_a'], excess: 0, excessBytes: 0 }, 'young exchanges and claimed sends of a slow one count too');
  t.deepEqual(share.limits(1500 + HELD_AFTER_MS), { share: 3, holding: { org_a: 5, org_b: 1 }, busy: ['org_a'], excess: 2, excessBytes: 0 },
    'two slow organizations: a third each, a third left for the others');
  for (const held of ends) held.end(5000);
  t.deepEqual(share.limits(5000), { share: 3, holding: { org_a: 2, org_b: 1 }, busy: [], excess: 0, excessBytes: 0 }, 'ended exchanges hold nothing');
});

test('half the slots or more held by exchanges that each waited CROWDED_AFTER_MS make an organization slow, and it stays slow', (t) => {
  // A probe: receivers answering in 750-950 ms at the tenant's full job rate held every slot with
  // attempts none of which waited a second, and every other tenant's deliveries waited 0.5-2.5 s.
  const share = makeOrganizationShare(10);
  const four = [0, 0, 0, 0].map(() => startedAt(share, 'org_a', 0));
  t.deepEqual(share.limits(900), { share: 5, holding: {}, busy: [], excess: 0, excessBytes: 0 }, 'four of ten slots, under a second each: not slow');
  const fifth = startedAt(share, 'org_a', 700);
  t.deepEqual(share.limits(949), { share: 5, holding: {}, busy: [], excess: 0, excessBytes: 0 }, 'the fifth has waited 249 ms');
  t.deepEqual(share.limits(950), { share: 5, holding: { org_a: 5 }, busy: ['org_a'], excess: 0, excessBytes: 0 }, 'five of ten have waited 250 ms: slow');
  for (const held of [...four, fifth]) held.end(990); // every exchange under a second
  t.deepEqual(share.limits(1_000), { share: 5, holding: { org_a: 0 }, busy: [], excess: 0, excessBytes: 0 }, 'still slow once they ended');
  t.deepEqual(share.limits(950 + SLOW_FOR_MS), { share: 5, holding: {}, busy: [], excess: 0, excessBytes: 0 }, 'ten quiet minutes later it is not');
  // Many quick exchanges never do: ten slots held by exchanges of 200 ms.
  const quick = makeOrganizationShare(10);
  const held = Array.from({ length: 10 }, (_, i) => startedAt(quick, 'org_b', i * 20));
  t.deepEqual(quick.limits(200), { share: 5, holding: {}, busy: [], excess: 0, excessBytes: 0 });
  for (const h of held) h.end(400);
});

test('the share is never less than one slot', (t) => {
  const share = makeOrganizationShare(1);
  startedAt(share, 'org_a', 0);
  t.deepEqual(share.limits(HELD_AFTER_MS), { share: 1, holding: { org_a: 1 }, busy: ['org_a'], excess: 0, excessBytes: 0 });
});

test('a claimed send never makes its organization slow, however long it waits to start', (t) => {
  const share = makeOrganizationShare(10);
  const waiting = share.claimed('org_a');
  t.deepEqual(share.limits(60_000), { share: 5, holding: {}, busy: [], excess: 0, excessBytes: 0 });
  waiting.started(60_000);
  t.deepEqual(share.limits(60_000 + HELD_AFTER_MS), { share: 5, holding: { org_a: 1 }, busy: [], excess: 0, excessBytes: 0 });
  waiting.end(60_000 + HELD_AFTER_MS - 1); // it answered in time after all
  t.deepEqual(share.limits(120_000), { share: 5, holding: {}, busy: [], excess: 0, excessBytes: 0 }, 'a fast exchange leaves nothing behind');
});

test('an organization stays slow for a while after its slow exchanges ended together', (t) => {
  // Hanging attempts start together and time out together: at the next claim the organization
  // has nothing running, and must still be held to its share.
  const share = makeOrganizationShare(10);
  const wave = [0, 1, 2, 3, 4, 5].map(() => startedAt(share, 'org_a', 0));
  for (const held of wave) held.end(60_000);
  t.deepEqual(share.limits(60_001), { share: 5, holding: { org_a: 0 }, busy: [], excess: 0, excessBytes: 0 }, 'slow, with room for five');
  for (let i = 0; i < 5; i += 1) share.claimed('org_a');
  t.deepEqual(share.limits(60_002), { share: 5, holding: { org_a: 5 }, busy: ['org_a'], excess: 0, excessBytes: 0 });
  t.deepEqual(share.limits(60_000 + SLOW_FOR_MS), { share: 5, holding: {}, busy: [], excess: 0, excessBytes: 0 }, 'ten quiet minutes later it is not');
});

test('what a slow organization took before it was found slow, past its share, is counted as lent', (t) => {
  // A first wave of hanging attempts is claimed at once, before any has waited: it can take every
  // slot. Once found slow (here: every slot held by exchanges that waited CROWDED_AFTER_MS), its
  // sends past the share are lent to the others.
  const share = makeOrganizationShare(10);
  const wave = Array.from({ length: 10 }, () => startedAt(share, 'org_a', 0));
  t.deepEqual(share.limits(CROWDED_AFTER_MS - 1), { share: 5, holding: {}, busy: [], excess: 0, excessBytes: 0 }, 'not slow yet: nothing lent');
  t.deepEqual(share.limits(CROWDED_AFTER_MS), { share: 5, holding: { org_a: 10 }, busy: ['org_a'], excess: 5, excessBytes: 0 });
  for (const held of wave.slice(0, 7)) held.end(30_000);
  t.deepEqual(share.limits(30_000), { share: 5, holding: { org_a: 3 }, busy: [], excess: 0, excessBytes: 0 }, 'the loan ends as those sends end');
});

// No worker: nothing is claimed unless a test claims it.
const app = startTestApp();

const claimed = z.object({ delivery_id: z.number(), action: z.string(), org_id: z.string().nullable() });

/** An organization with one endpoint (at most `rps` starts a second) and `count` jobs for it; returns its deliveries. */
async function tenant(t: ExecutionContext, on: TestApp, count: number, rps = 1000) {
  const { key, orgId } = await on.createOrg();
  const by = { t, on, key };
  const application = await fixtures.createApplication(by, { name: 'Shared' });
  await fixtures.createEventType(by, 'invoice.paid');
  const endpoint = await fixtures.createEndpoint(by, { application_id: application.id, url: 'https://hooks.example.com/in', event_types: ['invoice.paid'], rate_limit_rps: rps });
  const jobIds: string[] = [];
  for (let i = 0; i < count; i += 1) jobIds.push((await fixtures.createJob(by, { application_id: application.id, event_type: 'invoice.paid', payload: { n: i } })).id);
  const deliveries = await on.pool.any(sql.type(z.object({ id: z.number(), round: z.number() }))`
    select d.id, d.round from deliveries d where d.job_id = any(${sql.array(jobIds, 'text')}) order by d.id`);
  return { orgId, endpointId: endpoint.id as string, deliveries };
}

test.serial('a claim sends a slow organization\'s deliveries up to its room and defers the rest to now, before they take a slot', async (t) => {
  const slow = await tenant(t, app, 4, 1);
  const other = await tenant(t, app, 3, 1);
  const items = [...slow.deliveries, ...other.deliveries].map((d) => ({ delivery_id: d.id, round: d.round }));
  const rows = await app.pool.transaction((tx) => tx.any(sql.type(claimed.extend({ start_at: z.string() }))`
    select delivery_id, action, org_id, start_at::text
    from claim_deliveries(${sql.jsonb(items)}, 60000, 100, 1000000000, 3, ${sql.jsonb({ [slow.orgId]: 1 })})`));
  t.deepEqual(rows.filter((r) => r.org_id === slow.orgId).map((r) => r.action), ['send', 'send', 'defer', 'defer'], 'share 3, holding 1: room for 2');
  t.deepEqual(rows.filter((r) => r.org_id === other.orgId).map((r) => r.action), ['send', 'send', 'send'], 'an organization not held to a share is not bounded');
  // At 1 start a second, two sends take two slots: the endpoint's next one lies two spacings
  // (2 × 1.1 s) after the first send's. Four sends would have put it four spacings ahead.
  const firstSlot = rows.find((r) => r.org_id === slow.orgId)?.start_at ?? '';
  const ahead = await app.pool.oneFirst(sql.type(z.object({ ms: z.number() }))`
    select round(extract(epoch from next_slot_at - ${firstSlot}::timestamptz) * 1000)::int as ms
    from endpoint_send_slots where endpoint_id = ${slow.endpointId}`);
  t.is(ahead, 2 * 1100);
  const states = await app.pool.any(sql.type(z.object({ status: z.string(), attempt_count: z.number() }))`
    select status, attempt_count from deliveries where id = any(${sql.array(slow.deliveries.map((d) => d.id), 'int8')}) order by id`);
  t.deepEqual(states.map((s) => s.status), ['in_flight', 'in_flight', 'pending', 'pending']);
  t.true(states.every((s) => s.attempt_count === 0), 'a deferral spends no attempt');
});

test.serial('the fetch passes over an organization with no room left; its messages stay due', async (t) => {
  const slow = await tenant(t, app, 3);
  const other = await tenant(t, app, 2);
  const rows = await app.pool.any(sql.type(claimed)`
    select message_delivery_id as delivery_id, coalesce(action, 'skip') as action, org_id
    from claim_next_deliveries(${DELIVERY_QUEUE}, 1000, 1000, 100, 1000000000, 2, ${sql.jsonb({ [slow.orgId]: 2 })})`);
  const fetched = new Set(rows.map((r) => r.delivery_id));
  t.true(other.deliveries.every((d) => fetched.has(d.id)), 'the other organization\'s deliveries are fetched');
  t.false(slow.deliveries.some((d) => fetched.has(d.id)), 'none of the organization at its share');
  const due = await app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from pgboss.job where name = ${DELIVERY_QUEUE} and state = 'created'
      and (data->>'deliveryId')::bigint = any(${sql.array(slow.deliveries.map((d) => d.id), 'int8')})`);
  t.is(due, 3, 'its messages are untouched, still due');
});

test.serial('a fetch parks the busy organization\'s messages it read past, so later fetches need not; they come back once it is not busy', async (t) => {
  const slow = await tenant(t, app, 3);
  const other = await tenant(t, app, 2);
  const ids = (deliveries: readonly { id: number }[]) => sql.array(deliveries.map((d) => d.id), 'int8');
  const priorities = () => app.pool.any(sql.type(z.object({ priority: z.number(), state: z.string() }))`
    select priority, state::text from pgboss.job where name = ${DELIVERY_QUEUE} and (data->>'deliveryId')::bigint = any(${ids(slow.deliveries)})`);
  // The slow organization's messages come first in the fetch's order; it takes the other's.
  const fetch = (busy: string[]) => app.pool.oneFirst(sql.type(z.object({ m: z.unknown() }))`
    select fetch_due_messages(${DELIVERY_QUEUE}, 1000, ${sql.array(busy, 'text')}) as m`) as Promise<{ delivery_id: number }[]>;
  const first = await fetch([slow.orgId]);
  t.true(other.deliveries.every((d) => first.some((m) => m.delivery_id === d.id)));
  t.false(first.some((m) => slow.deliveries.some((d) => d.id === m.delivery_id)));
  t.deepEqual(await priorities(), [-1, -1, -1].map((priority) => ({ priority, state: 'created' })), 'parked, and still due');

  // A fetch that passes over another organization does not read them; nor take them.
  const another = await tenant(t, app, 1);
  const second = await fetch(['org_unrelated']);
  t.deepEqual(second.map((m) => m.delivery_id), another.deliveries.map((d) => d.id));

  // Put back for any organization no longer busy; left parked for one still busy.
  const unpark = (busy: string[]) => app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select unpark_messages(${DELIVERY_QUEUE}, ${sql.array(busy, 'text')}) as n`);
  await unpark([slow.orgId]);
  t.deepEqual(await priorities(), [-1, -1, -1].map((priority) => ({ priority, state: 'created' })), 'still busy: left parked');
  t.true(await unpark([]) >= 3);
  t.deepEqual(await priorities(), [0, 0, 0].map((priority) => ({ priority, state: 'created' })));
  const third = await fetch([]);
  t.true(slow.deliveries.every((d) => third.some((m) => m.delivery_id === d.id)), 'fetched once not busy');
});

test.serial('a fetch with no busy organization takes parked messages after the others', async (t) => {
  // Earlier tests' messages out of the way first.
  await app.pool.query(sql.unsafe`select fetch_due_messages(${DELIVERY_QUEUE}, 100000, '{}')`);
  const slow = await tenant(t, app, 2);
  await app.pool.query(sql.unsafe`select fetch_due_messages(${DELIVERY_QUEUE}, 1000, ${sql.array([slow.orgId], 'text')})`);
  const other = await tenant(t, app, 2);
  const take = async (limit: number) => ((await app.pool.oneFirst(sql.type(z.object({ m: z.unknown() }))`
    select fetch_due_messages(${DELIVERY_QUEUE}, ${limit}, '{}') as m`)) as { delivery_id: number }[]).map((m) => m.delivery_id).sort();
  t.deepEqual(await take(2), other.deliveries.map((d) => d.id).sort(), 'the other organization\'s newer messages first');
  t.deepEqual(await take(1000), slow.deliveries.map((d) => d.id).sort(), 'then the parked ones');
});

/** A receiver that never answers and one that answers at once; tenant A (hostile) and B. */
async function hangingAndAnswering(t: ExecutionContext, on: TestApp) {
  const hanging = await startReceiver(() => 'hang');
  const answering = await startReceiver();
  t.teardown(() => Promise.all([hanging.close(), answering.close()]));
  const a = await on.createOrg();
  const b = await on.createOrg();
  return { hanging, answering, a, b, byA: { t, on, key: a.key } };
}

/** Jobs `from`..`to` of the application and event type of `first`, created one after another. */
async function moreJobs(by: fixtures.By, first: fixtures.JobWithTargets, from: number, to: number): Promise<void> {
  for (let n = from; n <= to; n += 1) await fixtures.createJob(by, { application_id: first.appId, event_type: first.eventType, payload: { n } });
}

// Six slots: an organization whose receivers are slow may hold three.
const workerApp = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true', WORKER_CONCURRENCY: '6', RATE_LIMIT_JOBS_PER_SECOND: '100000' }, { worker: true });

test.serial('one tenant\'s hanging receivers hold at most its share of a worker: another tenant is delivered meanwhile', async (t) => {
  const { hanging, answering, a, b, byA } = await hangingAndAnswering(t, workerApp);
  const first = await fixtures.createJobWithTargets(byA, { urls: [hanging.at('/a')], endpoint: { timeout_ms: 120_000 } });
  await moreJobs(byA, first, 2, 2);
  await until('the first two exchanges of A to hang', () => hanging.arrivals.length === 2);
  // Each began before its arrival: after this, both have waited a second, and A is slow.
  await sleep(HELD_AFTER_MS + 100);

  // Unshared, the worker's four free slots went to A's next four jobs (queued first), and B
  // waited for A's receiver to time out (120 s).
  await moreJobs(byA, first, 3, 6);
  const jobB = await fixtures.createJobWithTargets({ t, on: workerApp, key: b.key }, { urls: [answering.at('/b')] });
  await until('B\'s delivery', () => answering.forJob(jobB.job.id).length === 1, 60_000);
  await until('A\'s third exchange (its room: a share of 3, 2 held)', () => hanging.arrivals.length >= 3, 60_000);
  await sleep(HELD_AFTER_MS + 500); // whatever more a claim would have sent A has arrived by now
  t.is(hanging.arrivals.length, 3, 'A holds no more than its share');
  const waiting = await workerApp.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from deliveries d join webhook_jobs j on j.id = d.job_id
    where j.org_id = ${a.orgId} and d.status = 'pending' and d.attempt_count = 0`);
  t.is(waiting, 3, 'A\'s other three deliveries wait, due, without spending an attempt');
  const { exposition } = await scrape(`${workerApp.baseUrl}/metrics`);
  t.is(valueOf(exposition, 'hookline_worker_slow_organizations'), 1);
  t.is(valueOf(exposition, 'hookline_worker_organizations_at_share'), 1, 'A is at its share');
});

test.serial('a first wave of hanging attempts that took every slot holds another tenant up about a second, not until it times out', async (t) => {
  const { hanging, answering, b, byA } = await hangingAndAnswering(t, workerApp);
  // Six endpoints: the job's six deliveries are claimed together, before any has waited a
  // second, and take all six slots. Until A is found slow nothing tells its attempts from a
  // fast drain's; after that, its three sends past its share are lent to the others. Before,
  // B's delivery waited for A's attempts to time out (120 s).
  const urls = [1, 2, 3, 4, 5, 6].map((n) => hanging.at(`/w${n}`));
  await fixtures.createJobWithTargets(byA, { urls, endpoint: { timeout_ms: 120_000, rate_limit_rps: 1000 } });
  await until('A\'s six attempts to take the six slots', () => hanging.arrivals.length === 6);
  const jobB = await fixtures.createJobWithTargets({ t, on: workerApp, key: b.key }, { urls: [answering.at('/b')] });
  await until('B\'s delivery', () => answering.forJob(jobB.job.id).length === 1, 60_000);
  t.is(hanging.arrivals.length, 6, 'A got nothing more meanwhile');
});

test.serial('receivers that answer in under a second but keep every slot busy make their tenant slow: another tenant is delivered before its backlog', async (t) => {
  // A probe: receivers answering in 750-950 ms at the tenant's full job rate held every slot with
  // attempts none of which waited a second; every other tenant's deliveries queued behind its
  // backlog, 0.5-2.5 s late for as long as it kept on.
  const slowish = await startReceiver(() => new Promise((resolve) => setTimeout(() => resolve({ status: 200 }), 700)));
  const answering = await startReceiver();
  t.teardown(() => Promise.all([slowish.close(), answering.close()]));
  const a = await workerApp.createOrg();
  const b = await workerApp.createOrg();
  const byA = { t, on: workerApp, key: a.key };
  const urls = [1, 2, 3, 4, 5, 6].map((n) => slowish.at(`/s${n}`));
  const first = await fixtures.createJobWithTargets(byA, { urls, endpoint: { rate_limit_rps: 1000 } });
  await moreJobs(byA, first, 2, 5); // 30 deliveries of 700 ms each, 6 slots: about 3.5 s of backlog
  await until('A\'s attempts to take the six slots', () => slowish.arrivals.length >= 6);
  const jobB = await fixtures.createJobWithTargets({ t, on: workerApp, key: b.key }, { urls: [answering.at('/b')] });
  await until('B\'s delivery', () => answering.forJob(jobB.job.id).length === 1, 60_000);
  const seen = slowish.arrivals.length;
  t.true(seen <= 18, `A's receivers had seen ${seen} of its 30 deliveries when B's arrived`);
  await until('A\'s backlog delivered', () => slowish.arrivals.length === 30, 120_000);
});

test.serial('hanging attempts that time out together leave their tenant slow: its next wave gets its share, not every slot', async (t) => {
  // A probe of a running service: a tenant's hanging attempts started and timed out together,
  // so at the claim after each wave it had nothing running, took every freed slot again, and
  // another tenant waited wave after wave.
  const { hanging, answering, a, b, byA } = await hangingAndAnswering(t, workerApp);
  // Six endpoints: each job's six deliveries are claimed together, start together and time out
  // together, as a wave does.
  const urls = [1, 2, 3, 4, 5, 6].map((n) => hanging.at(`/a${n}`));
  const first = await fixtures.createJobWithTargets(byA, { urls, endpoint: { timeout_ms: 2_000, rate_limit_rps: 1000 } });
  await moreJobs(byA, first, 2, 5);
  await until('A\'s first wave to take the six slots', () => hanging.arrivals.length >= 6);
  const jobB = await fixtures.createJobWithTargets({ t, on: workerApp, key: b.key }, { urls: [answering.at('/b')] });
  await until('B\'s delivery', () => answering.forJob(jobB.job.id).length === 1, 60_000);
  // Wave one (6), then at most its share (3) at a time. Without the memory, A's next waves took
  // all six slots until its 30 deliveries had gone, and B came after them.
  const seen = hanging.arrivals.length;
  t.true(seen <= 6 + 3 + 3, `A's attempts before B's: ${seen}`);
});

// Six slots again, the worker's log read, and retries an hour away (a wave's timeouts are not retried meanwhile).
type Line = { level: number; msg: string; org_id?: string };
const logLines: Line[] = [];
const loggedApp = startTestApp(
  { ALLOW_PRIVATE_DESTINATIONS: 'true', WORKER_CONCURRENCY: '6', RATE_LIMIT_JOBS_PER_SECOND: '100000', RETRY_SCHEDULE: '3600,3600,3600,3600,3600,3600' },
  { worker: true, logger: pino({ level: 'warn' }, { write: (line: string) => { logLines.push(JSON.parse(line) as Line); } }) },
);

test.serial('the worker warns once a minute, not at every wave, that it passes over a tenant at its share', async (t) => {
  // A probe of a running service counted 104 of these warnings in a 16 s drain: a tenant counted
  // slow reaches its share and leaves it about every claim, and each return was logged.
  const { hanging, a, byA } = await hangingAndAnswering(t, loggedApp);
  // Waves: six attempts hanging 2 s (before A is found slow), then three at a time (its share):
  // between two waves A holds nothing, and at each wave it is at its share again.
  const first = await fixtures.createJobWithTargets(byA, { urls: [hanging.at('/w')], endpoint: { timeout_ms: 2_000, rate_limit_rps: 1000 } });
  await moreJobs(byA, first, 2, 15);
  await until('three waves of A\'s attempts', () => hanging.arrivals.length >= 6 + 3 + 3, 60_000);
  await sleep(500); // the third wave's claim has been made, and any warning of it logged
  const warnings = logLines.filter((line) => line.org_id === a.orgId && line.msg.startsWith('organization holds its share'));
  t.is(warnings.length, 1, 'one warning for three turns at its share within a minute');
});

// Twenty slots: a claim waits for five free (a quarter), and four slow tenants may hold four each.
const twentyApp = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true', WORKER_CONCURRENCY: '20', RATE_LIMIT_JOBS_PER_SECOND: '100000' }, { worker: true });

test.serial('slots left free by slow tenants each at its share are used, though fewer than a claim\'s worth', async (t) => {
  // A probe of a running service: 40 slow tenants held 602 of 800 slots, each under its share,
  // and the worker claimed nothing more until 200 were free (a quarter of its slots), which came
  // only as their attempts timed out: the other 198 sat idle while thousands of deliveries were
  // due. Here four slow tenants hold 4 slots each (their share: 20 / 5), and 4 are free, one
  // fewer than a claim's worth: B's delivery waited for their 60 s timeouts.
  const hanging = await startReceiver(() => 'hang');
  const answering = await startReceiver();
  t.teardown(() => Promise.all([hanging.close(), answering.close()]));
  for (let n = 1; n <= 4; n += 1) {
    const org = await twentyApp.createOrg();
    const by = { t, on: twentyApp, key: org.key };
    const first = await fixtures.createJobWithTargets(by, { urls: [hanging.at(`/o${n}`)], endpoint: { timeout_ms: 60_000, rate_limit_rps: 1000 } });
    await moreJobs(by, first, 2, 4);
    await until(`tenant ${n}'s four attempts to hang`, () => hanging.arrivals.length === 4 * n, 30_000);
    await sleep(HELD_AFTER_MS + 100); // slow from here on
  }
  const b = await twentyApp.createOrg();
  const jobB = await fixtures.createJobWithTargets({ t, on: twentyApp, key: b.key }, { urls: [answering.at('/b')] });
  await until('B\'s delivery', () => answering.forJob(jobB.job.id).length === 1, 30_000);
  t.is(hanging.arrivals.length, 16, 'the slow tenants got nothing more');
});

// Two hundred slots: a slow organization may hold a hundred, more than the 64 connections a
// worker opens to one origin in a pool.
const wideApp = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true', WORKER_CONCURRENCY: '200', RATE_LIMIT_JOBS_PER_SECOND: '100000' }, { worker: true });

/** B's job to `/fast` at `receiver` (5 s timeout), once it arrived: its recorded attempts. */
async function deliveredAtFast(t: ExecutionContext, key: string, receiver: Awaited<ReturnType<typeof startReceiver>>) {
  const jobB = await fixtures.createJobWithTargets({ t, on: wideApp, key }, { urls: [receiver.at('/fast')], endpoint: { timeout_ms: 5_000 } });
  await until('B\'s delivery', () => receiver.forJob(jobB.job.id).length === 1, 60_000);
  return until('B\'s attempt to be recorded', async () => {
    const recorded = await wideApp.pool.any(sql.type(z.object({ success: z.boolean(), error: z.string().nullable() }))`
      select a.success, a.error from delivery_attempts a join deliveries d on d.id = a.delivery_id where d.job_id = ${jobB.job.id as string}`);
    return recorded.length > 0 && recorded;
  });
}

test.serial('a slow tenant\'s attempts use connections of their own: another tenant reaches the same origin meanwhile', async (t) => {
  const receiver = await startReceiver((arrival) => (arrival.url === '/slow' ? 'hang' : { status: 200, body: 'ok' }));
  t.teardown(() => receiver.close());
  const a = await wideApp.createOrg();
  const b = await wideApp.createOrg();
  const byA = { t, on: wideApp, key: a.key };
  const first = await fixtures.createJobWithTargets(byA, { urls: [receiver.at('/slow')], endpoint: { timeout_ms: 120_000, rate_limit_rps: 1000 } });
  await until('A\'s first exchange to hang', () => receiver.arrivals.length === 1);
  await sleep(HELD_AFTER_MS + 100); // A is slow from here on
  // 70 more hanging attempts: in one shared pool they took its 64 connections, and B's attempt
  // to the same origin waited behind them until it timed out, again at every retry.
  await moreJobs(byA, first, 2, 71);
  await until('63 more of A\'s attempts to hang (one pool\'s worth with the first)', () => receiver.arrivals.length >= 64, 60_000);
  const attempts = await deliveredAtFast(t, b.key, receiver);
  t.deepEqual(attempts, [{ success: true, error: null }], 'B\'s first attempt succeeded: it did not time out waiting for a connection');
});

test.serial('a first wave that takes every connection of the shared pool to an origin: once its tenant is slow, the others get new connections there', async (t) => {
  const receiver = await startReceiver((arrival) => (arrival.url.startsWith('/slow') ? 'hang' : { status: 200, body: 'ok' }));
  t.teardown(() => receiver.close());
  const a = await wideApp.createOrg();
  const b = await wideApp.createOrg();
  // One job to 70 endpoints at one origin: its deliveries are claimed together and go out in
  // the shared pool, A not being slow yet. 64 take the pool's connections to the origin, 6 wait
  // for one. Before, B's attempt there waited behind them until its own timeout.
  const urls = Array.from({ length: 70 }, (_, n) => receiver.at(`/slow?n=${n}`));
  await fixtures.createJobWithTargets({ t, on: wideApp, key: a.key }, { urls, endpoint: { timeout_ms: 120_000, rate_limit_rps: 1000 } });
  await until('64 of A\'s attempts to hang', () => receiver.arrivals.length >= 64, 60_000);
  await sleep(HELD_AFTER_MS + 100); // A is slow from here on, holding 70 sends made in the shared pool
  // On a quiet machine exactly 64 arrived: the shared pool's connections to the origin are all
  // taken. On a busy one some of A's 70 may start only after A is slow (claimed in a later, smaller
  // claim, or past their slot's lateness and given a new one), in A's own pool: more arrive, and
  // the shared pool holds fewer (B's attempt then proves less, but is never wrongly failed).
  t.true(receiver.arrivals.length >= 64, `${receiver.arrivals.length} of A's attempts arrived`);
  const attempts = await deliveredAtFast(t, b.key, receiver);
  t.deepEqual(attempts, [{ success: true, error: null }], 'B\'s first attempt succeeded: it did not wait for a connection');
});

test('payload bytes are shared as the slots: a slow organization holding its share of them is passed over, the rest lent', (t) => {
  // A budget of 100 bytes and 400 slots: a slow organization's 6 sends of 20 bytes hold 120
  // bytes, past its half (50), though far under its half of the slots (200).
  const share = makeOrganizationShare(400, 100);
  const sends = Array.from({ length: 6 }, () => share.claimed('org_a', 20));
  for (const held of sends) held.started(0);
  t.deepEqual(share.limits(HELD_AFTER_MS - 1), { share: 200, holding: {}, busy: [], excess: 0, excessBytes: 0 }, 'not slow yet');
  t.deepEqual(share.limits(HELD_AFTER_MS), { share: 200, holding: { org_a: 6 }, busy: ['org_a'], excess: 0, excessBytes: 70 },
    'busy for its bytes; 120 - 50 lent to the others');
  share.claimed('org_b', 30); // a fast organization's send: never held to a share
  t.deepEqual(share.limits(HELD_AFTER_MS + 1), { share: 200, holding: { org_a: 6 }, busy: ['org_a'], excess: 0, excessBytes: 70 });
  for (const held of sends.slice(0, 4)) held.end(20_000);
  t.deepEqual(share.limits(20_000), { share: 200, holding: { org_a: 2 }, busy: [], excess: 0, excessBytes: 0 }, '40 bytes: under its share again');
});

test('the byte share is whole bytes: with two slow organizations a third of the budget, rounded down', (t) => {
  // A probe: with two slow organizations the share was 16 MiB / 3, its fraction went to the
  // claim as a bigint, and every claim of the worker failed ("invalid input syntax for type
  // bigint") until their attempts timed out: no tenant was delivered meanwhile.
  const share = makeOrganizationShare(400, 100);
  for (const [orgId, bytes] of [['org_a', 60], ['org_c', 10]] as const) share.claimed(orgId, bytes).started(0);
  const limits = share.limits(HELD_AFTER_MS);
  t.deepEqual(limits, { share: 133, holding: { org_a: 1, org_c: 1 }, busy: ['org_a'], excess: 0, excessBytes: 27 }, 'a share of 33 bytes: 60 - 33 lent');
  t.true(Number.isInteger(limits.excessBytes));
});

// The default slots (800), and a worker's whole payload budget within reach of one tenant.
const bytesApp = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true', RATE_LIMIT_JOBS_PER_SECOND: '100000' }, { worker: true });

test.serial('hanging attempts of large payloads that fill the worker\'s payload budget hold another tenant up about a second, not until they time out', async (t) => {
  t.timeout(180_000);
  // A sweep of hostile tenants: 65 hanging attempts of 256 KB payloads (16 MB, the worker's
  // IN_FLIGHT_BYTES) held every other tenant's deliveries until they timed out, far under A's
  // share of 400 slots. Now A is held to its share of the bytes too, and what it holds past it is
  // lent to the others.
  const { hanging, answering, b, byA } = await hangingAndAnswering(t, bytesApp);
  const big = 'x'.repeat(250_000);
  const first = await fixtures.createJobWithTargets(byA, {
    urls: [hanging.at('/big')], endpoint: { timeout_ms: 120_000, rate_limit_rps: 10_000 }, payload: { big, n: 1 },
  });
  for (let n = 2; n <= 70; n += 1) await fixtures.createJob(byA, { application_id: first.appId, event_type: first.eventType, payload: { big, n } });
  // Half the budget at least (its share once found slow; before, all of it: 67 attempts).
  await until('A\'s attempts to hold its share of the payload budget', () => hanging.arrivals.length >= Math.floor(IN_FLIGHT_BYTES / 2 / 250_000), 60_000);
  const jobB = await fixtures.createJobWithTargets({ t, on: bytesApp, key: b.key }, { urls: [answering.at('/b')] });
  await until('B\'s delivery', () => answering.forJob(jobB.job.id).length === 1, 60_000);
  // Within 60 s, while A's attempts hang for 120: before, B came only after they timed out.
  const { exposition } = await scrape(`${bytesApp.baseUrl}/metrics`);
  t.is(valueOf(exposition, 'hookline_worker_organizations_at_share'), 1, 'A is passed over for its bytes');
});

// A worker of its own: the tenants the tests above make slow stay slow for ten minutes.
const twoSlowApp = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true', RATE_LIMIT_JOBS_PER_SECOND: '100000' }, { worker: true });

test.serial('with two slow tenants, one holding large payloads, a third tenant is still delivered while their attempts hang', async (t) => {
  t.timeout(180_000);
  // The probe's case: A's hanging attempts of 250 KB payloads, taken before A was found slow,
  // and C's one hanging attempt made both slow; the byte share was then a third of the budget,
  // fractional, what A held past it was lent, and every claim failed until the attempts timed
  // out. B's job waited for them. A's deliveries are held on a paused endpoint and released
  // together, so that one claim takes them before any has waited a second, however busy the
  // machine (created one by one, A was found slow before it held past its share).
  const { hanging, answering, b, byA } = await hangingAndAnswering(t, twoSlowApp);
  const c = await twoSlowApp.createOrg();
  await fixtures.createJobWithTargets({ t, on: twoSlowApp, key: c.key }, { urls: [hanging.at('/c')], endpoint: { timeout_ms: 120_000 } });
  const appA = (await fixtures.createApplication(byA)).id as string;
  await fixtures.createEventType(byA, 'big.payload');
  const endpointA = (await fixtures.createEndpoint(byA, {
    application_id: appA, url: hanging.at('/big'), event_types: ['big.payload'], timeout_ms: 120_000, rate_limit_rps: 10_000,
  })).id as string;
  t.is((await twoSlowApp.request('PATCH', `/v1/endpoints/${endpointA}`, { key: byA.key, body: { status: 'paused' } })).status, 200);
  const big = 'x'.repeat(250_000);
  for (let n = 1; n <= 70; n += 1) await fixtures.createJob(byA, { application_id: appA, event_type: 'big.payload', payload: { big, n } });
  t.is((await twoSlowApp.request('PATCH', `/v1/endpoints/${endpointA}`, { key: byA.key, body: { status: 'active' } })).status, 200);
  // Claimed at once up to the payload budget (about 64 of 250 KB); they arrive as they are sent.
  await until('A\'s attempts hanging', () => hanging.arrivals.filter((arrival) => arrival.url === '/big').length >= 40, 60_000);
  await sleep(HELD_AFTER_MS + 500); // A and C both slow by now
  const jobB = await fixtures.createJobWithTargets({ t, on: twoSlowApp, key: b.key }, { urls: [answering.at('/b2')] });
  await until('B\'s delivery', () => answering.forJob(jobB.job.id).length === 1, 60_000);
  const { exposition } = await scrape(`${twoSlowApp.baseUrl}/metrics`);
  t.is(valueOf(exposition, 'hookline_worker_slow_organizations'), 2, 'A and C both slow');
});
