// A portal token does no more than the API key that made its link (decisions section 4: no key
// hands out more than it holds). A probe found a key with applications:write alone making links
// whose tokens read endpoint secrets, redirected endpoints and retried jobs, for 7 days, and
// still after the key was deleted. Now: each request of a token is checked against its key's
// scopes as they are then, the key's delete revokes its tokens (in SQL, so a DBA's delete too),
// and a token ends when its key does. Tokens made before keys were kept (no api_key_id) work
// as before.
import test from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { assertError, startTestApp } from '../helpers/app.ts';
import { createApiKey } from '../helpers/fixtures.ts';
import { requestLink, tokenFor, twoApps } from './helpers.ts';

const app = startTestApp();

const keyOf = async (root: string, body: Record<string, unknown>) => {
  const created = await createApiKey({ on: app, key: root }, { name: 'linker', ...body });
  return { id: created.id as string, key: created.key as string };
};

test('a key with applications:write alone makes links whose tokens reach only what the key reaches', async (t) => {
  const { key: root, a } = await twoApps(app);
  const linker = await keyOf(root, { scopes: ['applications:write'] });
  const token = await tokenFor(t, app, linker.key, a.appId);
  const as = (method: string, path: string, body?: unknown) => app.request(method, path, body === undefined ? { key: token } : { key: token, body });

  t.is((await as('GET', `/v1/applications/${a.appId}`)).status, 200, 'the application, as the key may');
  const refused: Array<[string, string, unknown?]> = [
    ['GET', `/v1/endpoints/${a.endpointId}`],
    ['GET', `/v1/endpoints?application_id=${a.appId}`],
    ['PATCH', `/v1/endpoints/${a.endpointId}`, { url: 'https://attacker.example.com/x' }],
    ['POST', `/v1/endpoints/${a.endpointId}/rotate-secret`],
    ['GET', `/v1/webhook-jobs/${a.jobId}`],
    ['POST', `/v1/webhook-jobs/${a.jobId}/retry`],
    ['GET', '/v1/event-types'],
  ];
  for (const [method, path, body] of refused) {
    const res = await as(method, path, body);
    assertError(t, res, 403, 'forbidden');
    t.regex(res.body.error.message, /^The API key that made this portal link lacks the (endpoints|webhooks|event-types):(read|write) scope\.$/, `${method} ${path}`);
  }
  const endpoint = await app.request('GET', `/v1/endpoints/${a.endpointId}`, { key: root });
  t.is(endpoint.body.url, 'https://hooks.example.com/webhooks', 'the endpoint is unchanged');
  t.is(endpoint.body.secret_version, 1);

  // Widened by a key that may, the same token follows; narrowed again, it follows again.
  t.is((await app.request('PATCH', `/v1/api-keys/${linker.id}`, { key: root, body: { scopes: ['applications:write', 'endpoints:read'] } })).status, 200);
  t.regex((await as('GET', `/v1/endpoints/${a.endpointId}`)).body.secret, /^whsec_/);
  assertError(t, await as('PATCH', `/v1/endpoints/${a.endpointId}`, { status: 'paused' }), 403, 'forbidden');
  t.is((await app.request('PATCH', `/v1/api-keys/${linker.id}`, { key: root, body: { scopes: ['applications:write'] } })).status, 200);
  assertError(t, await as('GET', `/v1/endpoints/${a.endpointId}`), 403, 'forbidden');
});

test('deleting the key revokes the links it made, through the API or in SQL; other keys\' links keep working', async (t) => {
  const { key: root, orgId, a } = await twoApps(app);
  const first = await keyOf(root, { scopes: ['*'] });
  const second = await keyOf(root, { scopes: ['*'] });
  const third = await keyOf(root, { scopes: ['*'] });
  const byFirst = await tokenFor(t, app, first.key, a.appId);
  const byThird = await tokenFor(t, app, third.key, a.appId);
  const byRoot = await tokenFor(t, app, root, a.appId);
  t.is((await app.request('GET', `/v1/endpoints/${a.endpointId}`, { key: byFirst })).status, 200);

  t.is((await app.request('DELETE', `/v1/api-keys/${first.id}`, { key: root })).status, 200);
  const revoked = await app.request('GET', '/v1/credential', { key: byFirst });
  assertError(t, revoked, 401, 'unauthorized');
  t.is(revoked.body.error.message, 'This portal link was revoked.');
  await app.pool.query(sql.unsafe`delete from api_keys where id = ${third.id}`);
  t.is((await app.request('GET', '/v1/credential', { key: byThird })).body.error.message, 'This portal link was revoked.', 'a DBA\'s delete too');
  t.is((await app.request('GET', `/v1/endpoints/${a.endpointId}`, { key: byRoot })).status, 200, 'another key\'s link');
  t.is((await app.request('GET', '/v1/credential', { key: second.key })).status, 200);
  const kept = await app.pool.any(sql.type(z.object({ api_key_id: z.string().nullable(), revoked: z.boolean() }))`
    select api_key_id, revoked_at is not null as revoked from portal_tokens where application_id = ${a.appId} order by id`);
  t.deepEqual(kept, [{ api_key_id: null, revoked: true }, { api_key_id: null, revoked: true }, { api_key_id: await rootKeyId(root), revoked: false }]);

  // The organization deleted by hand: its keys' trigger meets tokens the same delete removes.
  await app.pool.query(sql.unsafe`delete from organizations where id = ${orgId}`);
  t.is(await app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`select count(*)::int as n from portal_tokens where org_id = ${orgId}`), 0);
});

test('a link never outlives its key: its expiry is the key\'s when that comes first, and the key\'s end ends it', async (t) => {
  const { key: root, a } = await twoApps(app);
  const keyExpiry = new Date(Date.now() + 3_600_000).toISOString();
  const linker = await keyOf(root, { scopes: ['*'], expires_at: keyExpiry });
  const week = await requestLink(app, linker.key, a.appId, { expires_in: 604_800 });
  t.is(week.status, 201);
  t.is(week.body.expires_at, keyExpiry, 'capped at the key\'s expiry');
  const minute = await requestLink(app, linker.key, a.appId, { expires_in: 60 });
  t.true(Date.parse(minute.body.expires_at) < Date.parse(keyExpiry), 'a shorter link keeps its own');
  t.is((await app.request('GET', '/v1/credential', { key: week.body.token })).body.expires_at, keyExpiry);

  // The key's expiry moved into the past (by hand: the API takes future times only).
  await app.pool.query(sql.unsafe`update api_keys set expires_at = now() - interval '1 second' where id = ${linker.id}`);
  const ended = await app.request('GET', `/v1/endpoints/${a.endpointId}`, { key: minute.body.token });
  assertError(t, ended, 401, 'unauthorized');
  t.is(ended.body.error.message, 'This portal link has expired.');
});

test('a key\'s expiry moved earlier ends its links then, for good: moved later again, they stay ended', async (t) => {
  // A probe: a link ended by its key's expiry worked again once the key's expiry was extended.
  const { key: root, a } = await twoApps(app);
  const linker = await keyOf(root, { scopes: ['*'] });
  const week = await requestLink(app, linker.key, a.appId, { expires_in: 604_800 });
  const own = week.body.expires_at as string;
  const soon = new Date(Date.now() + 60_000).toISOString();
  const shortened = await app.request('PATCH', `/v1/api-keys/${linker.id}`, { key: root, body: { expires_at: soon } });
  t.is(shortened.status, 200);
  t.is((await app.request('GET', '/v1/credential', { key: week.body.token })).body.expires_at, soon);
  for (const later of [null, new Date(Date.now() + 86_400_000).toISOString()]) {
    t.is((await app.request('PATCH', `/v1/api-keys/${linker.id}`, { key: root, body: { expires_at: later } })).status, 200);
    const credential = await app.request('GET', '/v1/credential', { key: week.body.token });
    t.is(credential.body.expires_at, soon, `the key's expiry moved to ${later}: the link still ends at the earlier one, not at its own ${own}`);
  }
  t.is((await app.request('GET', `/v1/endpoints/${a.endpointId}`, { key: week.body.token })).status, 200, 'until then it works');
});

test('a token made before keys were kept (no api_key_id) works as it did', async (t) => {
  const { key: root, a } = await twoApps(app);
  const token = await tokenFor(t, app, root, a.appId);
  await app.pool.query(sql.unsafe`update portal_tokens set api_key_id = null where application_id = ${a.appId}`);
  t.is((await app.request('PATCH', `/v1/endpoints/${a.endpointId}`, { key: token, body: { status: 'paused' } })).body.status, 'paused');
});

async function rootKeyId(root: string): Promise<string> {
  return (await app.request('GET', '/v1/credential', { key: root })).body.id as string;
}
