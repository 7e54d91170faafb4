// The roles of src/main.ts and the admin CLI as real processes against a real database.
import net from 'node:net';
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { makePool } from '../src/db/pool.ts';
import { createTestDatabase } from './helpers/database.ts';
import { runScript, startScript, STARTUP_TIMEOUT_MS, type Started } from './helpers/process.ts';

const databases: Array<() => Promise<void>> = [];
test.after.always(async () => {
  for (const drop of databases) await drop();
});

async function database(options: { empty?: boolean } = {}): Promise<string> {
  const db = await createTestDatabase(options);
  databases.push(db.drop);
  return db.url;
}

/**
 * A started server is killed when its test ends, however it ends: a test that failed while
 * the process ran would otherwise leave it holding this file's worker open ("failed to exit").
 */
function stopAtTeardown(t: ExecutionContext, server: Started): void {
  t.teardown(() => {
    if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
  });
}

async function createOrg(databaseUrl: string) {
  const result = await runScript('src/cli/admin.ts', ['create-org', '--name', 'Proc'], { DATABASE_URL: databaseUrl });
  return { ...result, json: result.code === 0 ? JSON.parse(result.stdout) : null };
}

test('release applies migrations and sql/ definitions to an empty database; a second run changes nothing', async (t) => {
  const url = await database({ empty: true });
  const pool = await makePool(url, { acquireTimeoutMs: 60_000 }); // a busy machine is not an outage
  const appliedAt = () => pool.oneFirst(sql.type(z.object({ at: z.string() }))`select applied_at as at from sql_definitions`);
  try {
    const first = await runScript('src/main.ts', ['release'], { DATABASE_URL: url });
    t.is(first.code, 0, first.stderr + first.stdout);
    const firstApplied = await appliedAt();
    const second = await runScript('src/main.ts', ['release'], { DATABASE_URL: url });
    t.is(second.code, 0, second.stderr + second.stdout);
    // Unchanged definitions are not re-applied: replacing triggers under running workers deadlocks.
    t.is(await appliedAt(), firstApplied);
    const tables = await pool.anyFirst(sql.type(z.object({ t: z.string() }))`
      select table_name as t from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE' order by 1`);
    t.deepEqual(tables, [
      'api_keys', 'application_success_windows', 'applications', 'deliveries', 'delivery_attempts', 'endpoint_attempt_stats',
      'endpoint_event_types', 'endpoint_recoveries', 'endpoint_send_slots', 'endpoint_success_windows', 'endpoints', 'event_types', 'operational_attempts', 'operational_deliveries',
      'operational_endpoints', 'operational_events', 'organizations', 'pgmigrations', 'portal_tokens', 'rate_limit_counters', 'sql_definitions',
      'webhook_job_keys', 'webhook_jobs',
    ]);
    const queueSchema = await pool.exists(sql.unsafe`select 1 from pgboss.queue where name = 'deliveries'`);
    t.true(queueSchema, 'the release step also prepares the delivery queue');
    const trigger = await pool.exists(sql.unsafe`select 1 from pg_trigger where tgname = 'organizations_set_updated_at'`);
    t.true(trigger);
  } finally {
    await pool.end();
  }
});

test('a bad configuration value stops the process with a message naming the variable', async (t) => {
  const result = await runScript('src/main.ts', ['web'], { DATABASE_URL: 'postgres://x@127.0.0.1:1/x', RETRY_SCHEDULE: '1,2' });
  t.is(result.code, 1);
  t.regex(result.stderr, /RETRY_SCHEDULE/);
  const port = await runScript('src/main.ts', ['web'], { PORT: 'http' });
  t.is(port.code, 1);
  t.regex(port.stderr, /PORT/);
});

test('an unknown role is a usage error', async (t) => {
  const result = await runScript('src/main.ts', ['cron'], {});
  t.is(result.code, 2);
  t.regex(result.stderr, /usage/);
});

test('admin create-org prints one JSON object whose key works', async (t) => {
  const url = await database();
  const result = await createOrg(url);
  t.is(result.code, 0, result.stderr);
  t.is(result.stdout.trim().split('\n').length, 1);
  t.deepEqual(Object.keys(result.json).sort(), ['api_key', 'org_id']);
  t.regex(result.json.org_id, /^org_[0-9A-Za-z]{27}$/);
  t.is(result.json.api_key.org_id, result.json.org_id);
  t.regex(result.json.api_key.key, /^sk_live_[0-9A-Za-z]{32}$/);
  t.deepEqual(result.json.api_key.scopes, ['*']);
  const testOrg = await runScript('src/cli/admin.ts', ['create-org', '--name', 'T', '--environment', 'test'], { DATABASE_URL: url });
  t.is(testOrg.code, 0, testOrg.stderr);
  t.regex(JSON.parse(testOrg.stdout).api_key.key, /^sk_test_/);
});

const badArguments: string[][] = [
  [],
  ['create-org'],
  ['create-org', '--name'],
  ['create-org', '--name', ''],
  ['create-org', '--name', 'A', '--environment', 'prod'],
  ['create-org', '--name', 'A', '--colour', 'red'],
  ['create-org', '--name', 'A', 'extra'],
  ['delete-org', '--name', 'A'],
];

for (const args of badArguments) {
  test(`admin ${JSON.stringify(args)} prints usage on stderr and exits 2`, async (t) => {
    const result = await runScript('src/cli/admin.ts', args, { DATABASE_URL: 'postgres://x@127.0.0.1:1/x' });
    t.is(result.code, 2);
    t.is(result.stdout, '');
    t.regex(result.stderr, /usage: npm run admin -- create-org --name NAME/);
  });
}

test('SIGTERM lets an in-flight request finish, closes pools, exits 0', async (t) => {
  const url = await database();
  const { json } = await createOrg(url);
  t.timeout(STARTUP_TIMEOUT_MS + 60_000); // a start on a busy machine, then the request and the stop
  const server = startScript('src/main.ts', ['all'], { DATABASE_URL: url, PORT: '0' });
  stopAtTeardown(t, server);
  const { port } = await server.waitForLog((line) => line.msg === 'web listening') as { port: number };

  // A request whose body is still on its way when the signal arrives.
  const body = JSON.stringify({ name: 'late' });
  const socket = net.connect(port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  let response = '';
  socket.on('data', (chunk) => {
    response += chunk.toString();
  });
  const closed = new Promise((resolve) => socket.once('close', resolve));
  socket.write(`POST /v1/api-keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${json.api_key.key}\r\n`
    + `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body.slice(0, 5)}`);
  await new Promise((resolve) => setTimeout(resolve, 300));
  server.child.kill('SIGTERM');
  await server.waitForLog((line) => line.msg === 'stopping');

  socket.write(body.slice(5));
  await closed;
  t.regex(response, /^HTTP\/1\.1 201 /);
  t.regex(response, /"name":"late"/);
  const exit = await server.exited;
  t.deepEqual(exit, { code: 0, signal: null });
  t.truthy(await server.waitForLog((line) => line.msg === 'stopped', 1000));

  const pool = await makePool(url, { maximumPoolSize: 1, acquireTimeoutMs: 60_000 });
  try {
    const names = await pool.anyFirst(sql.type(z.object({ name: z.string() }))`select name from api_keys order by created_at`);
    t.deepEqual(names, ['Default key', 'late']);
    // The server's connections are gone: only ours remains on this database. A backend can
    // outlive its client's goodbye by a moment, so give it up to 5 s to leave.
    let connections = -1;
    for (let i = 0; i < 50 && connections !== 0; i += 1) {
      if (i > 0) await new Promise((resolve) => setTimeout(resolve, 100));
      connections = await pool.oneFirst(sql.type(z.object({ n: z.number() }))`
        select count(*)::int as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`);
    }
    t.is(connections, 0);
  } finally {
    await pool.end();
  }
});

test('a tenant\'s schema text never reaches the log as lines of its own: every line of the web\'s output is one JSON object', async (t) => {
  // A probe: Ajv warned of an unknown format on the console, the format's text included, so a
  // format holding newlines wrote a forged JSON log line; a schema of 2,500 unknown formats wrote
  // 5,000 lines per request.
  t.timeout(STARTUP_TIMEOUT_MS + 60_000);
  const url = await database();
  const { json } = await createOrg(url);
  const server = startScript('src/main.ts', ['web'], { DATABASE_URL: url, PORT: '0' });
  stopAtTeardown(t, server);
  const { port } = await server.waitForLog((line) => line.msg === 'web listening') as { port: number };
  const call = async (path: string, body: unknown) => {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, {
      method: 'POST', headers: { authorization: `Bearer ${json.api_key.key}`, 'content-type': 'application/json' }, body: JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() as any };
  };
  const forged = 'x"\n{"level":50,"time":"2026-11-30T22:00:00.000Z","msg":"FORGED"}\n';
  const properties = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`p${i}`, { format: `${forged}${i}` }]));
  const eventType = await call('/v1/event-types', { name: 'forms.sent', schema: { type: 'object', properties: { ...properties, q: { type: 'string' } } } });
  t.is(eventType.status, 201, JSON.stringify(eventType.body));
  const application = await call('/v1/applications', { name: 'Forms' });
  // Payloads checked inline and on a validation thread (one with a problem: every problem collected).
  t.is((await call('/v1/webhook-jobs', { application_id: application.body.id, event_type: 'forms.sent', payload: { p1: 'a' } })).status, 201);
  const refused = await call('/v1/webhook-jobs', { application_id: application.body.id, event_type: 'forms.sent', payload: { p1: 'a', q: 3 } });
  t.is(refused.status, 400, JSON.stringify(refused.body));
  server.child.kill('SIGTERM');
  t.deepEqual(await server.exited, { code: 0, signal: null });

  const lines = server.stdout().split('\n').filter((line) => line !== '');
  const raw = lines.filter((line) => { try { return typeof JSON.parse(line) !== 'object'; } catch { return true; } });
  t.deepEqual(raw, [], 'lines that are not JSON');
  t.false(lines.some((line) => line.includes('FORGED') && !line.includes('\\n')), 'the tenant\'s text only inside a JSON string, if at all');
  t.notRegex(server.stderr(), /unknown format|FORGED/);
});

for (const role of ['web', 'worker']) {
  test(`the ${role} role alone starts and stops on SIGTERM with exit code 0`, async (t) => {
    t.timeout(STARTUP_TIMEOUT_MS + 60_000); // a start on a busy machine, then the stop
    const url = await database();
    const server = startScript('src/main.ts', [role], { DATABASE_URL: url, PORT: '0' });
    stopAtTeardown(t, server);
    await server.waitForLog((line) => line.msg === (role === 'web' ? 'web listening' : 'worker started'));
    await new Promise((resolve) => setTimeout(resolve, 500));
    t.is(server.child.exitCode, null, 'the role stays up until it is told to stop');
    server.child.kill('SIGTERM');
    t.deepEqual(await server.exited, { code: 0, signal: null });
    await server.waitForLog((line) => line.msg === 'stopped', 1000);
    t.is(server.stdout().includes('"msg":"web listening"'), role === 'web');
  });
}
