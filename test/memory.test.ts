// Bounded memory under hostile input (issue 18): the process `npm start` runs (its exact
// command line from package.json, role `all`) takes rounds of the worst hostile requests, and
// its peak resident set (VmHWM in /proc) stays under the `all` role's goal.
import { readFileSync } from 'node:fs';
import test from 'ava';
import { readNodeScript } from '../bench/scripts.ts';
import { createApiKey } from '../src/core/api-keys.ts';
import { insertOrganization } from '../src/db/organizations.ts';
import { makePool } from '../src/db/pool.ts';
import { newId } from '../src/ids.ts';
import { sendBattery } from './helpers/battery.ts';
import { createTestDatabase } from './helpers/database.ts';
import { closeRawAgent, rawRequest } from './helpers/hostile.ts';
import { ROOT, startScript } from './helpers/process.ts';

/** The `all` role's goal (README): the process's peak RSS in MB. */
const ALL_PEAK_MB = 300;
const ROUNDS = 12;

test.after.always(closeRawAgent);

function peakMegabytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = /^VmHWM:\s+(\d+) kB/m.exec(status)?.[1];
  if (!kb) throw new Error('no VmHWM in /proc/<pid>/status');
  return Number(kb) / 1024;
}

test(`npm start's process stays under ${ALL_PEAK_MB} MB peak RSS through rounds of the worst hostile requests`, async (t) => {
  t.timeout(240_000);
  const database = await createTestDatabase();
  t.teardown(database.drop);
  const pool = await makePool(database.url, { maximumPoolSize: 2 });
  t.teardown(() => pool.end());
  const key = await pool.transaction(async (tx) => {
    const org = await insertOrganization(tx, { id: newId('org'), name: 'Memory' });
    return (await createApiKey(tx, { orgId: org.id, environment: 'live', name: 'root', scopes: ['*'], expiresAt: null })).key;
  });

  // `npm start`'s node arguments and settings, read from package.json so the test runs what users run.
  const script = readNodeScript(ROOT, 'start');
  const [first, ...rest] = script.args;
  const started = startScript(first ?? '', rest, {
    ...script.env, DATABASE_URL: database.url, PORT: '0', LOG_LEVEL: 'info', RATE_LIMIT_API_KEYS_PER_HOUR: '1000000', RATE_LIMIT_JOBS_PER_SECOND: '1000000',
  });
  t.teardown(async () => {
    started.child.kill('SIGTERM');
    await started.exited;
  });
  const listening = await started.waitForLog((line) => line.msg === 'web listening', 120_000).catch(async () => {
    throw new Error(`no "web listening" line: ${started.stdout()} ${started.stderr()}`);
  });
  const baseUrl = `http://127.0.0.1:${String(listening.port)}`;

  const json = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const application = JSON.parse((await rawRequest(baseUrl, { method: 'POST', path: '/v1/applications', headers: json, body: '{"name":"memory"}' })).text) as { id: string };
  const eventType = 'memory.items';
  const created = await rawRequest(baseUrl, {
    method: 'POST', path: '/v1/event-types', headers: json,
    body: JSON.stringify({ name: eventType, schema: { type: 'object', properties: { items: { type: 'array', items: { type: 'integer' } } } } }),
  });
  t.is(created.status, 201, created.text);

  const before = peakMegabytes(started.child.pid ?? 0);
  const failures = await sendBattery(baseUrl, { key, applicationId: application.id, eventType }, ROUNDS);
  const health = await rawRequest(baseUrl, { method: 'GET', path: '/health' });
  const peak = peakMegabytes(started.child.pid ?? 0);
  t.log(`VmHWM ${before.toFixed(0)} MB after start, ${peak.toFixed(0)} MB after ${ROUNDS} rounds`);
  t.deepEqual(failures, []);
  t.is(health.status, 200);
  t.true(peak < ALL_PEAK_MB, `peak RSS ${peak.toFixed(0)} MB`);
});
