// GET /v1/endpoints/{id}/attempts (decisions 13/14): newest first by attempted_at, a cursor list
// that neither repeats nor skips while attempts are being recorded, the filters status,
// event_type, since and until, and the indexes that serve each (EXPLAIN of the real query).
import test from 'ava';
import { sql } from 'slonik';
import { assertError, startTestApp } from '../helpers/app.ts';
import { endpointAttemptsQuery } from '../../src/db/delivery-attempts.ts';
import { minutesAgo, record, target, type Attempt } from './helpers.ts';

const app = startTestApp();

const FIELDS = ['attempt', 'attempted_at', 'endpoint_id', 'error', 'event_type', 'job_id', 'latency_ms', 'response_body', 'status_code', 'success'];

async function page(key: string, endpointId: string, query: string) {
  const res = await app.request('GET', `/v1/endpoints/${endpointId}/attempts?${query}`, { key });
  if (res.status !== 200) throw new Error(`${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { data: Array<Record<string, any>>; next_cursor: string | null };
}

test('pages newest first; concurrent inserts (newer, older, same instant) never repeat or skip an attempt that was there before', async (t) => {
  const ep = await target(t, app, ['order.created', 'order.paid']);
  const now = Date.now();
  const delivery = (n: number) => (n % 2 ? ep.deliveries['order.created']! : ep.deliveries['order.paid']!);
  // 60 attempts over the last hour, pairs sharing an instant (the id breaks the tie); `attempt` labels each.
  const initial: Attempt[] = Array.from({ length: 60 }, (_, i) => ({
    deliveryId: delivery(i), attempt: i + 1, at: minutesAgo(Math.floor(i / 2), now), success: i % 3 !== 0,
  }));
  await record(app, initial);

  const seen: number[] = [];
  const times: string[] = [];
  let cursor: string | null = null;
  let label = 1000;
  for (let pages = 0; pages < 100; pages += 1) {
    const body = await page(ep.key, ep.endpointId, `limit=7${cursor ? `&cursor=${cursor}` : ''}`);
    for (const item of body.data) {
      t.deepEqual(Object.keys(item).sort(), FIELDS);
      seen.push(item.attempt);
      times.push(item.attempted_at);
    }
    cursor = body.next_cursor;
    if (!cursor) break;
    // Between pages: one newer than everything, one inside the range already read, one at an
    // instant already on the pages (the same attempted_at as an initial attempt).
    await Promise.all([
      record(app, [{ deliveryId: delivery(label), attempt: label++, at: new Date(), success: true }]),
      record(app, [{ deliveryId: delivery(label), attempt: label++, at: minutesAgo(Math.random() * 30, now), success: false }]),
      record(app, [{ deliveryId: delivery(label), attempt: label++, at: minutesAgo(Math.floor(Math.random() * 30), now), success: true }]),
    ]);
  }
  t.is(new Set(seen).size, seen.length, 'no attempt twice');
  for (const a of initial) t.true(seen.includes(a.attempt), `initial attempt ${a.attempt} is listed`);
  t.deepEqual([...times].sort().reverse(), times, 'newest first');
});

test('filters status, event_type, since and until, alone and together, match a count over the attempts; bad values are 400s', async (t) => {
  const ep = await target(t, app, ['order.created', 'order.paid']);
  const now = Date.now();
  const attempts: Attempt[] = Array.from({ length: 40 }, (_, i) => ({
    deliveryId: i % 4 === 0 ? ep.deliveries['order.paid']! : ep.deliveries['order.created']!,
    attempt: i + 1, at: minutesAgo(i, now), success: i % 5 !== 0,
  }));
  await record(app, attempts);

  async function all(query: string) {
    const items: Array<Record<string, any>> = [];
    let cursor: string | null = null;
    do {
      const body = await page(ep.key, ep.endpointId, `limit=3&${query}${cursor ? `&cursor=${cursor}` : ''}`);
      items.push(...body.data);
      cursor = body.next_cursor;
    } while (cursor);
    return items.map((i) => i.attempt as number);
  }
  const expect = (keep: (a: Attempt, eventType: string) => boolean) => attempts
    .filter((a) => keep(a, a.deliveryId === ep.deliveries['order.paid'] ? 'order.paid' : 'order.created'))
    .map((a) => a.attempt);
  const since = minutesAgo(20.5, now).toISOString();
  const until = minutesAgo(5.5, now).toISOString();

  t.deepEqual(await all(''), expect(() => true));
  t.deepEqual(await all('status=failed'), expect((a) => !a.success));
  t.deepEqual(await all('status=succeeded'), expect((a) => a.success));
  t.deepEqual(await all('event_type=order.paid'), expect((_, e) => e === 'order.paid'));
  t.deepEqual(await all(`since=${since}&until=${until}`), expect((a) => a.at.toISOString() >= since && a.at.toISOString() < until));
  t.deepEqual(await all(`status=failed&event_type=order.created&since=${since}`),
    expect((a, e) => !a.success && e === 'order.created' && a.at.toISOString() >= since));
  t.deepEqual(await all('event_type=no.such'), []);
  const first = (await page(ep.key, ep.endpointId, 'limit=1')).data[0]!;
  t.like(first, { event_type: 'order.paid', endpoint_id: ep.endpointId, status_code: 500, success: false, error: 'http_status' });
  t.regex(first.job_id, /^job_/);

  for (const query of ['status=cancelled', 'since=yesterday', 'limit=0', 'limit=101', 'cursor=abc', 'colour=red']) {
    assertError(t, await app.request('GET', `/v1/endpoints/${ep.endpointId}/attempts?${query}`, { key: ep.key }), 400, 'validation_error');
  }
  const other = await app.createOrg();
  assertError(t, await app.request('GET', `/v1/endpoints/${ep.endpointId}/attempts`, { key: other.key }), 404, 'not_found');
  assertError(t, await app.request('GET', '/v1/endpoints/ep_bad/attempts', { key: ep.key }), 404, 'not_found');
  const jobsOnly = await app.createOrg({ scopes: ['webhooks:read'] });
  assertError(t, await app.request('GET', `/v1/endpoints/${ep.endpointId}/attempts`, { key: jobsOnly.key }), 403, 'forbidden');
});

type PlanNode = { 'Node Type': string; 'Index Name'?: string; Plans?: PlanNode[] };
const nodes = (plan: PlanNode): PlanNode[] => [plan, ...(plan.Plans ?? []).flatMap(nodes)];

test('each filter is served by its index, in order (no sort, no sequential scan): EXPLAIN of the real query', async (t) => {
  const ep = await target(t, app, ['order.created', 'order.paid']);
  // Enough rows of other endpoints and of this one that the planner's choice is the real one.
  const noise = await target(t, app, ['order.created']);
  const now = Date.now();
  const rows = (e: typeof ep, base: number): Attempt[] => Array.from({ length: 3000 }, (_, i) => ({
    deliveryId: i % 10 === 0 ? (e.deliveries['order.paid'] ?? e.deliveries['order.created']!) : e.deliveries['order.created']!,
    attempt: base + i, at: minutesAgo(i / 10, now), success: i % 20 !== 0,
  }));
  await record(app, rows(ep, 1));
  await record(app, rows(noise, 1));
  await app.pool.query(sql.unsafe`analyze delivery_attempts`);

  const cases = [
    [{}, 'delivery_attempts_endpoint_id_attempted_at_id_idx'],
    [{ since: minutesAgo(60, now).toISOString(), until: minutesAgo(10, now).toISOString() }, 'delivery_attempts_endpoint_id_attempted_at_id_idx'],
    [{ status: 'succeeded' as const }, 'delivery_attempts_endpoint_id_attempted_at_id_idx'],
    [{ status: 'failed' as const }, 'delivery_attempts_endpoint_id_failed_attempted_at_id_idx'],
    [{ eventType: 'order.paid' }, 'delivery_attempts_endpoint_id_event_type_attempted_at_id_idx'],
    [{ eventType: 'order.paid', cursor: { at: '2026-11-22T10:00:00.000000Z', id: '5' } }, 'delivery_attempts_endpoint_id_event_type_attempted_at_id_idx'],
  ] as const;
  for (const [filters, index] of cases) {
    const plan = await app.pool.transaction(async (tx) => {
      await tx.query(sql.unsafe`set local enable_seqscan = off`);
      const [row] = await tx.any(sql.unsafe`explain (format json) ${endpointAttemptsQuery(ep.endpointId, { limit: 20, cursor: null, ...filters })}`);
      return (row as { 'QUERY PLAN': Array<{ Plan: PlanNode }> })['QUERY PLAN'][0]!.Plan;
    });
    const all = nodes(plan);
    const scans = all.filter((n) => n['Index Name']);
    t.deepEqual(scans.map((n) => [n['Node Type'], n['Index Name']]), [['Index Scan', index]], JSON.stringify(filters));
    t.false(all.some((n) => n['Node Type'] === 'Sort'), `no sort for ${JSON.stringify(filters)}`);
  }
});
