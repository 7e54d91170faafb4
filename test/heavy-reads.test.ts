// One organization's heavy reads (lists with their totals, the summary, stats, the recover
// request's count) run at most HEAVY_READS_PER_ORGANIZATION (1) at a time in a process; the rest
// wait, in their turn, holding no connection, while other organizations' reads and the
// organization's own light requests go on. Before, sixteen clients of one tenant listing a million
// jobs took eight connections' worth of the database's cores, and another tenant's job creations
// were answered in 111 ms at the median instead of 7 (bench:fairness --flood-reads). The app's
// part is shown with a table lock this test holds (nothing depends on timing); the limiter's
// own rules (its deadline, an abandoned request, the order of turns, a heavy read inside
// another) with the limiter alone.
import test, { type ExecutionContext } from 'ava';
import { pino } from 'pino';
import { sql, type DatabasePool } from 'slonik';
import { HEAVY_WAIT_TOLD_MS, heavyRead, heavyReadWaits, limitHeavyReads } from '../src/db/heavy-reads.ts';
import { makePool } from '../src/db/pool.ts';
import { RequestScope, requestScope } from '../src/db/request-scope.ts';
import { AppError } from '../src/errors.ts';
import { startTestApp } from './helpers/app.ts';
import { createApplication, createEndpoint, createEventType } from './helpers/fixtures.ts';
import { heavyReadWaitCount } from './helpers/heavy-turn.ts';
import { session, waitingOn } from './helpers/sessions.ts';
import { within } from '../src/within.ts';
import { until } from './helpers/until.ts';

const app = startTestApp();

const waits = () => heavyReadWaitCount(app);

/**
 * The organization's job list of `applicationId`, held on a lock of webhook_jobs this test takes:
 * once it waits there, its heavy read has begun and holds the organization's turn. `release`
 * lets it go on; `jobs` is its answer.
 */
async function holdTurn(t: ExecutionContext, key: string, applicationId: string) {
  const [locker, watcher] = [await session(t, app.databaseUrl), await session(t, app.databaseUrl)];
  await locker.query('begin');
  await locker.query('lock table webhook_jobs in access exclusive mode');
  const jobs = app.request('GET', `/v1/webhook-jobs?application_id=${applicationId}`, { key });
  await waitingOn(watcher, 'webhook_jobs');
  return { jobs, release: () => locker.query('commit') };
}

test.serial('an organization\'s second heavy read waits for its first; other organizations\' reads and its light requests do not', async (t) => {
  const hog = await app.createOrg();
  const other = await app.createOrg();
  const hogApp = await createApplication({ on: app, key: hog.key });
  await createApplication({ on: app, key: other.key }, { name: 'Other' });
  const before = await waits();
  const { jobs, release } = await holdTurn(t, hog.key, hogApp.id);

  // Its endpoint list (no lock stands in its way) waits for that turn.
  let endpointsAnswered = false;
  const endpoints = app.request('GET', `/v1/endpoints?application_id=${hogApp.id}`, { key: hog.key })
    .finally(() => { endpointsAnswered = true; });
  await until('the hog\'s endpoint list waiting for its turn', async () => (await waits()) === before + 1);

  // Meanwhile another organization's list, and the hog's own read of one application, are answered.
  const otherList = await app.request('GET', '/v1/applications', { key: other.key });
  t.is(otherList.status, 200, JSON.stringify(otherList.body));
  t.deepEqual(otherList.body.data.map((a: { name: string }) => a.name), ['Other']);
  const one = await app.request('GET', `/v1/applications/${hogApp.id}`, { key: hog.key });
  t.is(one.status, 200);
  t.false(endpointsAnswered, 'the hog\'s second heavy read still waits for its first');

  await release();
  t.deepEqual([(await jobs).status, (await endpoints).status], [200, 200], 'both answered in their turn');
  t.is(await waits(), before + 1);
});

test.serial('a portal link\'s lists and its organization\'s key take turns: the key\'s list runs before the link\'s next', async (t) => {
  const hog = await app.createOrg();
  const hogApp = await createApplication({ on: app, key: hog.key });
  const link = await app.request('POST', `/v1/applications/${hogApp.id}/portal-links`, { key: hog.key, body: {} });
  t.is(link.status, 201, JSON.stringify(link.body));
  const token = link.body.token as string;
  const before = await waits();
  // The link's job list holds the turn, waiting on the test's lock; a second lock queued behind
  // it will hold whichever job list comes next.
  const { jobs, release } = await holdTurn(t, token, hogApp.id);
  const [second, watcher] = [await session(t, app.databaseUrl), await session(t, app.databaseUrl)];
  await second.query('begin');
  const relocked = second.query('lock table webhook_jobs in access exclusive mode');
  await waitingOn(watcher, 'lock table webhook_jobs');
  let linkNextAnswered = false;
  const linkNext = app.request('GET', `/v1/webhook-jobs?application_id=${hogApp.id}`, { key: token })
    .finally(() => { linkNextAnswered = true; });
  await until('the link\'s next list waiting for its turn', async () => (await waits()) === before + 1);
  const keyList = app.request('GET', `/v1/endpoints?application_id=${hogApp.id}`, { key: hog.key });
  await until('the key\'s list waiting for its turn', async () => (await waits()) === before + 2);

  await release();
  t.is((await jobs).status, 200);
  // First come first served, the link's next list took the turn and waited on the second lock,
  // and the key's list behind it never came (until that lock went).
  const answered = await within(keyList, 30_000, null);
  t.is(answered?.status, 200, 'the key\'s list is answered while the link\'s next waits');
  t.false(linkNextAnswered);
  await relocked;
  await second.query('commit');
  t.is((await linkNext).status, 200);
});

test.serial('every heavy read waits its turn: the lists, the summary, the stats, the searches, operational events by type, the recover request', async (t) => {
  const hog = await app.createOrg();
  const hogApp = await createApplication({ on: app, key: hog.key });
  await createEventType({ on: app, key: hog.key }, 'order.created');
  const endpoint = await createEndpoint({ on: app, key: hog.key, t }, { application_id: hogApp.id, event_types: ['order.created'] });
  const before = await waits();
  const { jobs, release } = await holdTurn(t, hog.key, hogApp.id);

  const since = new Date(Date.now() - 3600_000).toISOString();
  const heavy: Array<[string, string, unknown?]> = [
    ['GET', '/v1/applications'],
    ['GET', '/v1/applications?search=none'],
    ['GET', `/v1/endpoints?application_id=${hogApp.id}&deleted=true`],
    ['GET', '/v1/summary'],
    ['GET', '/v1/stats'],
    ['GET', `/v1/endpoints/${endpoint.id}/stats`],
    ['GET', '/v1/event-types?search=order'],
    ['GET', '/v1/operational-webhooks/events?type=delivery.exhausted'],
    ['POST', `/v1/endpoints/${endpoint.id}/recover`, { since }],
  ];
  const answered: string[] = [];
  const requests = heavy.map(([method, path, body]) =>
    app.request(method, path, { key: hog.key, ...(body === undefined ? {} : { body }) }).finally(() => answered.push(path)));
  await until('each heavy read waiting for its turn', async () => (await waits()) === before + heavy.length);
  // Light reads of the same organization (the same lists without a search or a type) are answered meanwhile.
  t.is((await app.request('GET', '/v1/event-types', { key: hog.key })).status, 200);
  t.is((await app.request('GET', '/v1/operational-webhooks/events', { key: hog.key })).status, 200);
  t.deepEqual(answered, []);

  await release();
  t.is((await jobs).status, 200);
  t.deepEqual((await Promise.all(requests)).map((r) => r.status), heavy.map(([method]) => (method === 'POST' ? 202 : 200)));
});

/** The limiter alone on a stand-in pool: `run` calls `work` as a request of `organization` (abandoned when `scope.abort()`). */
function limiter(perOrganization: number, acquireTimeoutMs: number) {
  const pool = {} as DatabasePool;
  limitHeavyReads(pool, { perOrganization, acquireTimeoutMs });
  const run = <T>(organization: string, work: () => Promise<T>, scope = new RequestScope()) => {
    scope.organization = organization;
    return requestScope.run(scope, () => heavyRead(pool, work));
  };
  return { pool, run };
}

/** A read that ends when told. */
function held() {
  let end!: () => void;
  const ended = new Promise<void>((resolve) => { end = resolve; });
  return { end, work: () => ended };
}

test('turns pass in the order the reads came, one organization\'s never to another\'s', async (t) => {
  const { pool, run } = limiter(1, 30_000);
  const order: string[] = [];
  const first = held();
  const a1 = run('org_a', async () => { await first.work(); order.push('a1'); });
  const a2 = run('org_a', async () => { order.push('a2'); });
  const a3 = run('org_a', async () => { order.push('a3'); });
  await run('org_b', async () => { order.push('b1'); });
  t.deepEqual(order, ['b1'], 'another organization\'s read ran at once');
  t.is(heavyReadWaits(pool), 2);
  first.end();
  await Promise.all([a1, a2, a3]);
  t.deepEqual(order, ['b1', 'a1', 'a2', 'a3']);
});

test('within an organization the turns pass between callers: a portal link\'s burst does not queue its operator\'s reads behind all of it', async (t) => {
  // A probe: a customer's 96 concurrent lists through its portal link raised its operator's own
  // list from 7 to 431 ms at the median. Callers are an API key, or a portal link's application.
  const { run } = limiter(1, 30_000);
  const order: string[] = [];
  const as = (caller: string) => { const scope = new RequestScope(); scope.caller = caller; return scope; };
  const first = held();
  const reads = [run('org_a', async () => { await first.work(); order.push('link1'); }, as('application:app_1'))];
  for (const n of [2, 3, 4]) reads.push(run('org_a', async () => { order.push(`link${n}`); }, as('application:app_1')));
  reads.push(run('org_a', async () => { order.push('key1'); }, as('key:key_1')));
  reads.push(run('org_a', async () => { order.push('key2'); }, as('key:key_1')));
  reads.push(run('org_a', async () => { order.push('other1'); }, as('key:key_2')));
  first.end();
  await Promise.all(reads);
  t.deepEqual(order, ['link1', 'key1', 'other1', 'link2', 'key2', 'link3', 'link4']);
});

test('a heavy read made inside another runs at once (one turn per read)', async (t) => {
  const { pool, run } = limiter(1, 30_000);
  t.is(await run('org_a', () => heavyRead(pool, async () => 'inner')), 'inner');
  t.is(heavyReadWaits(pool), 0);
});

test('a read that waits past the acquire timeout is a 503 naming the cause; the turn is free again once the running read ends', async (t) => {
  const { run } = limiter(1, 50);
  const first = held();
  const running = run('org_a', first.work);
  const late = await t.throwsAsync(run('org_a', async () => 'never'), { instanceOf: AppError });
  t.is(late?.status, 503);
  t.regex(late?.message ?? '', /earlier requests that read many rows .* are still running/);
  first.end();
  await running;
  t.is(await run('org_a', async () => 'next'), 'next', 'the turn is free again');
});

test('an abandoned request stops waiting and its read never runs', async (t) => {
  const { run } = limiter(1, 30_000);
  const first = held();
  const running = run('org_a', first.work);
  const scope = new RequestScope();
  let ran = false;
  const abandoned = run('org_a', async () => { ran = true; }, scope);
  scope.abort();
  await t.throwsAsync(abandoned);
  first.end();
  await running;
  t.false(ran);
});

test('a pool made with the setting logs an organization whose reads wait a second or more, once a minute for each organization', async (t) => {
  // A probe: the dashboard's overview (six heavy reads at once) warned at every load, and one
  // organization's line left every other's unlogged for the rest of the minute.
  const lines: Array<{ msg: string; org_id?: string; heavy_reads?: number }> = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => { lines.push(JSON.parse(line)); } });
  const pool = await makePool(app.databaseUrl, { maximumPoolSize: 2, heavyReadsPerOrganization: 1, logger });
  t.teardown(() => pool.end());
  const as = <T>(organization: string, work: () => Promise<T>) => {
    const scope = new RequestScope();
    scope.organization = organization;
    return requestScope.run(scope, () => heavyRead(pool, work));
  };
  const logged = () => lines.filter((line) => line.msg.startsWith('an organization\'s heavy reads'));
  /** One read held for `holdMs`, two more of the organization waiting behind it. */
  const round = async (organization: string, holdMs: number) => {
    const first = held();
    const running = as(organization, first.work);
    const waiting = [as(organization, async () => pool.oneFirst(sql.unsafe`select 1`)), as(organization, async () => pool.oneFirst(sql.unsafe`select 2`))];
    await new Promise((resolve) => setTimeout(resolve, holdMs));
    first.end();
    t.deepEqual(await Promise.all([running, ...waiting]), [undefined, 1, 2]);
  };
  await round('org_quick', 0);
  t.is(heavyReadWaits(pool), 2, 'the waits are counted');
  t.deepEqual(logged(), [], 'a wait of moments is not told');
  await round('org_logged', HEAVY_WAIT_TOLD_MS + 100);
  await round('org_logged', HEAVY_WAIT_TOLD_MS + 100);
  await round('org_other', HEAVY_WAIT_TOLD_MS + 100);
  t.is(heavyReadWaits(pool), 8);
  t.deepEqual(logged().map((line) => [line.org_id, line.heavy_reads]), [['org_logged', 1], ['org_other', 1]], 'one line per organization within the minute');
});

test('a heavy read whose client leaves is cancelled on the server: its organization\'s next heavy read runs, and nothing of it runs on', async (t) => {
  // A probe: an abandoned deep page of a big tenant's jobs ran on for 8 s and held the
  // organization's turn; the dashboard's next page waited for it and answered 503.
  const pool = await makePool(app.databaseUrl, { maximumPoolSize: 2, heavyReadsPerOrganization: 1 });
  t.teardown(() => pool.end());
  const as = <T>(scope: RequestScope, work: () => Promise<T>) => requestScope.run(scope, () => heavyRead(pool, work));
  const leaving = new RequestScope();
  leaving.organization = 'org_cancelled';
  const staying = new RequestScope();
  staying.organization = 'org_cancelled';
  const marker = `abandoned_${Date.now()}`;
  const slow = as(leaving, () => pool.oneFirst(sql.unsafe`select pg_sleep(60) as ${sql.identifier([marker])}`)).then(() => 'finished', (error: unknown) => error);
  const next = as(staying, () => pool.oneFirst(sql.unsafe`select 'next'`));
  const running = () => app.pool.oneFirst(sql.unsafe`
    select count(*)::int from pg_stat_activity where query like ${`%${marker}%`} and state = 'active' and pid <> pg_backend_pid()`);
  await until('the slow read running', async () => (await running()) === 1);
  leaving.abort();
  t.is(await next, 'next', 'the next read got the turn');
  t.is((await slow as Error).name, 'RequestAbandonedError');
  t.is(await running(), 0, 'nothing of it runs on the server');
});
