// Claiming operational deliveries (every 200 ms, on any of the worker's connections) leaves the
// session as it found it: no temporary table. A session's first temporary table creates its
// pg_temp schema in the catalog, and PostgreSQL resets every session's cached plans on any
// change to pg_namespace: in a new database the worker's claims and recordings planned all
// their statements again each time one of its connections did it.
import test, { type ExecutionContext } from 'ava';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { sql } from 'slonik';
import { z } from 'zod';
import { SQL_DIR } from '../../src/db/migrate.ts';
import { claimOperationalDeliveries, recordOperationalAttempts, type OperationalAttemptResult } from '../../src/db/operational-deliveries.ts';
import { startTestApp } from '../helpers/app.ts';

const app = startTestApp();

// Serial, as every test here that claims: a claim takes every due operational delivery of the
// database, whichever test's. This one's took the next test's endpoint.created when they ran
// together (a full run: "endpoint.created was claimed" failed).
test.serial('claiming operational deliveries makes no temporary table, which would reset every session\'s cached plans', async (t) => {
  const db = new pg.Client({ connectionString: app.databaseUrl });
  await db.connect();
  t.teardown(() => db.end());
  await db.query('select * from claim_operational_deliveries(10, 60)');
  const { rows } = await db.query<{ none: boolean }>('select pg_my_temp_schema() = 0 as none');
  t.true(rows[0]!.none, 'this session set up a temporary schema');
});

test('no database function makes a temporary table (docs/deploy.md promises none, behind PgBouncer too)', async (t) => {
  const files = (await readdir(SQL_DIR)).filter((name) => name.endsWith('.sql'));
  t.true(files.length > 10, 'the sql/ files were found');
  for (const name of files) {
    const text = (await readFile(path.join(SQL_DIR, name), 'utf8')).replace(/--.*$/gm, ''); // comments may say the words
    t.notRegex(text, /create\s+(global\s+|local\s+)?(temp|temporary)\s+table/i, name);
  }
});

test.serial('an operational outcome is recorded only on the delivery of the event it was claimed for (a database gone back to a backup)', async (t) => {
  // As record_attempts (test/record-outcomes.test.ts): operational delivery ids are a sequence too.
  const { key } = await app.createOrg();
  const ops = await app.request('POST', '/v1/operational-webhooks/endpoints', { key, body: { url: 'https://ops.example.com/hookline' } });
  t.is(ops.status, 201, JSON.stringify(ops.body));
  const application = await app.request('POST', '/v1/applications', { key, body: { name: 'Globex' } });
  await app.request('POST', '/v1/event-types', { key, body: { name: 'ops.checked' } });
  t.is((await app.request('POST', '/v1/endpoints', { key, body: { application_id: application.body.id, url: 'https://hooks.example.com/in', event_types: ['ops.checked'] } })).status, 201);
  const claims = (await claimOperationalDeliveries(app.pool, 100, 60)).filter((c) => c.endpoint_id === ops.body.id);
  t.true(claims.length >= 1, 'endpoint.created was claimed');
  const claim = claims[0]!;
  const outcome = (eventId: string | undefined): OperationalAttemptResult => ({
    delivery_id: claim.delivery_id, ...(eventId === undefined ? {} : { event_id: eventId }), attempt: claim.attempt,
    status_code: 200, response_body: 'another tenant\'s answer', latency_ms: 3, attempted_at: new Date().toISOString(), success: true, error: null, retry_at: null,
  });
  const attempts = async () => (await app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from operational_attempts where delivery_id = ${claim.delivery_id}`));
  await recordOperationalAttempts(app.pool, [outcome('opev_3MpOtherEventOfAnotherTenant')], 5, 30);
  t.is(await attempts(), 0, 'not on a delivery of another event');
  await recordOperationalAttempts(app.pool, [outcome(claim.event_id)], 5, 30);
  t.is(await attempts(), 1);
});

test.serial('failures of attempts in flight when an operational circuit opens are not failed probes: the first probe comes after the cooldown, and only its failure doubles it', async (t) => {
  // A probe: 25 quick changes, 16 failed attempts in flight at once against threshold 10 and a
  // 30 s cooldown; each failure recorded after the circuit opened doubled the cooldown, to 32
  // minutes (tenant endpoints count only their probe's failure: deliveries.is_probe).
  const { key } = await app.createOrg();
  const ops = await app.request('POST', '/v1/operational-webhooks/endpoints', { key, body: { url: 'https://ops.example.com/down' } });
  t.is(ops.status, 201, JSON.stringify(ops.body));
  const application = await app.request('POST', '/v1/applications', { key, body: { name: 'Initech' } });
  await app.request('POST', '/v1/event-types', { key, body: { name: 'ops.burst' } });
  for (let i = 0; i < 5; i += 1) {
    t.is((await app.request('POST', '/v1/endpoints', { key, body: { application_id: application.body.id, url: `https://hooks.example.com/${i}`, event_types: ['ops.burst'] } })).status, 201);
  }
  const claims = (await claimOperationalDeliveries(app.pool, 100, 60)).filter((c) => c.endpoint_id === ops.body.id);
  t.is(claims.length, 5, 'five endpoint.created in flight at once');
  const failed = (claim: (typeof claims)[number], at: Date): OperationalAttemptResult => ({
    delivery_id: claim.delivery_id, event_id: claim.event_id, attempt: claim.attempt, status_code: 503, response_body: 'down',
    latency_ms: 3, attempted_at: at.toISOString(), success: false, error: 'http_status', retry_at: new Date(Date.now() + 3_600_000).toISOString(),
  });
  const circuit = async () => app.pool.one(sql.type(z.object({ status: z.string(), failure_count: z.number(), cooldown_seconds: z.number().nullable(), probe_in: z.number().nullable() }))`
    select status, failure_count, cooldown_seconds,
           round(extract(epoch from next_probe_at - disabled_at))::int as probe_in
    from operational_endpoints where id = ${ops.body.id}`);
  const started = new Date();
  await recordOperationalAttempts(app.pool, claims.map((claim) => failed(claim, started)), 3, 30);
  t.like(await circuit(), { status: 'disabled', failure_count: 5, cooldown_seconds: 30, probe_in: 30 });

  // The cooldown over: one probe, and its failure doubles the cooldown.
  await app.pool.query(sql.unsafe`update operational_endpoints set next_probe_at = now(), disabled_at = now() where id = ${ops.body.id}`);
  await app.pool.query(sql.unsafe`update operational_deliveries set next_attempt_at = now() where endpoint_id = ${ops.body.id}`);
  const probes = (await claimOperationalDeliveries(app.pool, 100, 60)).filter((c) => c.endpoint_id === ops.body.id);
  t.is(probes.length, 1, 'one probe');
  await recordOperationalAttempts(app.pool, [failed(probes[0]!, new Date())], 3, 30);
  t.like(await circuit(), { status: 'disabled', failure_count: 6, cooldown_seconds: 60 });
});

/**
 * An organization with an operational endpoint (every event type) and `changes` endpoints
 * created: as many `endpoint.created` deliveries due to it.
 */
async function opsOrganization(t: ExecutionContext, name: string, changes: number) {
  const { key, orgId } = await app.createOrg();
  const ops = await app.request('POST', '/v1/operational-webhooks/endpoints', { key, body: { url: `https://ops.example.com/${name}` } });
  t.is(ops.status, 201, JSON.stringify(ops.body));
  const application = await app.request('POST', '/v1/applications', { key, body: { name } });
  await app.request('POST', '/v1/event-types', { key, body: { name: 'ops.made' } });
  for (let i = 0; i < changes; i += 1) {
    t.is((await app.request('POST', '/v1/endpoints', { key, body: { application_id: application.body.id, url: `https://hooks.example.com/${name}/${i}`, event_types: ['ops.made'] } })).status, 201);
  }
  return { orgId, endpointId: ops.body.id as string };
}

// Serial, as the test above: its claims take every due operational delivery of the database.
test.serial('a claim gives an organization no more than its share less what it holds, probes included; the two-argument claim of older workers has no share', async (t) => {
  const a = await opsOrganization(t, 'a', 6);
  const b = await opsOrganization(t, 'b', 1);
  const of = (claims: ReadonlyArray<{ endpoint_id: string }>, org: { endpointId: string }) => claims.filter((c) => c.endpoint_id === org.endpointId).length;

  const first = await claimOperationalDeliveries(app.pool, 100, 60, { perOrganization: 3, holding: { [a.orgId]: 1 } });
  t.is(of(first, a), 2, 'A: its share of 3 less the 1 it holds');
  t.is(of(first, b), 1, 'B is not held back by A');
  t.deepEqual(first.filter((c) => c.endpoint_id !== a.endpointId && c.endpoint_id !== b.endpointId), [], 'nothing else was due');
  t.deepEqual(first.map((c) => c.org_id).sort(), [a.orgId, a.orgId, b.orgId].sort(), 'each claim names its organization');
  t.is(of(await claimOperationalDeliveries(app.pool, 100, 60, { perOrganization: 3, holding: { [a.orgId]: 3 } }), a), 0, 'A at its share: passed over');

  // A's endpoint disabled, its cooldown over: its probe counts in the share too.
  await app.pool.query(sql.unsafe`update operational_endpoints set status = 'disabled', disabled_at = now(), next_probe_at = now() where id = ${a.endpointId}`);
  t.is(of(await claimOperationalDeliveries(app.pool, 100, 60, { perOrganization: 3, holding: { [a.orgId]: 3 } }), a), 0, 'no probe at the share');
  t.is(of(await claimOperationalDeliveries(app.pool, 100, 60, { perOrganization: 3, holding: { [a.orgId]: 2 } }), a), 1, 'one probe within it');

  // Workers started before the share call the claim with two arguments: everything due, no share.
  await app.pool.query(sql.unsafe`update operational_endpoints set status = 'active', disabled_at = null, next_probe_at = null where id = ${a.endpointId}`);
  const db = new pg.Client({ connectionString: app.databaseUrl });
  await db.connect();
  t.teardown(() => db.end());
  const { rows } = await db.query<{ endpoint_id: string }>('select * from claim_operational_deliveries(100, 60)');
  t.is(of(rows, a), 3, 'the rest of A\'s six');
  t.false('org_id' in rows[0]!, 'the older claim\'s columns');
});

// Serial, as the tests above: its claims take every due operational delivery of the database.
test.serial('a claim never gives more than its limit, probes included (more left the worker\'s loop spinning on a core)', async (t) => {
  const probed = (await opsOrganization(t, 'probed', 1)).endpointId;
  await opsOrganization(t, 'busy', 3);
  // The first endpoint disabled, its cooldown over: a probe is due beside the three deliveries.
  await app.pool.query(sql.unsafe`update operational_endpoints set status = 'disabled', disabled_at = now(), next_probe_at = now() where id = ${probed}`);
  const share = { perOrganization: 10, holding: {} };
  const first = await claimOperationalDeliveries(app.pool, 3, 60, share);
  t.is(first.length, 3, 'the three deliveries, and no probe past the limit');
  const second = await claimOperationalDeliveries(app.pool, 3, 60, share);
  t.deepEqual(second.map((c) => c.endpoint_id), [probed], 'the probe, in the next claim');
});
