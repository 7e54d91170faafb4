// The admin CLI's help, list-orgs and create-key, run as real processes against the database of a
// real app; the keys it prints are used over HTTP.
import test from 'ava';
import { sql } from 'slonik';
import pg from 'pg';
import { startTestApp } from './helpers/app.ts';
import { createTestDatabase } from './helpers/database.ts';
import { runScript } from './helpers/process.ts';

const app = startTestApp();
const admin = async (...args: string[]) => {
  const result = await runScript('src/cli/admin.ts', args, { DATABASE_URL: app.databaseUrl });
  return { ...result, json: result.code === 0 && result.stdout ? JSON.parse(result.stdout) : null };
};
const UNREACHABLE = { DATABASE_URL: 'postgres://x@127.0.0.1:1/x' };

for (const args of [['help'], ['--help'], ['-h'], ['create-key', '--help']]) {
  test(`admin ${args.join(' ')} prints every command on stdout and exits 0, without a database`, async (t) => {
    const result = await runScript('src/cli/admin.ts', args, UNREACHABLE);
    t.is(result.code, 0, result.stderr);
    t.is(result.stderr, '');
    for (const command of ['create-org --name NAME', 'list-orgs', 'create-key --org ORG_ID', 'help']) {
      t.true(result.stdout.includes(`npm run admin -- ${command}`), command);
    }
  });
}

const badArguments: string[][] = [
  ['create-key'],
  ['create-key', '--org'],
  ['create-key', '--org', ''],
  ['create-key', '--org', 'org_x', '--environment', 'prod'],
  ['create-key', '--org', 'org_x', '--scopes', 'webhooks:read,webhooks:delete'],
  ['create-key', '--org', 'org_x', '--scopes', ''],
  ['create-key', '--org', 'org_x', '--name', ''],
  ['create-key', '--org', 'org_x', 'extra'],
  ['list-orgs', '--name', 'A'],
];

for (const args of badArguments) {
  test(`admin ${JSON.stringify(args)} prints usage on stderr and exits 2`, async (t) => {
    const result = await runScript('src/cli/admin.ts', args, UNREACHABLE);
    t.is(result.code, 2);
    t.is(result.stdout, '');
    t.regex(result.stderr, /usage: npm run admin -- /);
  });
}

test('list-orgs prints one JSON object listing organizations oldest first, with their key counts', async (t) => {
  const first = await admin('create-org', '--name', 'List One');
  const second = await admin('create-org', '--name', 'List Two');
  await admin('create-key', '--org', second.json.org_id);
  const listed = await admin('list-orgs');
  t.is(listed.code, 0, listed.stderr);
  t.is(listed.stdout.trim().split('\n').length, 1);
  t.deepEqual(Object.keys(listed.json), ['data']);
  const ids = listed.json.data.map((org: { id: string }) => org.id);
  t.true(ids.indexOf(first.json.org_id) < ids.indexOf(second.json.org_id) && ids.indexOf(first.json.org_id) >= 0);
  const two = listed.json.data.find((org: { id: string }) => org.id === second.json.org_id);
  t.deepEqual(Object.keys(two).sort(), ['api_keys', 'created_at', 'id', 'name']);
  t.like(two, { name: 'List Two', api_keys: 2 });
  t.regex(two.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
});

test('create-key gives back access to an organization that lost its only key', async (t) => {
  const created = await admin('create-org', '--name', 'Locked out');
  const orgId = created.json.org_id;
  const old = created.json.api_key;
  t.is((await app.request('DELETE', `/v1/api-keys/${old.id}`, { key: old.key })).status, 200);
  t.is((await app.request('GET', '/v1/api-keys', { key: old.key })).status, 401);

  const result = await admin('create-key', '--org', orgId);
  t.is(result.code, 0, result.stderr);
  t.is(result.stdout.trim().split('\n').length, 1);
  t.deepEqual(Object.keys(result.json).sort(), ['api_key', 'org_id']);
  t.is(result.json.org_id, orgId);
  t.like(result.json.api_key, { org_id: orgId, name: 'Admin key', environment: 'live', scopes: ['*'], expires_at: null });
  t.regex(result.json.api_key.key, /^sk_live_[0-9A-Za-z]{32}$/);
  const listed = await app.request('GET', '/v1/api-keys', { key: result.json.api_key.key });
  t.is(listed.status, 200);
  t.deepEqual(listed.body.data.map((key: { id: string }) => key.id), [result.json.api_key.id]);
});

test('create-key takes an environment, scopes and a name; the scopes hold over HTTP', async (t) => {
  const { json: org } = await admin('create-org', '--name', 'Scoped');
  const result = await admin('create-key', '--org', org.org_id, '--environment', 'test',
    '--scopes', 'webhooks:read, endpoints:read,webhooks:read', '--name', 'dashboard');
  t.is(result.code, 0, result.stderr);
  t.like(result.json.api_key, { environment: 'test', name: 'dashboard', scopes: ['webhooks:read', 'endpoints:read'] });
  t.regex(result.json.api_key.key, /^sk_test_/);
  const key = result.json.api_key.key;
  t.is((await app.request('GET', '/v1/api-keys', { key })).status, 403, 'no api-keys scope');
  t.is((await app.request('POST', '/v1/applications', { key, body: { name: 'x' } })).status, 403, 'no applications scope');
});

test.serial('create-key for an unknown organization exits 1 with a message and creates nothing', async (t) => {
  const before = await app.pool.oneFirst(sql.unsafe`select count(*)::int from api_keys`);
  const result = await admin('create-key', '--org', 'org_0000000000000000000000000000');
  t.is(result.code, 1);
  t.is(result.stdout, '');
  t.regex(result.stderr, /no organization org_0000000000000000000000000000/);
  t.is(await app.pool.oneFirst(sql.unsafe`select count(*)::int from api_keys`), before);
});

test('the admin CLI migrates through DATABASE_DIRECT_URL, as every process does, never through DATABASE_URL (a transaction pooler)', async (t) => {
  // A probe: behind PgBouncer the CLI ran node-pg-migrate's session advisory lock through the
  // pooler; its unlock landed on another server connection, and the lock stayed held, so every
  // later release, admin command and start waited on it for good. Two empty databases tell which
  // URL the migrations used: only the direct one may come out migrated.
  const pooled = await createTestDatabase({ empty: true });
  const direct = await createTestDatabase({ empty: true });
  t.teardown(async () => { await pooled.drop(); await direct.drop(); });
  await runScript('src/cli/admin.ts', ['list-orgs'], { DATABASE_URL: pooled.url, DATABASE_DIRECT_URL: direct.url });
  const migrated = async (url: string) => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      return (await client.query<{ found: boolean }>("select to_regclass('public.pgmigrations') is not null as found")).rows[0]?.found;
    } finally {
      await client.end();
    }
  };
  t.true(await migrated(direct.url), 'migrated through DATABASE_DIRECT_URL');
  t.false(await migrated(pooled.url), 'nothing migrated through DATABASE_URL');
});

test('a database the CLI cannot use is one line on stderr, not an uncaught stack: refused, or a wrong password', async (t) => {
  const wrongPassword = new URL(app.databaseUrl);
  wrongPassword.password = 'not-the-password';
  for (const [url, says] of [
    [UNREACHABLE.DATABASE_URL, /ECONNREFUSED/],
    [wrongPassword.toString(), /password authentication failed .*\(28P01\)/],
  ] as const) {
    const result = await runScript('src/cli/admin.ts', ['list-orgs'], { DATABASE_URL: url, DATABASE_START_TIMEOUT_MS: '1000' });
    t.is(result.code, 1);
    const lines = result.stderr.trim().split('\n');
    t.is(lines.length, 1, result.stderr);
    t.regex(lines[0] ?? '', /^admin: cannot use the database: /);
    t.regex(lines[0] ?? '', says);
  }
});
