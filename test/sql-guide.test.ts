// The DBA's side of the schema: the views of sql/015-views.sql checked against real deliveries,
// every ready query of docs/sql.md run against that data, a comment on every object of schema
// public, and invariants as named CHECK constraints.
import test from 'ava';
import { readFile } from 'node:fs/promises';
import pg from 'pg';
import { startTestApp } from './helpers/app.ts';
import { startReceiver } from './helpers/receiver.ts';
import { until } from './helpers/until.ts';

// Three consecutive failures open a circuit, which then stays open for the whole file.
const app = startTestApp(
  { ALLOW_PRIVATE_DESTINATIONS: 'true', RETRY_SCHEDULE: '1,1,1,1,1,1', CIRCUIT_BREAKER_THRESHOLD: '3', CIRCUIT_BREAKER_COOLDOWN: '3600' },
  { worker: true },
);

// ---------------------------------------------------------------- plumbing

async function withClient<T>(use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: app.databaseUrl });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}

/** Runs `use` in a transaction that is always rolled back: the data stays as the scenario left it. */
const rolledBack = <T>(use: (client: pg.Client) => Promise<T>) => withClient(async (client) => {
  await client.query('begin');
  try {
    return await use(client);
  } finally {
    await client.query('rollback');
  }
});

async function rows(text: string, values: unknown[] = [], client?: pg.Client): Promise<any[]> {
  if (client) return (await client.query(text, values)).rows;
  return withClient(async (c) => (await c.query(text, values)).rows);
}

/** A receiver on a loopback port; `status` decides each answer from how often this job came. */
async function receiver(status: (seen: number) => number): Promise<string> {
  const r = await startReceiver((arrival) => {
    const n = r.forJob(String(arrival.headers['webhook-id'])).length;
    return { status: status(n), headers: { 'content-type': 'text/plain' }, body: status(n) < 300 ? 'thanks' : 'try again later' };
  });
  return r.at('/hooks');
}

// ---------------------------------------------------------------- the scenario

type Scenario = {
  orgId: string; key: string; appId: string;
  ok: string; flaky: string; down: string; paused: string; doomed: string;
  /** order.created to ok and flaky: succeeds after flaky fails once. */
  shipped: string;
  /** invoice.paid to down and paused, before and after down's circuit opened. */
  blocked: string; blockedLater: string;
  /** user.deleted to doomed, deleted while its delivery was held: discarded, failed. */
  orphaned: string;
};

let scenario: Promise<Scenario> | undefined;
const data = () => (scenario ??= build());

async function build(): Promise<Scenario> {
  const { orgId, key } = await app.createOrg();
  const call = async (method: string, path: string, body?: unknown, expected = [200, 201, 204]) => {
    const res = await app.request(method, path, { key, body });
    if (!expected.includes(res.status)) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };
  const appId = (await call('POST', '/v1/applications', { name: 'Acme Shop', uid: 'acme-shop' })).id as string;
  for (const name of ['order.created', 'invoice.paid', 'user.deleted']) await call('POST', '/v1/event-types', { name });
  await call('POST', '/v1/api-keys', { name: 'reporting', scopes: ['webhooks:read'] });
  const endpoint = async (url: string, eventType: string) =>
    (await call('POST', '/v1/endpoints', { application_id: appId, url, event_types: [eventType] })).id as string;
  const ok = await endpoint(await receiver(() => 200), 'order.created');
  const flaky = await endpoint(await receiver((n) => (n === 1 ? 500 : 200)), 'order.created');
  const down = await endpoint(await receiver(() => 503), 'invoice.paid');
  const paused = await endpoint(await receiver(() => 200), 'invoice.paid');
  const doomed = await endpoint(await receiver(() => 200), 'user.deleted');
  for (const id of [paused, doomed]) await call('PATCH', `/v1/endpoints/${id}`, { status: 'paused' });
  const job = async (eventType: string, payload: object) =>
    (await call('POST', '/v1/webhook-jobs', { application_id: appId, event_type: eventType, event_id: `${eventType}-${Date.now()}`, payload })).id as string;

  const shipped = await job('order.created', { order_id: 'ord_1', total: 4200 });
  const blocked = await job('invoice.paid', { invoice_id: 'in_1' });
  await until('the circuit of the failing endpoint to open', async () =>
    (await rows(`select 1 from endpoints where id = $1 and status = 'disabled'`, [down])).length === 1);
  const blockedLater = await job('invoice.paid', { invoice_id: 'in_2' });
  const orphaned = await job('user.deleted', { user_id: 'usr_1' });
  await until('the paused endpoint to hold its delivery', async () =>
    (await rows(`select 1 from deliveries where job_id = $1 and status = 'held'`, [orphaned])).length === 1);
  await call('DELETE', `/v1/endpoints/${doomed}`);

  await until('every job to settle', async () => {
    const [row] = await rows(`
      select (select status from webhook_jobs where id = $1) as shipped,
             (select status from webhook_jobs where id = $2) as orphaned,
             (select count(*)::int from deliveries where job_id = any($3) and status = 'held') as held,
             (select count(*)::int from deliveries where status in ('pending', 'in_flight')) as moving`,
    [shipped, orphaned, [blocked, blockedLater]]);
    return row.shipped === 'succeeded' && row.orphaned === 'discarded' && row.held === 4 && row.moving === 0;
  });
  return { orgId, key, appId, ok, flaky, down, paused, doomed, shipped, blocked, blockedLater, orphaned };
}

// ---------------------------------------------------------------- the views

test('delivery_backlog: held counts and why, due and scheduled with their age, deliveries being released', async (t) => {
  const s = await data();
  const backlog = async (client?: pg.Client) => new Map((await rows(`
    select endpoint_id, endpoint_status, due::int, scheduled::int, in_flight::int, held::int, held_because, oldest_due_age_seconds
    from delivery_backlog where org_id = $1`, [s.orgId], client)).map((r) => [r.endpoint_id, r]));

  const now = await backlog();
  t.deepEqual([...now.keys()].sort(), [s.ok, s.flaky, s.down, s.paused].sort(), 'one row per live endpoint, the deleted one gone');
  t.like(now.get(s.paused), { endpoint_status: 'paused', due: 0, scheduled: 0, in_flight: 0, held: 2, held_because: 'paused', oldest_due_age_seconds: null });
  t.like(now.get(s.down), { endpoint_status: 'disabled', held: 2, held_because: 'disabled (circuit open)' });
  t.like(now.get(s.ok), { endpoint_status: 'active', due: 0, scheduled: 0, in_flight: 0, held: 0, held_because: null });

  await rolledBack(async (client) => {
    await client.query(`
      update deliveries set status = 'pending',
        next_attempt_at = case when job_id = $2 then now() - interval '30 seconds' else now() + interval '1 hour' end
      where endpoint_id = $1`, [s.paused, s.blocked]);
    // Activating an endpoint by hand: its held deliveries wait for the worker's upkeep.
    await client.query(`update endpoints set status = 'active', disabled_at = null, disabled_reason = null where id = $1`, [s.down]);
    const changed = await backlog(client);
    t.like(changed.get(s.paused), { due: 1, scheduled: 1, held: 0, held_because: null });
    const age = changed.get(s.paused).oldest_due_age_seconds;
    t.true(age >= 29 && age <= 35, `oldest due age ${age}`);
    t.like(changed.get(s.down), { endpoint_status: 'active', held: 2 });
    t.regex(changed.get(s.down).held_because, /^releasing/);
  });
});

test('endpoint_health: the open circuit, its probe countdown and the latest outcomes', async (t) => {
  const s = await data();
  const health = new Map((await rows(`select * from endpoint_health where org_id = $1`, [s.orgId])).map((r) => [r.endpoint_id, r]));
  const [lastDown] = await rows(`select max(attempted_at) as at from delivery_attempts where endpoint_id = $1`, [s.down]);

  const down = health.get(s.down);
  t.like(down, { status: 'disabled', failure_count: 3, last_success_at: null, last_error: 'http_status', last_status_code: 503, cooldown_seconds: 3600 });
  t.truthy(down.disabled_at);
  t.is(down.last_failure_at.getTime(), lastDown.at.getTime());
  t.true(down.seconds_until_probe > 3500 && down.seconds_until_probe <= 3600, `seconds_until_probe ${down.seconds_until_probe}`);

  const ok = health.get(s.ok);
  t.like(ok, { status: 'active', failure_count: 0, success_rate: '100.00', last_failure_at: null, disabled_at: null, cooldown_seconds: null, seconds_until_probe: null });
  t.truthy(ok.last_success_at);

  const flaky = health.get(s.flaky);
  t.is(flaky.success_rate, '50.00');
  t.true(flaky.last_failure_at < flaky.last_success_at, 'the failure came first');
  t.is(health.get(s.paused).last_success_at, null);
  t.false(health.has(s.doomed), 'deleted endpoints are not listed');
});

test('job_timeline tells a job\'s story in order: created, its attempts, completed or discarded', async (t) => {
  const s = await data();
  const timeline = (jobId: string) => rows(`select * from job_timeline where job_id = $1 order by at, seq`, [jobId]);

  const shipped = await timeline(s.shipped);
  const attempts = await rows(`
    select endpoint_id, attempt, status_code, success, error, attempted_at from delivery_attempts where job_id = $1 order by attempted_at, id`, [s.shipped]);
  t.is(attempts.length, 3);
  t.deepEqual(shipped.map((e) => e.kind), ['created', 'attempt', 'attempt', 'attempt', 'completed']);
  t.deepEqual(shipped.map((e) => Number(e.seq)), [1, 2, 3, 4, 5]);
  t.deepEqual(
    shipped.filter((e) => e.kind === 'attempt').map((e) => ({ endpoint_id: e.endpoint_id, attempt: e.attempt, status_code: e.status_code, success: e.success, error: e.error, at: e.at })),
    attempts.map((a) => ({ endpoint_id: a.endpoint_id, attempt: a.attempt, status_code: a.status_code, success: a.success, error: a.error, at: a.attempted_at })),
  );
  t.like(shipped.find((e) => e.endpoint_id === s.flaky && e.attempt === 1), { success: false, status_code: 500, error: 'http_status' });
  t.like(shipped.at(-1), { success: true, endpoint_id: null });
  for (let i = 1; i < shipped.length; i += 1) t.true(shipped[i - 1].at <= shipped[i].at, `event ${i} is not before event ${i - 1}`);

  const orphaned = await timeline(s.orphaned);
  t.deepEqual(orphaned.map((e) => [e.kind, e.error]), [['created', null], ['discarded', 'failed']]);

  const blocked = await timeline(s.blocked);
  t.deepEqual(blocked.map((e) => e.kind), ['created', 'attempt', 'attempt', 'attempt'], 'three failures, then held: no ending');
  t.deepEqual(blocked.slice(1).map((e) => e.attempt), [1, 2, 3]);
});

test('delivery_queue_depth agrees with counts of its own, and sees due and scheduled work', async (t) => {
  const s = await data();
  const depth = `
    select v.due::int, v.scheduled::int, v.in_flight::int, v.held::int, v.oldest_due_age_seconds, v.queue_messages::int,
           (select count(*)::int from deliveries where status = 'held') as held_counted,
           (select count(*)::int from deliveries where status = 'pending' and next_attempt_at <= now()) as due_counted,
           (select count(*)::int from deliveries where status = 'pending' and next_attempt_at > now()) as scheduled_counted,
           (select count(*)::int from pgboss.job where name = 'deliveries' and state in ('created', 'retry')) as messages_counted
    from delivery_queue_depth v`;

  const [now] = await rows(depth);
  t.like(now, { due: 0, scheduled: 0, in_flight: 0, held: 4, oldest_due_age_seconds: 0, queue_messages: 0 });
  t.is(now.held, now.held_counted);
  t.is(now.queue_messages, now.messages_counted);

  await rolledBack(async (client) => {
    await client.query(`
      update deliveries set status = 'pending',
        next_attempt_at = case when job_id = $2 then now() - interval '90 seconds' else now() + interval '1 hour' end
      where endpoint_id = $1`, [s.paused, s.blocked]);
    await client.query(`update deliveries set status = 'in_flight' where job_id = $1 and endpoint_id = $2`, [s.shipped, s.ok]);
    const [changed] = await rows(depth, [], client);
    t.like(changed, { due: 1, scheduled: 1, in_flight: 1, held: 2 });
    t.is(changed.due, changed.due_counted);
    t.is(changed.scheduled, changed.scheduled_counted);
    t.true(changed.oldest_due_age_seconds >= 89 && changed.oldest_due_age_seconds <= 95, `oldest due age ${changed.oldest_due_age_seconds}`);
  });
});

test('stuck_jobs lists an attempt in flight past its timeout and margin, not a fresh one', async (t) => {
  const s = await data();
  t.deepEqual(await rows(`select * from stuck_jobs where org_id = $1`, [s.orgId]), []);
  await rolledBack(async (client) => {
    // A worker claimed a delivery ten minutes ago and died; another claim is ten seconds old
    // (its last_attempt_at, the attempt before, is older still).
    await client.query(`update deliveries set status = 'in_flight', updated_at = now() - interval '10 minutes' where job_id = $1 and endpoint_id = $2`, [s.blockedLater, s.paused]);
    await client.query(`update deliveries set status = 'in_flight', updated_at = now() - interval '10 seconds' where job_id = $1 and endpoint_id = $2`, [s.shipped, s.flaky]);
    const jobs = await rows(`select j.status, j.current_status from webhook_jobs j where j.id = any($1) order by j.id`, [[s.blockedLater, s.shipped].sort()], client);
    t.deepEqual(jobs.map((j) => j.current_status), ['executing', 'executing']);
    const stuck = await rows(`select * from stuck_jobs where org_id = $1`, [s.orgId], client);
    t.is(stuck.length, 1);
    t.like(stuck[0], { job_id: s.blockedLater, application_id: s.appId, endpoint_id: s.paused, attempt: 1 });
    t.true(stuck[0].stuck_for_seconds >= 599 && stuck[0].stuck_for_seconds <= 605, `stuck for ${stuck[0].stuck_for_seconds}`);
  });
});

// ---------------------------------------------------------------- docs/sql.md

const guide = readFile(new URL('../docs/sql.md', import.meta.url), 'utf8');

/** Every ```sql block with the heading it stands under. */
async function guideQueries(): Promise<Array<{ heading: string; text: string }>> {
  const markdown = await guide;
  const found: Array<{ heading: string; text: string }> = [];
  let heading = '';
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i += 1) {
    const line = lines[i]!;
    if (line.startsWith('#')) heading = line.replace(/^#+\s*/, '');
    if (line.trim() !== '```sql') continue;
    const body: string[] = [];
    for (i += 1; i < lines.length && lines[i]!.trim() !== '```'; i += 1) body.push(lines[i]!);
    found.push({ heading, text: body.join('\n') });
  }
  return found;
}

test("the guide's sums of delivery_backlog for one organization are GET /v1/summary's deliveries", async (t) => {
  // delivery_queue_depth counts the whole service (a probe compared it with the summary); the
  // guide gives the query that reads what the summary answers.
  const s = await data();
  const query = (await guideQueries()).filter((q) => q.heading === 'How deep is the delivery queue right now?')
    .map((q) => q.text).find((text) => text.includes(':\'org_id\''));
  if (!query) return t.fail('no query of one organization under "How deep is the delivery queue right now?"');
  await withClient(async (client) => {
    const [sums] = (await client.query(query.replace(":'org_id'", client.escapeLiteral(s.orgId)))).rows;
    const summary = await app.request('GET', '/v1/summary', { key: s.key });
    t.is(summary.status, 200);
    t.deepEqual(
      { pending: Number(sums.pending), in_flight: Number(sums.in_flight), held: Number(sums.held) },
      summary.body.deliveries,
    );
    t.true(Number(sums.held) > 0, 'the scenario holds deliveries: the comparison is not of zeros');
  });
});

test('every query of docs/sql.md answers a question and runs against real data', async (t) => {
  const s = await data();
  const queries = await guideQueries();
  t.true(queries.length >= 12, `only ${queries.length} queries`);
  const values: Record<string, string> = { job_id: s.shipped, application_id: s.appId, endpoint_id: s.down, org_id: s.orgId };
  await withClient(async (client) => {
    for (const { heading, text } of queries) {
      t.regex(heading, /\?$/, `the query under "${heading}" is not introduced by a question`);
      const names = [...text.matchAll(/:'(\w+)'/g)].map((m) => m[1]!);
      const unknown = names.filter((name) => !(name in values));
      t.deepEqual(unknown, [], `"${heading}" uses placeholders the guide does not define`);
      const sql = text.replace(/:'(\w+)'/g, (_, name: string) => client.escapeLiteral(values[name] ?? ''));
      await client.query('begin');
      try {
        const result = await client.query(sql);
        // A question about one of our ids must find something in data made to answer it.
        if (names.length > 0) t.true((result.rows?.length ?? 0) > 0, `"${heading}" found nothing for ${JSON.stringify(values)}`);
      } catch (error) {
        t.fail(`"${heading}": ${(error as Error).message}\n${sql}`);
      } finally {
        await client.query('rollback');
      }
    }
  });
});

test('docs/sql.md documents every view and the API way to release held deliveries', async (t) => {
  const markdown = await guide;
  const views = (await rows(`select viewname from pg_views where schemaname = 'public'`)).map((r) => r.viewname as string);
  t.true(views.length >= 5);
  for (const view of views) t.true(markdown.includes(`\`${view}\``), `${view} is not in docs/sql.md`);
  t.true(markdown.includes('reset-circuit'));
  t.regex(markdown, /"status":\s*"active"/);
});

// ---------------------------------------------------------------- catalog

test('every table, column, view and function of schema public has a comment', async (t) => {
  const relations = await rows(`
    select c.relname, c.relkind, obj_description(c.oid, 'pg_class') is not null as commented
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = 'public' and c.relkind in ('r', 'p', 'v', 'm', 'f')`);
  const columns = await rows(`
    select c.relname || '.' || a.attname as name
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
    where n.nspname = 'public' and c.relkind in ('r', 'p', 'v', 'm', 'f') and col_description(c.oid, a.attnum) is null`);
  const functions = await rows(`
    select p.oid::regprocedure::text as name, obj_description(p.oid, 'pg_proc') is not null as commented
    from pg_proc p join pg_namespace n on n.oid = p.pronamespace
    where n.nspname = 'public'
      and not exists (select 1 from pg_depend d where d.classid = 'pg_proc'::regclass and d.objid = p.oid and d.deptype = 'e')`);

  // The check must see the objects it vouches for.
  const names = relations.map((r) => r.relname);
  for (const name of ['deliveries', 'endpoints', 'pgmigrations', 'sql_definitions', 'job_timeline', 'stuck_jobs']) t.true(names.includes(name), name);
  t.true(functions.some((f) => f.name === 'claim_deliveries(jsonb,integer,integer,bigint,integer,jsonb)'));
  t.true(functions.some((f) => f.name === 'delivery_queue_messages()'));

  t.deepEqual(relations.filter((r) => !r.commented).map((r) => r.relname), [], 'tables and views without a comment');
  t.deepEqual(columns.map((c) => c.name), [], 'columns without a comment');
  t.deepEqual(functions.filter((f) => !f.commented).map((f) => f.name), [], 'functions without a comment');
});

test('invariants are CHECK constraints named <table>_<columns>_check', async (t) => {
  const checks = await rows(`
    select c.relname as table, k.conname as name
    from pg_constraint k join pg_class c on c.oid = k.conrelid join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = 'public' and k.contype = 'c'`);
  t.true(checks.length > 40);
  t.deepEqual(checks.filter((k) => !(k.name.startsWith(`${k.table}_`) && k.name.endsWith('_check'))).map((k) => k.name), []);
  const names = checks.map((k) => k.name);
  for (const name of ['deliveries_next_attempt_at_check', 'webhook_jobs_completed_at_check', 'webhook_jobs_discarded_at_check']) {
    t.true(names.includes(name), name);
  }
  // And they hold: a pending delivery without a due time is refused by name.
  const s = await data();
  const error = await t.throwsAsync(rolledBack((client) =>
    client.query(`update deliveries set status = 'pending', next_attempt_at = null where job_id = $1`, [s.blocked])));
  t.is((error as { constraint?: string } | undefined)?.constraint, 'deliveries_next_attempt_at_check');
});
