// Keys across environments: only a live key with `*` may create, patch or delete a key of the
// other environment (a test key must not mint, raise or revoke live credentials).
import test from 'ava';
import { assertError, startTestApp } from './helpers/app.ts';

const app = startTestApp({ RATE_LIMIT_API_KEYS_PER_HOUR: '1000' });

async function makeKey(creator: string, body: Record<string, unknown>): Promise<{ id: string; key: string }> {
  const res = await app.request('POST', '/v1/api-keys', { key: creator, body: { name: 'k', ...body } });
  if (res.status !== 201) throw new Error(`create failed: ${res.status} ${JSON.stringify(res.body)}`);
  return { id: res.body.id, key: res.body.key };
}

/** An organization with a live `*` key, a live key limited to api-keys:write, and a test `*` key. */
async function org() {
  const { key: liveStar } = await app.createOrg();
  const liveNarrow = await makeKey(liveStar, { scopes: ['api-keys:write'] });
  const testStar = await makeKey(liveStar, { environment: 'test', scopes: ['*'] });
  const liveVictim = await makeKey(liveStar, { scopes: ['webhooks:read'] });
  const testVictim = await makeKey(liveStar, { environment: 'test', scopes: ['webhooks:read'] });
  return { liveStar, liveNarrow: liveNarrow.key, testStar: testStar.key, liveVictim, testVictim };
}

test('a test * key cannot raise a live key to "*", rename it, or delete it', async (t) => {
  const o = await org();
  assertError(t, await app.request('PATCH', `/v1/api-keys/${o.liveVictim.id}`, { key: o.testStar, body: { scopes: ['*'] } }), 403, 'forbidden');
  assertError(t, await app.request('PATCH', `/v1/api-keys/${o.liveVictim.id}`, { key: o.testStar, body: { name: 'mine now' } }), 403, 'forbidden');
  assertError(t, await app.request('PATCH', `/v1/api-keys/${o.liveVictim.id}`, { key: o.testStar, body: { expires_at: null } }), 403, 'forbidden');
  assertError(t, await app.request('DELETE', `/v1/api-keys/${o.liveVictim.id}`, { key: o.testStar }), 403, 'forbidden');

  const after = await app.request('GET', `/v1/api-keys/${o.liveVictim.id}`, { key: o.liveStar });
  t.is(after.status, 200);
  t.deepEqual(after.body.scopes, ['webhooks:read']);
  t.is(after.body.name, 'k');
  // The victim still works: it was neither raised nor deleted.
  t.is((await app.request('GET', '/v1/api-keys', { key: o.liveVictim.key })).status, 403, 'authenticated (not 401), and still webhooks:read only');
});

test('a test key cannot create a live key', async (t) => {
  const o = await org();
  assertError(t, await app.request('POST', '/v1/api-keys', { key: o.testStar, body: { name: 'x', environment: 'live', scopes: ['webhooks:read'] } }), 403, 'forbidden');
  const list = await app.request('GET', '/v1/api-keys?environment=live&limit=100', { key: o.liveStar });
  t.false(list.body.data.some((k: { name: string }) => k.name === 'x'));
});

test('a test key manages test keys, within its scopes', async (t) => {
  const o = await org();
  const made = await makeKey(o.testStar, { environment: 'test', scopes: ['webhooks:read'] });
  const patched = await app.request('PATCH', `/v1/api-keys/${o.testVictim.id}`, { key: o.testStar, body: { scopes: ['*'] } });
  t.is(patched.status, 200);
  t.deepEqual(patched.body.scopes, ['*']);
  t.is((await app.request('DELETE', `/v1/api-keys/${made.id}`, { key: o.testStar })).status, 200);
});

test('a live key without "*" cannot create, patch or delete test keys; it manages live keys', async (t) => {
  const o = await org();
  assertError(t, await app.request('POST', '/v1/api-keys', { key: o.liveNarrow, body: { name: 'x', environment: 'test', scopes: ['api-keys:read'] } }), 403, 'forbidden');
  assertError(t, await app.request('PATCH', `/v1/api-keys/${o.testVictim.id}`, { key: o.liveNarrow, body: { name: 'y' } }), 403, 'forbidden');
  assertError(t, await app.request('DELETE', `/v1/api-keys/${o.testVictim.id}`, { key: o.liveNarrow }), 403, 'forbidden');

  const own = await makeKey(o.liveNarrow, { scopes: ['api-keys:read'] });
  t.is((await app.request('PATCH', `/v1/api-keys/${own.id}`, { key: o.liveNarrow, body: { name: 'renamed' } })).status, 200);
  t.is((await app.request('DELETE', `/v1/api-keys/${own.id}`, { key: o.liveNarrow })).status, 200);
});

test('a live "*" key creates, raises and deletes test keys', async (t) => {
  const o = await org();
  const made = await makeKey(o.liveStar, { environment: 'test', scopes: ['webhooks:read'] });
  const raised = await app.request('PATCH', `/v1/api-keys/${made.id}`, { key: o.liveStar, body: { scopes: ['*'] } });
  t.is(raised.status, 200);
  t.deepEqual(raised.body.scopes, ['*']);
  t.is((await app.request('DELETE', `/v1/api-keys/${made.id}`, { key: o.liveStar })).status, 200);
  t.is((await app.request('GET', `/v1/api-keys/${made.id}`, { key: o.liveStar })).status, 404);
});

test('a key of another organization is a 404, whatever the environment', async (t) => {
  const o = await org();
  const other = await app.createOrg();
  assertError(t, await app.request('PATCH', `/v1/api-keys/${o.testVictim.id}`, { key: other.key, body: { name: 'z' } }), 404, 'not_found');
  assertError(t, await app.request('DELETE', `/v1/api-keys/${o.liveVictim.id}`, { key: other.key }), 404, 'not_found');
});
