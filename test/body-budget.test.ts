// The web's request body budget (src/api/middleware/body-budget.ts): a body is reserved before
// it is read, an organization's bodies past its share wait behind its own while the others'
// pass, the process's past its total wait for room, and a wait past the acquire timeout is a
// 503 that changes nothing. One tenant's 283 KB jobs at 55 a second took `npm start` past its
// heap without it. Bodies are held open by raw sockets that send their headers and part of
// their body; the gauge hookline_request_body_bytes tells when the server holds them.
import net from 'node:net';
import test, { type ExecutionContext } from 'ava';
import pg from 'pg';
import { sql } from 'slonik';
import { z } from 'zod';
import { BODY_LIMIT_BYTES } from '../src/api/middleware/json-body.ts';
import { startTestApp, type TestApp } from './helpers/app.ts';
import { scrape, valueOf } from './helpers/metrics.ts';

const MiB = 1024 * 1024;
// Two bodies of the limit an organization, three in all; a wait of 1.5 s before the 503.
const app = startTestApp({ DATABASE_ACQUIRE_TIMEOUT_MS: '1500' }, { bodyBudget: { totalBytes: 3 * MiB, perOrganizationBytes: 2 * MiB } });

async function metric(on: TestApp, name: string): Promise<number> {
  const value = valueOf((await scrape(`${on.baseUrl}/metrics`)).exposition, name);
  if (value === undefined) throw new Error(`no ${name} in /metrics`);
  return value;
}

/** Until the gauge reads `bytes` (the server reserved, or gave back, what the test expects). */
async function heldBecomes(t: ExecutionContext, on: TestApp, bytes: number): Promise<void> {
  let held = -1;
  for (let i = 0; i < 200 && held !== bytes; i++) {
    held = await metric(on, 'hookline_request_body_bytes');
    if (held !== bytes) await new Promise((resolve) => setTimeout(resolve, 25));
  }
  t.is(held, bytes, 'bytes of request bodies the server holds');
}

type Held = { finish(rest?: string): Promise<string>; drop(): void };

/** A POST whose headers and first bytes are sent, its body left unfinished until finish(). */
function holdBody(on: TestApp, key: string, path: string, headers: Record<string, string>, first: string): Held {
  const socket = net.connect(Number(new URL(on.baseUrl).port), '127.0.0.1');
  const received: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => received.push(chunk));
  socket.on('error', () => {});
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  const lines = Object.entries({ host: 'localhost', authorization: `Bearer ${key}`, 'content-type': 'application/json', connection: 'close', ...headers });
  socket.write(`POST ${path} HTTP/1.1\r\n${lines.map(([name, value]) => `${name}: ${value}\r\n`).join('')}\r\n${first}`);
  return {
    async finish(rest = '') {
      socket.write(rest);
      await closed;
      return Buffer.concat(received).toString('latin1').split('\r\n')[0] ?? '';
    },
    drop: () => socket.destroy(),
  };
}

/** A body of the limit, announced and started: the largest reservation one request makes. */
const holdLargest = (on: TestApp, key: string) =>
  holdBody(on, key, '/v1/applications', { 'content-length': String(BODY_LIMIT_BYTES) }, '{"name":"');

const applications = (on: TestApp, orgId: string) =>
  on.pool.oneFirst(sql.type(z.object({ n: z.number() }))`select count(*)::int as n from applications where org_id = ${orgId}`);

test.serial('an organization past its share waits behind its own bodies while another organization\'s pass; the wait ends when one is done', async (t) => {
  const a = await app.createOrg();
  const b = await app.createOrg();
  const waitsBefore = await metric(app, 'hookline_request_body_waits_total');
  const held = [holdLargest(app, a.key), holdLargest(app, a.key)];
  t.teardown(() => held.forEach((h) => h.drop()));
  await heldBecomes(t, app, 2 * MiB);

  let answered = false;
  const waiting = app.request('POST', '/v1/applications', { key: a.key, body: { name: 'third of A' } }).finally(() => { answered = true; });
  const other = await app.request('POST', '/v1/applications', { key: b.key, body: { name: 'of B' } });
  t.is(other.status, 201, 'another organization is not held up');
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.false(answered, 'A\'s third body waits for room in A\'s share');
  t.is(await metric(app, 'hookline_request_body_waits_total'), waitsBefore + 1);

  held[0]!.drop(); // a client gone gives its reservation back
  const third = await waiting;
  t.is(third.status, 201, JSON.stringify(third.body));
  t.is(await applications(app, a.orgId), 1);
  // A body finished and answered: its reservation is given back too.
  const rest = `${'x'.repeat(BODY_LIMIT_BYTES - '{"name":"'.length - 2)}"}`;
  t.regex(await held[1]!.finish(rest), /^HTTP\/1\.1 400 /, 'a name of a megabyte is refused');
  await heldBecomes(t, app, 0);
});

test.serial('a body that fits its share but waits behind its organization\'s own does not hold up another organization', async (t) => {
  // A probe: a tenant held 8 of its 8.4 MB, one more large body of it waited for its share, and
  // its small jobs, which fit the share, waited behind that one. Counted as waiting for the
  // process's room, they made every other organization's bodies wait too: 5 s, then 503.
  const a = await app.createOrg();
  const b = await app.createOrg();
  const almost = BODY_LIMIT_BYTES - 64 * 1024;
  const held = [holdLargest(app, a.key), holdBody(app, a.key, '/v1/applications', { 'content-length': String(almost) }, '{"name":"')];
  t.teardown(() => held.forEach((h) => h.drop()));
  await heldBecomes(t, app, BODY_LIMIT_BYTES + almost);
  const waitsBefore = await metric(app, 'hookline_request_body_waits_total');
  held.push(holdLargest(app, a.key)); // past A's share: waits
  for (let i = 0; i < 200 && (await metric(app, 'hookline_request_body_waits_total')) < waitsBefore + 1; i++) await new Promise((resolve) => setTimeout(resolve, 25));
  const small = app.request('POST', '/v1/applications', { key: a.key, body: { name: 'small of A' } }); // fits A's share, behind A's
  for (let i = 0; i < 200 && (await metric(app, 'hookline_request_body_waits_total')) < waitsBefore + 2; i++) await new Promise((resolve) => setTimeout(resolve, 25));
  t.is(await metric(app, 'hookline_request_body_waits_total'), waitsBefore + 2, 'both of A\'s wait');

  const other = await app.request('POST', '/v1/applications', { key: b.key, body: { name: 'of B' } });
  t.is(other.status, 201, JSON.stringify(other.body));
  t.is(await metric(app, 'hookline_request_body_waits_total'), waitsBefore + 2, 'B did not wait');

  held[0]!.drop(); // A's third large body is let in, then its small one
  t.is((await small).status, 201);
  held.forEach((h) => h.drop());
  await heldBecomes(t, app, 0);
});

test.serial('a wait past the acquire timeout is a 503 with Retry-After that creates nothing, worded for the organization or for the process', async (t) => {
  const a = await app.createOrg();
  const b = await app.createOrg();
  const c = await app.createOrg();
  const held = [holdLargest(app, a.key), holdLargest(app, a.key)];
  t.teardown(() => held.forEach((h) => h.drop()));
  await heldBecomes(t, app, 2 * MiB);

  const own = await app.request('POST', '/v1/applications', { key: a.key, body: { name: 'past A\'s share' } });
  t.is(own.status, 503);
  t.is(own.headers.get('retry-after'), '5');
  t.deepEqual(own.body, { error: { code: 'service_unavailable', message: 'This organization\'s earlier requests with bodies are still being read or processed; retry after 5 s.' } });

  held.push(holdLargest(app, b.key)); // the process's 3 MiB
  await heldBecomes(t, app, 3 * MiB);
  const busy = await app.request('POST', '/v1/applications', { key: c.key, body: { name: 'no room' } });
  t.is(busy.status, 503);
  t.deepEqual(busy.body, { error: { code: 'service_unavailable', message: 'The service is busy: this process holds as many request bodies as it can; retry after 5 s.' } });
  t.is(await applications(app, a.orgId), 0);
  t.is(await applications(app, c.orgId), 0);
  // Requests without a body are not held: C reads while every byte of the budget is taken.
  t.is((await app.request('GET', '/v1/applications', { key: c.key })).status, 200);

  held.forEach((h) => h.drop());
  await heldBecomes(t, app, 0);
  t.is((await app.request('POST', '/v1/applications', { key: c.key, body: { name: 'room again' } })).status, 201);
});

test.serial('a chunked body reserves the limit until it is read, then only its bytes while it is processed', async (t) => {
  const a = await app.createOrg();
  const chunked = holdBody(app, a.key, '/v1/applications', { 'transfer-encoding': 'chunked' }, '4\r\n{"na\r\n');
  t.teardown(() => chunked.drop());
  await heldBecomes(t, app, BODY_LIMIT_BYTES);

  // The insert waits behind a lock on applications: the body is read and parsed by then.
  const locker = new pg.Client({ connectionString: app.databaseUrl });
  await locker.connect();
  t.teardown(() => locker.end());
  await locker.query('begin');
  await locker.query('lock table applications in exclusive mode');
  const rest = 'me":"chunked"}';
  const answer = chunked.finish(`${rest.length.toString(16)}\r\n${rest}\r\n0\r\n\r\n`);
  await heldBecomes(t, app, 4 + rest.length);
  await locker.query('commit');
  t.regex(await answer, /^HTTP\/1\.1 201 /);
  await heldBecomes(t, app, 0);
});
