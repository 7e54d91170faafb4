// GET /v1/credential: what the calling API key or portal token is. The portal learns its
// application from it, the dashboard which actions to show disabled; any valid credential may
// read itself, whatever its scopes, and an invalid one gets the 401 every other route gives.
import test from 'ava';
import { sql } from 'slonik';
import { assertError, startTestApp } from './helpers/app.ts';
import { createApplication } from './helpers/fixtures.ts';
import { requestLink } from './portal-links/helpers.ts';

const app = startTestApp();

test('an API key: its id, name, environment, scopes and expiry; no application', async (t) => {
  const { key } = await app.createOrg({ environment: 'test' });
  const created = await app.request('POST', '/v1/api-keys', {
    key, body: { name: 'reader', environment: 'test', scopes: ['webhooks:read'], expires_at: '2099-01-01T00:00:00.000Z' },
  });
  t.is(created.status, 201, JSON.stringify(created.body));
  const res = await app.request('GET', '/v1/credential', { key: created.body.key });
  t.is(res.status, 200);
  t.deepEqual(res.body, {
    type: 'api_key', id: created.body.id, name: 'reader', environment: 'test', scopes: ['webhooks:read'],
    read_only: false, application_id: null, expires_at: '2099-01-01T00:00:00.000Z',
  });
  const root = await app.request('GET', '/v1/credential', { key });
  t.deepEqual([root.body.scopes, root.body.expires_at, root.body.environment], [['*'], null, 'test']);
});

test('a portal token: its application, read-only or not, environment and expiry; no scopes', async (t) => {
  const { key } = await app.createOrg();
  const appId = (await createApplication({ on: app, key })).id as string;
  for (const readOnly of [false, true]) {
    const link = await requestLink(app, key, appId, { read_only: readOnly, expires_in: 600 });
    t.is(link.status, 201);
    const res = await app.request('GET', '/v1/credential', { key: link.body.token });
    t.is(res.status, 200);
    t.deepEqual(res.body, {
      type: 'portal_token', id: null, name: null, environment: 'live', scopes: [],
      read_only: readOnly, application_id: appId, expires_at: link.body.expires_at,
    });
  }
});

test('a refused credential gets 401 here as everywhere; the route only reads', async (t) => {
  const { key } = await app.createOrg();
  const appId = (await createApplication({ on: app, key })).id as string;
  const token = (await requestLink(app, key, appId)).body.token as string;
  t.is((await app.request('DELETE', `/v1/applications/${appId}/portal-links`, { key })).status, 200);
  const revoked = await app.request('GET', '/v1/credential', { key: token });
  assertError(t, revoked, 401, 'unauthorized');
  t.regex(revoked.body.error.message, /revoked/);

  const expiring = await app.request('POST', '/v1/api-keys', { key, body: { name: 'old', environment: 'live', scopes: ['*'] } });
  await app.pool.query(sql.unsafe`update api_keys set expires_at = now() - interval '1 minute' where id = ${expiring.body.id}`);
  assertError(t, await app.request('GET', '/v1/credential', { key: expiring.body.key }), 401, 'unauthorized');
  assertError(t, await app.request('GET', '/v1/credential'), 401, 'unauthorized');
  assertError(t, await app.request('GET', '/v1/credential?x=1', { key }), 400, 'validation_error');

  const other = (await requestLink(app, key, appId)).body.token as string;
  assertError(t, await app.request('POST', '/v1/credential', { key: other, body: {} }), 403, 'forbidden');
});
