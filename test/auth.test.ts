// Authentication and authorization (decisions section 4): every 401 path, the scope table for
// the /v1/api-keys family, the scope helpers over all five families, escalation, environments
// and last_used_at.
import net from 'node:net';
import test, { type ExecutionContext } from 'ava';
import { sql } from 'slonik';
import { accessFor, allows, canGrant, FAMILIES, type Family } from '../src/core/scopes.ts';
import { deleteApiKey, updateApiKey } from '../src/db/api-keys.ts';
import { assertError, startTestApp, type Response } from './helpers/app.ts';
import { session, waitingOn } from './helpers/sessions.ts';

const app = startTestApp();

const ALL_FAMILIES: readonly Family[] = ['webhooks', 'endpoints', 'applications', 'event-types', 'api-keys'];
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

function unknownKey(environment: 'live' | 'test' = 'live'): string {
  let body = '';
  for (let i = 0; i < 32; i += 1) body += BASE62[Math.floor(Math.random() * 62)];
  return `sk_${environment}_${body}`;
}

type CreatedKey = { id: string; key: string; scopes: string[]; environment: string };

/** A new key of the organization of `byKey`, created over the API. */
async function createKey(
  t: ExecutionContext,
  byKey: string,
  body: { name?: string; scopes?: string[]; environment?: 'live' | 'test'; expires_at?: string } = {},
): Promise<CreatedKey> {
  const res = await app.request('POST', '/v1/api-keys', { key: byKey, body: { name: 'helper', ...body } });
  t.is(res.status, 201, JSON.stringify(res.body));
  if (res.status !== 201) throw new Error(`could not create a key: ${JSON.stringify(res.body)}`);
  return res.body;
}

async function getKey(byKey: string, id: string): Promise<Response> {
  return app.request('GET', `/v1/api-keys/${id}`, { key: byKey });
}

async function lastUsedAt(t: ExecutionContext, byKey: string, id: string): Promise<string | null> {
  const res = await getKey(byKey, id);
  t.is(res.status, 200, JSON.stringify(res.body));
  return res.body.last_used_at;
}

async function expire(id: string): Promise<void> {
  await app.pool.query(sql.unsafe`update api_keys set expires_at = now() - interval '1 second' where id = ${id}`);
}

// ---------------------------------------------------------------- 401

test('no Authorization header is 401 unauthorized', async (t) => {
  await app.createOrg();
  for (const [method, path] of [['GET', '/v1/api-keys'], ['POST', '/v1/api-keys'], ['GET', '/v1/api-keys/key_x']]) {
    const res = await app.request(method!, path!, method === 'POST' ? { body: { name: 'x' } } : {});
    assertError(t, res, 401, 'unauthorized');
  }
});

test('an empty Authorization header is 401 unauthorized', async (t) => {
  const res = await app.request('GET', '/v1/api-keys', { headers: { authorization: '' } });
  assertError(t, res, 401, 'unauthorized');
});

test('a non-Bearer scheme is 401 unauthorized, even carrying a valid key', async (t) => {
  const { key } = await app.createOrg();
  const headers = [
    `Basic ${Buffer.from(`${key}:`).toString('base64')}`,
    `Basic ${key}`,
    `Token ${key}`,
    key,
    `Bearer${key}`,
  ];
  for (const authorization of headers) {
    const res = await app.request('GET', '/v1/api-keys', { headers: { authorization } });
    assertError(t, res, 401, 'unauthorized');
  }
});

test('two Authorization headers are 401 unauthorized, even when both carry valid keys', async (t) => {
  // Node keeps the first of two and drops the other: a request naming two credentials ran as the first.
  const first = await app.createOrg();
  const second = await app.createOrg();
  // Two header lines, as curl -H sends them (fetch would join them into one).
  const { port } = new URL(app.baseUrl);
  const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const socket = net.connect(Number(port), '127.0.0.1', () => socket.write([
      'GET /v1/api-keys HTTP/1.1', `Host: 127.0.0.1:${port}`, `Authorization: Bearer ${first.key}`, `authorization: Bearer ${second.key}`,
      'Connection: close', '', '',
    ].join('\r\n')));
    let text = '';
    socket.setEncoding('utf8').on('data', (chunk: string) => { text += chunk; }).on('error', reject).on('end', () => {
      const [head = '', body = ''] = text.split('\r\n\r\n');
      resolve({ status: Number(head.split(' ')[1]), body });
    });
  });
  t.is(answer.status, 401);
  t.deepEqual(JSON.parse(answer.body).error, { code: 'unauthorized', message: 'The Authorization header is given 2 times: send one credential.' });
});

test('the Bearer scheme name is case-insensitive', async (t) => {
  const { key } = await app.createOrg();
  for (const scheme of ['Bearer', 'bearer', 'BEARER']) {
    const res = await app.request('GET', '/v1/api-keys', { headers: { authorization: `${scheme} ${key}` } });
    t.is(res.status, 200, `${scheme}: ${JSON.stringify(res.body)}`);
  }
});

test('Bearer with a malformed key is 401 unauthorized', async (t) => {
  const { key } = await app.createOrg();
  const malformed = [
    'Bearer',
    'Bearer ',
    'Bearer not-a-key',
    `Bearer ${key.slice(0, -1)}`,
    `Bearer ${key}x`,
    `Bearer ${key.replace('sk_live_', 'sk_prod_')}`,
    `Bearer ${key.replace('sk_live_', 'pk_live_')}`,
    `Bearer ${key.slice(0, -1)}!`,
    `Bearer ${key} ${key}`,
  ];
  for (const authorization of malformed) {
    const res = await app.request('GET', '/v1/api-keys', { headers: { authorization } });
    assertError(t, res, 401, 'unauthorized');
  }
});

test('a well-formed but unknown key is 401 unauthorized', async (t) => {
  await app.createOrg();
  for (const key of [unknownKey('live'), unknownKey('test')]) {
    const res = await app.request('GET', '/v1/api-keys', { key });
    assertError(t, res, 401, 'unauthorized');
    t.notRegex(res.body.error.message, /expired/i);
  }
});

test('a key that differs from a real one only in its environment prefix is 401', async (t) => {
  const { key } = await app.createOrg();
  const res = await app.request('GET', '/v1/api-keys', { key: key.replace('sk_live_', 'sk_test_') });
  assertError(t, res, 401, 'unauthorized');
});

test('a deleted key is 401 on the very next request', async (t) => {
  const { key: root } = await app.createOrg();
  const doomed = await createKey(t, root, { name: 'doomed' });
  const before = await app.request('GET', '/v1/api-keys', { key: doomed.key });
  t.is(before.status, 200);

  const deleted = await app.request('DELETE', `/v1/api-keys/${doomed.id}`, { key: root });
  t.is(deleted.status, 200);
  t.deepEqual(Object.keys(deleted.body).sort(), ['deleted', 'deleted_at', 'id']);
  t.is(deleted.body.id, doomed.id);
  t.is(deleted.body.deleted, true);
  t.regex(deleted.body.deleted_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

  const after = await app.request('GET', '/v1/api-keys', { key: doomed.key });
  assertError(t, after, 401, 'unauthorized');
  const write = await app.request('POST', '/v1/api-keys', { key: doomed.key, body: { name: 'zombie' } });
  assertError(t, write, 401, 'unauthorized');
  assertError(t, await getKey(root, doomed.id), 404, 'not_found');
});

test('a key that deletes itself is 401 on its next request', async (t) => {
  const { key: root } = await app.createOrg();
  const self = await createKey(t, root, { name: 'self', scopes: ['api-keys:write'] });
  const deleted = await app.request('DELETE', `/v1/api-keys/${self.id}`, { key: self.key });
  t.is(deleted.status, 200);
  assertError(t, await app.request('GET', '/v1/api-keys', { key: self.key }), 401, 'unauthorized');
});

test('an expired key is 401 unauthorized and the message says it expired', async (t) => {
  const { key: root } = await app.createOrg();
  const victim = await createKey(t, root, { name: 'short-lived' });
  t.is((await app.request('GET', '/v1/api-keys', { key: victim.key })).status, 200);
  await expire(victim.id);
  for (const [method, path] of [['GET', '/v1/api-keys'], ['GET', `/v1/api-keys/${victim.id}`], ['DELETE', `/v1/api-keys/${victim.id}`]]) {
    const res = await app.request(method!, path!, { key: victim.key });
    assertError(t, res, 401, 'unauthorized');
    t.regex(res.body.error.message, /expired/i);
  }
  // The refused DELETE did nothing.
  t.is((await getKey(root, victim.id)).status, 200);
});

test('a key with expires_at in the future works', async (t) => {
  const { key: root } = await app.createOrg();
  const expiresAt = new Date(Date.now() + 3_600_000).toISOString();
  const future = await createKey(t, root, { name: 'future', expires_at: expiresAt });
  t.is((future as unknown as { expires_at: string }).expires_at, expiresAt);
  const res = await app.request('GET', '/v1/api-keys', { key: future.key });
  t.is(res.status, 200);
});

test('the API refuses an expires_at in the past', async (t) => {
  const { key: root, apiKey } = await app.createOrg();
  const past = new Date(Date.now() - 60_000).toISOString();
  assertError(t, await app.request('POST', '/v1/api-keys', { key: root, body: { name: 'x', expires_at: past } }), 400, 'validation_error');
  assertError(t, await app.request('PATCH', `/v1/api-keys/${apiKey.id}`, { key: root, body: { expires_at: past } }), 400, 'validation_error');
});

// ---------------------------------------------------------------- Scopes on /v1/api-keys

/** Runs every api-keys operation with `key` and returns the statuses, keyed by operation. */
async function apiKeyOperations(t: ExecutionContext, root: string, key: string) {
  const target = await createKey(t, root, { name: 'target', scopes: ['api-keys:read'] });
  const list = await app.request('GET', '/v1/api-keys', { key });
  const retrieve = await app.request('GET', `/v1/api-keys/${target.id}`, { key });
  const create = await app.request('POST', '/v1/api-keys', { key, body: { name: 'child', scopes: ['api-keys:read'] } });
  const patch = await app.request('PATCH', `/v1/api-keys/${target.id}`, { key, body: { name: 'renamed' } });
  const remove = await app.request('DELETE', `/v1/api-keys/${target.id}`, { key });
  return { target, list, retrieve, create, patch, remove };
}

test('api-keys:read allows GET list and retrieve, and refuses POST, PATCH and DELETE with 403', async (t) => {
  const { key: root } = await app.createOrg();
  const reader = await createKey(t, root, { name: 'reader', scopes: ['api-keys:read'] });
  const before = (await app.request('GET', '/v1/api-keys?limit=100', { key: root })).body.data.length;
  const ops = await apiKeyOperations(t, root, reader.key);

  t.is(ops.list.status, 200);
  t.true(Array.isArray(ops.list.body.data));
  t.is(ops.retrieve.status, 200);
  t.is(ops.retrieve.body.id, ops.target.id);
  assertError(t, ops.create, 403, 'forbidden');
  assertError(t, ops.patch, 403, 'forbidden');
  assertError(t, ops.remove, 403, 'forbidden');

  // Nothing was created, renamed or deleted.
  const after = await app.request('GET', '/v1/api-keys?limit=100', { key: root });
  t.is(after.body.data.length, before + 1); // only the target made by root
  const target = await getKey(root, ops.target.id);
  t.is(target.status, 200);
  t.is(target.body.name, 'target');
});

test('api-keys:read is refused on write even when the body is invalid or the id unknown', async (t) => {
  const { key: root } = await app.createOrg();
  const reader = await createKey(t, root, { name: 'reader', scopes: ['api-keys:read'] });
  assertError(t, await app.request('POST', '/v1/api-keys', { key: reader.key, body: { bogus: true } }), 403, 'forbidden');
  assertError(t, await app.request('DELETE', `/v1/api-keys/key_${'A'.repeat(27)}`, { key: reader.key }), 403, 'forbidden');
});

test('api-keys:write allows every api-keys operation (write implies read)', async (t) => {
  const { key: root } = await app.createOrg();
  const writer = await createKey(t, root, { name: 'writer', scopes: ['api-keys:write'] });
  const ops = await apiKeyOperations(t, root, writer.key);
  t.is(ops.list.status, 200);
  t.is(ops.retrieve.status, 200);
  t.is(ops.retrieve.body.id, ops.target.id);
  t.is(ops.create.status, 201, JSON.stringify(ops.create.body));
  t.deepEqual(ops.create.body.scopes, ['api-keys:read']);
  t.is(ops.patch.status, 200, JSON.stringify(ops.patch.body));
  t.is(ops.patch.body.name, 'renamed');
  t.is(ops.remove.status, 200);
  t.is(ops.remove.body.deleted, true);
  assertError(t, await getKey(root, ops.target.id), 404, 'not_found');
});

test('* allows every api-keys operation', async (t) => {
  const { key: root } = await app.createOrg({ scopes: ['*'] });
  const star = await createKey(t, root, { name: 'star', scopes: ['*'] });
  const ops = await apiKeyOperations(t, root, star.key);
  t.is(ops.list.status, 200);
  t.is(ops.retrieve.status, 200);
  t.is(ops.create.status, 201);
  t.is(ops.patch.status, 200);
  t.is(ops.patch.body.name, 'renamed');
  t.is(ops.remove.status, 200);
});

test('a key with only other families\' scopes is refused with 403 on GET and on writes', async (t) => {
  const { key: root, apiKey } = await app.createOrg();
  const others = ['endpoints:write', 'applications:write', 'event-types:write', 'webhooks:write', 'endpoints:read'];
  const outsider = await createKey(t, root, { name: 'outsider', scopes: others });
  assertError(t, await app.request('GET', '/v1/api-keys', { key: outsider.key }), 403, 'forbidden');
  assertError(t, await app.request('GET', `/v1/api-keys/${apiKey.id}`, { key: outsider.key }), 403, 'forbidden');
  assertError(t, await app.request('POST', '/v1/api-keys', { key: outsider.key, body: { name: 'x', scopes: ['endpoints:read'] } }), 403, 'forbidden');
  assertError(t, await app.request('PATCH', `/v1/api-keys/${apiKey.id}`, { key: outsider.key, body: { name: 'x' } }), 403, 'forbidden');
  assertError(t, await app.request('DELETE', `/v1/api-keys/${apiKey.id}`, { key: outsider.key }), 403, 'forbidden');
  t.is((await getKey(root, apiKey.id)).body.name, 'root');
});

test('a single endpoints:write key (via createOrg) is refused on GET /v1/api-keys', async (t) => {
  const { key } = await app.createOrg({ scopes: ['endpoints:write'] });
  assertError(t, await app.request('GET', '/v1/api-keys', { key }), 403, 'forbidden');
});

// ---------------------------------------------------------------- scopes.ts

test('accessFor: GET and HEAD read, every other method writes', (t) => {
  t.is(accessFor('GET'), 'read');
  t.is(accessFor('HEAD'), 'read');
  for (const method of ['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']) t.is(accessFor(method), 'write', method);
});

test('FAMILIES are exactly the five of decisions section 4', (t) => {
  t.deepEqual([...FAMILIES].sort(), [...ALL_FAMILIES].sort());
});

test('allows: read, write and * over all five families', (t) => {
  for (const family of ALL_FAMILIES) {
    t.false(allows([], family, 'read'), `${family} none read`);
    t.false(allows([], family, 'write'), `${family} none write`);
    t.true(allows([`${family}:read`], family, 'read'), `${family}:read read`);
    t.false(allows([`${family}:read`], family, 'write'), `${family}:read write`);
    t.true(allows([`${family}:write`], family, 'read'), `${family}:write read`);
    t.true(allows([`${family}:write`], family, 'write'), `${family}:write write`);
    t.true(allows(['*'], family, 'read'), `* ${family} read`);
    t.true(allows(['*'], family, 'write'), `* ${family} write`);
    const others = ALL_FAMILIES.filter((f) => f !== family).flatMap((f) => [`${f}:read`, `${f}:write`]);
    t.false(allows(others, family, 'read'), `others ${family} read`);
    t.false(allows(others, family, 'write'), `others ${family} write`);
    t.true(allows([...others, `${family}:read`], family, 'read'));
    t.false(allows([...others, `${family}:read`], family, 'write'));
  }
});

test('canGrant: * grants everything, nothing else grants *', (t) => {
  t.true(canGrant(['*'], '*'));
  for (const family of ALL_FAMILIES) {
    t.true(canGrant(['*'], `${family}:read`));
    t.true(canGrant(['*'], `${family}:write`));
  }
  const everything = ALL_FAMILIES.flatMap((f) => [`${f}:read`, `${f}:write`]);
  t.false(canGrant(everything, '*'));
  t.false(canGrant([], '*'));
});

test('canGrant: a family scope grants only what it implies, over all five families', (t) => {
  for (const family of ALL_FAMILIES) {
    t.true(canGrant([`${family}:write`], `${family}:write`), `${family}:write -> write`);
    t.true(canGrant([`${family}:write`], `${family}:read`), `${family}:write -> read`);
    t.true(canGrant([`${family}:read`], `${family}:read`), `${family}:read -> read`);
    t.false(canGrant([`${family}:read`], `${family}:write`), `${family}:read -> write`);
    t.false(canGrant([], `${family}:read`));
    for (const other of ALL_FAMILIES.filter((f) => f !== family)) {
      t.false(canGrant([`${family}:write`], `${other}:read`), `${family}:write -> ${other}:read`);
      t.false(canGrant([`${family}:write`], `${other}:write`), `${family}:write -> ${other}:write`);
    }
  }
});

// ---------------------------------------------------------------- Escalation

test('an api-keys:write key cannot create a key with *, also not by default', async (t) => {
  const { key: root } = await app.createOrg();
  const writer = await createKey(t, root, { name: 'writer', scopes: ['api-keys:write'] });
  const count = async () => (await app.request('GET', '/v1/api-keys?limit=100', { key: root })).body.data.length;
  const before = await count();
  assertError(t, await app.request('POST', '/v1/api-keys', { key: writer.key, body: { name: 'x', scopes: ['*'] } }), 403, 'forbidden');
  assertError(t, await app.request('POST', '/v1/api-keys', { key: writer.key, body: { name: 'x' } }), 403, 'forbidden');
  t.is(await count(), before);
});

test('an api-keys:write key cannot create a key with another family\'s scope', async (t) => {
  const { key: root } = await app.createOrg();
  const writer = await createKey(t, root, { name: 'writer', scopes: ['api-keys:write'] });
  const count = async () => (await app.request('GET', '/v1/api-keys?limit=100', { key: root })).body.data.length;
  const before = await count();
  for (const scopes of [['endpoints:read'], ['webhooks:write'], ['api-keys:read', 'endpoints:read']]) {
    const res = await app.request('POST', '/v1/api-keys', { key: writer.key, body: { name: 'x', scopes } });
    assertError(t, res, 403, 'forbidden');
  }
  t.is(await count(), before);
});

test('an api-keys:write key can create keys with api-keys:read and api-keys:write', async (t) => {
  const { key: root } = await app.createOrg();
  const writer = await createKey(t, root, { name: 'writer', scopes: ['api-keys:write'] });
  for (const scopes of [['api-keys:read'], ['api-keys:write'], ['api-keys:read', 'api-keys:write']]) {
    const res = await app.request('POST', '/v1/api-keys', { key: writer.key, body: { name: 'child', scopes } });
    t.is(res.status, 201, JSON.stringify(res.body));
    t.deepEqual([...res.body.scopes].sort(), [...scopes].sort());
    const stored = await getKey(root, res.body.id);
    t.deepEqual([...stored.body.scopes].sort(), [...scopes].sort());
  }
});

test('an api-keys:read-and-endpoints:write key cannot grant endpoints:write via api-keys:read', async (t) => {
  // Holds endpoints:write but no api-keys:write: refused by the scope check before escalation.
  const { key: root } = await app.createOrg();
  const mixed = await createKey(t, root, { name: 'mixed', scopes: ['api-keys:read', 'endpoints:write'] });
  assertError(t, await app.request('POST', '/v1/api-keys', { key: mixed.key, body: { name: 'x', scopes: ['endpoints:read'] } }), 403, 'forbidden');
});

test('a key cannot change or delete a key holding scopes it lacks (the organization\'s "*" key from api-keys:write)', async (t) => {
  // A probe narrowed, expired and deleted the "*" keys with a key holding api-keys:write alone:
  // only the scopes in the body were checked, not those of the key changed.
  const { key: root } = await app.createOrg();
  const rootId = (await app.request('GET', '/v1/credential', { key: root })).body.id as string;
  const other = await createKey(t, root, { name: 'other root', scopes: ['*'] });
  const wide = await createKey(t, root, { name: 'wide', scopes: ['api-keys:write', 'endpoints:write'] });
  const writer = await createKey(t, root, { name: 'writer', scopes: ['api-keys:write'] });
  const reader = await createKey(t, root, { name: 'reader', scopes: ['api-keys:read'] });
  const inFuture = new Date(Date.now() + 60_000).toISOString();
  for (const [id, holds] of [[rootId, '*'], [other.id, '*'], [wide.id, 'endpoints:write']] as const) {
    for (const body of [{ scopes: ['api-keys:write'] }, { expires_at: inFuture }, { name: 'renamed' }]) {
      const res = await app.request('PATCH', `/v1/api-keys/${id}`, { key: writer.key, body });
      assertError(t, res, 403, 'forbidden');
      t.is(res.body.error.message, `This API key cannot change a key holding scopes it does not hold itself: ${holds}.`);
    }
    const deleted = await app.request('DELETE', `/v1/api-keys/${id}`, { key: writer.key });
    assertError(t, deleted, 403, 'forbidden');
    t.is(deleted.body.error.message, `This API key cannot delete a key holding scopes it does not hold itself: ${holds}.`);
  }
  const rootNow = (await getKey(root, rootId)).body;
  t.like(rootNow, { scopes: ['*'], expires_at: null });
  t.like((await getKey(root, wide.id)).body, { name: 'wide', scopes: ['api-keys:write', 'endpoints:write'], expires_at: null });
  // Keys within its own scopes, itself included, it still manages.
  t.is((await app.request('PATCH', `/v1/api-keys/${reader.id}`, { key: writer.key, body: { name: 'reader 2', expires_at: inFuture } })).status, 200);
  t.is((await app.request('DELETE', `/v1/api-keys/${reader.id}`, { key: writer.key })).status, 200);
  t.is((await app.request('PATCH', `/v1/api-keys/${writer.id}`, { key: writer.key, body: { name: 'writer 2' } })).status, 200);
  t.is((await app.request('DELETE', `/v1/api-keys/${other.id}`, { key: root })).status, 200, 'a "*" key deletes another');
});

test('a key that expires cannot outlive itself: no key it creates, changes or deletes lives longer than it does', async (t) => {
  // A probe: a key with api-keys:write and 15 s to live PATCHed its own expires_at to null and
  // was permanent; one with 2 minutes created a permanent copy of itself. Time is reach, as
  // scopes are: the refusals below change nothing, within its lifetime everything still works.
  const { key: root, orgId } = await app.createOrg();
  const rootId = (await app.request('GET', '/v1/credential', { key: root })).body.id as string;
  const at = (minutes: number) => new Date(Date.now() + minutes * 60_000).toISOString();
  const temp = await createKey(t, root, { name: 'temp', scopes: ['*'], expires_at: at(10) });
  const reach = (await getKey(root, temp.id)).body.expires_at as string;
  const outlives = (doing: string, never = false) =>
    `This API key expires at ${reach}: it cannot ${doing}${never ? ' (one that never expires)' : ''}.`;
  const refused = async (res: Response, message: string) => {
    assertError(t, res, 403, 'forbidden');
    t.is(res.body.error.message, message);
  };

  // On itself.
  await refused(await app.request('PATCH', `/v1/api-keys/${temp.id}`, { key: temp.key, body: { expires_at: null } }), outlives('change a key that outlives it', true));
  await refused(await app.request('PATCH', `/v1/api-keys/${temp.id}`, { key: temp.key, body: { expires_at: at(60) } }), outlives('change a key that outlives it'));
  t.is((await getKey(root, temp.id)).body.expires_at, reach);

  // New keys: its own expiry when the body names none; never, or later, refused.
  const keysBefore = (await app.request('GET', '/v1/api-keys?limit=100', { key: root })).body.data.length;
  await refused(await app.request('POST', '/v1/api-keys', { key: temp.key, body: { name: 'copy', expires_at: null } }), outlives('create a key that outlives it', true));
  await refused(await app.request('POST', '/v1/api-keys', { key: temp.key, body: { name: 'copy', expires_at: at(60) } }), outlives('create a key that outlives it'));
  t.is((await app.request('GET', '/v1/api-keys?limit=100', { key: root })).body.data.length, keysBefore);
  const capped = await app.request('POST', '/v1/api-keys', { key: temp.key, body: { name: 'copy', scopes: ['webhooks:read'] } });
  t.is(capped.status, 201, JSON.stringify(capped.body));
  t.is(capped.body.expires_at, reach);
  const sooner = await app.request('POST', '/v1/api-keys', { key: temp.key, body: { name: 'sooner', expires_at: at(5) } });
  t.is(sooner.status, 201, JSON.stringify(sooner.body));

  // Keys that outlive it (the organization's permanent "*" key, a permanent narrow one) it
  // neither changes (not even to shorten them) nor deletes.
  const narrow = await createKey(t, root, { name: 'narrow', scopes: ['webhooks:read'] });
  for (const id of [rootId, narrow.id]) {
    for (const body of [{ name: 'renamed' }, { expires_at: at(1) }, { scopes: ['webhooks:read'] }]) {
      await refused(await app.request('PATCH', `/v1/api-keys/${id}`, { key: temp.key, body }), outlives('change a key that outlives it', true));
    }
    await refused(await app.request('DELETE', `/v1/api-keys/${id}`, { key: temp.key }), outlives('delete a key that outlives it', true));
  }
  t.like((await getKey(root, rootId)).body, { name: 'root', scopes: ['*'], expires_at: null });
  t.like((await getKey(root, narrow.id)).body, { name: 'narrow', scopes: ['webhooks:read'], expires_at: null });

  // In the writing statement too: a key lengthened by another request after the check is left alone.
  t.is(await updateApiKey(app.pool, orgId, narrow.id, { name: 'changed' }, undefined, reach), null);
  t.is(await deleteApiKey(app.pool, orgId, narrow.id, undefined, reach), null);

  // Within its lifetime: keys expiring by then it changes and deletes; itself it may shorten.
  t.is((await app.request('PATCH', `/v1/api-keys/${sooner.body.id}`, { key: temp.key, body: { name: 'sooner 2', expires_at: at(8) } })).status, 200);
  await refused(await app.request('PATCH', `/v1/api-keys/${sooner.body.id}`, { key: temp.key, body: { expires_at: null } }), outlives('change a key that outlives it', true));
  t.is((await app.request('DELETE', `/v1/api-keys/${sooner.body.id}`, { key: temp.key })).status, 200);
  t.is((await app.request('PATCH', `/v1/api-keys/${temp.id}`, { key: temp.key, body: { name: 'temp 2', expires_at: at(9) } })).status, 200);
  // An expiry written in SQL with microseconds (the API reads it to the millisecond) is still its own.
  await app.pool.query(sql.unsafe`update api_keys set expires_at = date_trunc('milliseconds', expires_at) + interval '654 microseconds' where id = ${temp.id}`);
  t.is((await app.request('PATCH', `/v1/api-keys/${temp.id}`, { key: temp.key, body: { name: 'temp 3' } })).status, 200, 'renames itself');
  // A key that never expires is not held back.
  t.is((await app.request('PATCH', `/v1/api-keys/${temp.id}`, { key: root, body: { expires_at: null } })).status, 200);
  t.is((await app.request('POST', '/v1/api-keys', { key: temp.key, body: { name: 'now permanent' } })).body.expires_at, null);
});

test('a key\'s own PATCH waiting behind its shortening reads the shorter expiry, not the one it had', async (t) => {
  // A probe: while a "*" key shortened K (committed), K's own PATCH setting its expiry to what it
  // had been was checked against that old expiry, read before the shortening, and undid it
  // (13 of 40 rounds). The caller's expiry is now read under a share lock in the write's
  // transaction. Made deterministic: a session holds K's row while both PATCHes queue behind it.
  const { key: root } = await app.createOrg();
  const later = new Date(Date.now() + 30 * 60_000).toISOString();
  const k = await createKey(t, root, { name: 'k', scopes: ['*'], expires_at: later });
  const kExpiry = (await getKey(root, k.id)).body.expires_at as string;
  // K's use is recorded now, so its PATCH's key lookup writes nothing (once a minute) and reads
  // K before the shortening commits, as in the probe's rounds.
  t.is((await app.request('GET', '/v1/credential', { key: k.key })).status, 200);
  const holder = await session(t, app.databaseUrl);
  const watcher = await session(t, app.databaseUrl);
  await holder.query('begin');
  await holder.query('select 1 from api_keys where id = $1 for update', [k.id]);
  const shorter = new Date(Date.now() + 5 * 60_000).toISOString();
  const shortening = app.request('PATCH', `/v1/api-keys/${k.id}`, { key: root, body: { expires_at: shorter } });
  await waitingOn(watcher, 'api_keys', 1);
  const undoing = app.request('PATCH', `/v1/api-keys/${k.id}`, { key: k.key, body: { expires_at: kExpiry } });
  await waitingOn(watcher, 'api_keys', 2);
  await holder.query('commit');
  t.is((await shortening).status, 200);
  const undo = await undoing;
  assertError(t, undo, 403, 'forbidden');
  t.regex(undo.body.error.message, /it cannot change a key that outlives it/);
  t.is(Date.parse((await getKey(root, k.id)).body.expires_at), Date.parse(shorter), 'the shortening stands');
});

test('a key cannot PATCH a key\'s scopes to something it lacks', async (t) => {
  const { key: root } = await app.createOrg();
  const writer = await createKey(t, root, { name: 'writer', scopes: ['api-keys:write'] });
  const child = await createKey(t, writer.key, { name: 'child', scopes: ['api-keys:read'] });
  for (const scopes of [['*'], ['endpoints:read'], ['api-keys:read', 'applications:write']]) {
    const res = await app.request('PATCH', `/v1/api-keys/${child.id}`, { key: writer.key, body: { scopes, name: 'escalated' } });
    assertError(t, res, 403, 'forbidden');
  }
  // Nor its own scopes.
  const self = await app.request('PATCH', `/v1/api-keys/${writer.id}`, { key: writer.key, body: { scopes: ['*'] } });
  assertError(t, self, 403, 'forbidden');

  const stored = await getKey(root, child.id);
  t.deepEqual(stored.body.scopes, ['api-keys:read']);
  t.is(stored.body.name, 'child');
  t.deepEqual((await getKey(root, writer.id)).body.scopes, ['api-keys:write']);
});

test('a key can PATCH a key\'s scopes to ones it holds', async (t) => {
  const { key: root } = await app.createOrg();
  const writer = await createKey(t, root, { name: 'writer', scopes: ['api-keys:write'] });
  const child = await createKey(t, writer.key, { name: 'child', scopes: ['api-keys:read'] });
  const res = await app.request('PATCH', `/v1/api-keys/${child.id}`, { key: writer.key, body: { scopes: ['api-keys:write'] } });
  t.is(res.status, 200, JSON.stringify(res.body));
  t.deepEqual(res.body.scopes, ['api-keys:write']);
  t.deepEqual((await getKey(root, child.id)).body.scopes, ['api-keys:write']);
});

test('unknown scope names are 400 validation_error on create and patch', async (t) => {
  const { key: root, apiKey } = await app.createOrg();
  const unknown = [['admin'], ['api-keys:admin'], ['webhooks'], ['API-KEYS:READ'], ['*:read'], [''], ['api-keys:read', 'nope:read']];
  for (const scopes of unknown) {
    const created = await app.request('POST', '/v1/api-keys', { key: root, body: { name: 'x', scopes } });
    assertError(t, created, 400, 'validation_error');
    t.true(created.body.error.details?.some((d: { path: string }) => d.path.startsWith('scopes')), JSON.stringify(created.body));
    const patched = await app.request('PATCH', `/v1/api-keys/${apiKey.id}`, { key: root, body: { scopes } });
    assertError(t, patched, 400, 'validation_error');
  }
  t.deepEqual((await getKey(root, apiKey.id)).body.scopes, ['*']);
});

test('unknown scope names are 400 also for a key that could not grant them', async (t) => {
  const { key: root } = await app.createOrg();
  const writer = await createKey(t, root, { name: 'writer', scopes: ['api-keys:write'] });
  const res = await app.request('POST', '/v1/api-keys', { key: writer.key, body: { name: 'x', scopes: ['superuser'] } });
  assertError(t, res, 400, 'validation_error');
});

test('an empty or non-array scopes list is 400', async (t) => {
  const { key: root } = await app.createOrg();
  for (const scopes of [[], '*', null, [1]]) {
    const res = await app.request('POST', '/v1/api-keys', { key: root, body: { name: 'x', scopes } });
    assertError(t, res, 400, 'validation_error');
  }
});

// ---------------------------------------------------------------- Environments

test('a test key cannot create a live key (403) but can create test keys', async (t) => {
  const { key: testRoot } = await app.createOrg({ environment: 'test' });
  t.true(testRoot.startsWith('sk_test_'));
  const live = await app.request('POST', '/v1/api-keys', { key: testRoot, body: { name: 'live', environment: 'live', scopes: ['api-keys:read'] } });
  assertError(t, live, 403, 'forbidden');
  const list = await app.request('GET', '/v1/api-keys?environment=live', { key: testRoot });
  t.is(list.status, 200);
  t.deepEqual(list.body.data, []);

  const res = await app.request('POST', '/v1/api-keys', { key: testRoot, body: { name: 'test', environment: 'test', scopes: ['api-keys:read'] } });
  t.is(res.status, 201, JSON.stringify(res.body));
  t.is(res.body.environment, 'test');
  t.regex(res.body.key, /^sk_test_[0-9A-Za-z]{32}$/);
  t.is(res.body.prefix, res.body.key.slice(0, 12));
  t.is((await app.request('GET', '/v1/api-keys', { key: res.body.key })).status, 200);
});

test('a live key can create test keys and live keys', async (t) => {
  const { key: liveRoot } = await app.createOrg({ environment: 'live' });
  const testKey = await app.request('POST', '/v1/api-keys', { key: liveRoot, body: { name: 'test', environment: 'test' } });
  t.is(testKey.status, 201, JSON.stringify(testKey.body));
  t.is(testKey.body.environment, 'test');
  t.regex(testKey.body.key, /^sk_test_[0-9A-Za-z]{32}$/);
  const live = await app.request('POST', '/v1/api-keys', { key: liveRoot, body: { name: 'live', environment: 'live' } });
  t.is(live.status, 201);
  t.is(live.body.environment, 'live');
  t.regex(live.body.key, /^sk_live_[0-9A-Za-z]{32}$/);
});

// ---------------------------------------------------------------- last_used_at

test('last_used_at is null on a fresh key and set after its first use', async (t) => {
  const { key: root } = await app.createOrg();
  const fresh = await createKey(t, root, { name: 'fresh' });
  t.is((fresh as unknown as { last_used_at: unknown }).last_used_at, null);
  t.is(await lastUsedAt(t, root, fresh.id), null);

  t.is((await app.request('GET', '/v1/api-keys', { key: fresh.key })).status, 200);
  const first = await lastUsedAt(t, root, fresh.id);
  t.is(typeof first, 'string');
  t.regex(first ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  const created = (await getKey(root, fresh.id)).body.created_at as string;
  t.true(Date.parse(first ?? '') >= Date.parse(created), `${first} < ${created}`);
});

test('a refused (403) request still counts as a use of the key', async (t) => {
  const { key: root } = await app.createOrg();
  const outsider = await createKey(t, root, { name: 'outsider', scopes: ['endpoints:read'] });
  assertError(t, await app.request('GET', '/v1/api-keys', { key: outsider.key }), 403, 'forbidden');
  t.is(typeof (await lastUsedAt(t, root, outsider.id)), 'string');
});

test('last_used_at does not move on a second request within the minute', async (t) => {
  const { key: root } = await app.createOrg();
  const user = await createKey(t, root, { name: 'user' });
  t.is((await app.request('GET', '/v1/api-keys', { key: user.key })).status, 200);
  const first = await lastUsedAt(t, root, user.id);
  t.not(first, null);
  t.is((await app.request('GET', '/v1/api-keys', { key: user.key })).status, 200);
  t.is((await app.request('GET', `/v1/api-keys/${user.id}`, { key: user.key })).status, 200);
  const second = await lastUsedAt(t, root, user.id);
  t.is(second, first);
});

test('last_used_at moves again once it is more than a minute old', async (t) => {
  const { key: root } = await app.createOrg();
  const user = await createKey(t, root, { name: 'user' });
  await app.pool.query(sql.unsafe`update api_keys set last_used_at = '2020-01-01T00:00:00Z' where id = ${user.id}`);
  t.is(await lastUsedAt(t, root, user.id), '2020-01-01T00:00:00.000Z');
  t.is((await app.request('GET', '/v1/api-keys', { key: user.key })).status, 200);
  const moved = await lastUsedAt(t, root, user.id);
  t.not(moved, '2020-01-01T00:00:00.000Z');
  t.true(Date.parse(moved ?? '') > Date.parse('2025-01-01T00:00:00Z'));
});

test('reading a key with another key does not touch the read key\'s last_used_at', async (t) => {
  const { key: root } = await app.createOrg();
  const idle = await createKey(t, root, { name: 'idle' });
  for (let i = 0; i < 3; i += 1) await getKey(root, idle.id);
  t.is(await lastUsedAt(t, root, idle.id), null);
});

test('an expired key\'s use does not set last_used_at', async (t) => {
  const { key: root } = await app.createOrg();
  const victim = await createKey(t, root, { name: 'victim' });
  await expire(victim.id);
  assertError(t, await app.request('GET', '/v1/api-keys', { key: victim.key }), 401, 'unauthorized');
  t.is(await lastUsedAt(t, root, victim.id), null);
});

test('an expired key\'s use does not move an old last_used_at', async (t) => {
  const { key: root } = await app.createOrg();
  const victim = await createKey(t, root, { name: 'victim' });
  await app.pool.query(sql.unsafe`
    update api_keys set last_used_at = '2020-01-01T00:00:00Z', expires_at = now() - interval '1 second'
    where id = ${victim.id}`);
  const res = await app.request('GET', '/v1/api-keys', { key: victim.key });
  assertError(t, res, 401, 'unauthorized');
  t.regex(res.body.error.message, /expired/i);
  t.is(await lastUsedAt(t, root, victim.id), '2020-01-01T00:00:00.000Z');
});
