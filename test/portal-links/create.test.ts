// POST /v1/applications/{id}/portal-links: the link and its token, expiry bounds, read_only,
// unknown fields, unknown and deleted applications, the scope it needs, PUBLIC_URL, and that
// only a hash of the token is stored.
import test from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { assertError, startTestApp } from '../helpers/app.ts';
import { createApiKey, createApplication } from '../helpers/fixtures.ts';
import { requestLink, TOKEN } from './helpers.ts';

const app = startTestApp();
const publicApp = startTestApp({ PUBLIC_URL: 'https://hooks.example.com/hookline/' });

const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

test('a link by default: 201, a token in the URL fragment, valid for an hour, not read-only', async (t) => {
  const { key } = await app.createOrg();
  const appId = (await createApplication({ on: app, key })).id as string;
  const before = Date.now();
  const res = await requestLink(app, key, appId);
  const after = Date.now();
  t.is(res.status, 201, JSON.stringify(res.body));
  t.deepEqual(Object.keys(res.body), ['url', 'token', 'expires_at', 'read_only']);
  t.regex(res.body.token, TOKEN);
  t.true(res.body.token.startsWith('pt_live_'));
  // The app is on PORT=0: without PUBLIC_URL the link names the port it bound, not 0.
  const bound = new URL(app.baseUrl).port;
  t.not(bound, '0');
  t.is(res.body.url, `http://localhost:${bound}/portal#${res.body.token}`, 'PUBLIC_URL defaults to http://localhost:<the port bound>');
  t.is(res.body.read_only, false);
  t.regex(res.body.expires_at, ISO_MS);
  // An hour from some moment while the request ran (however long a busy machine made it).
  const expiresAt = Date.parse(res.body.expires_at);
  t.true(expiresAt >= before + 3600_000 && expiresAt <= after + 3600_000, `expires ${expiresAt - before} ms after the request began`);
  // Two links are two different tokens.
  t.not((await requestLink(app, key, appId)).body.token, res.body.token);
});

test('a test-mode key makes pt_test_ tokens', async (t) => {
  const { key } = await app.createOrg({ environment: 'test' });
  const appId = (await createApplication({ on: app, key })).id as string;
  const res = await requestLink(app, key, appId, { read_only: true });
  t.is(res.status, 201);
  t.true(res.body.token.startsWith('pt_test_'));
  t.is(res.body.read_only, true);
});

test('expires_in: 60 and 604800 are accepted, 59, 604801, fractions and strings are 400', async (t) => {
  const { key } = await app.createOrg();
  const appId = (await createApplication({ on: app, key })).id as string;
  for (const seconds of [60, 604_800]) {
    const before = Date.now();
    const res = await requestLink(app, key, appId, { expires_in: seconds });
    const after = Date.now();
    t.is(res.status, 201);
    const expiresAt = Date.parse(res.body.expires_at);
    t.true(expiresAt >= before + seconds * 1000 && expiresAt <= after + seconds * 1000,
      `${seconds}: expires ${expiresAt - before} ms after the request began, which took ${after - before} ms`);
  }
  for (const expires_in of [59, 604_801, 0, -60, 90.5, '3600', null]) {
    const res = await requestLink(app, key, appId, { expires_in });
    assertError(t, res, 400, 'validation_error');
    t.is(res.body.error.details[0].path, 'expires_in', JSON.stringify(expires_in));
  }
});

test('read_only must be a boolean; unknown fields and a body that is not an object are 400', async (t) => {
  const { key } = await app.createOrg();
  const appId = (await createApplication({ on: app, key })).id as string;
  const notBoolean = await requestLink(app, key, appId, { read_only: 'yes' });
  assertError(t, notBoolean, 400, 'validation_error');
  t.is(notBoolean.body.error.details[0].path, 'read_only');
  const unknown = await requestLink(app, key, appId, { expires_in: 600, scopes: ['*'] });
  assertError(t, unknown, 400, 'validation_error');
  t.deepEqual(unknown.body.error.details, [{ path: 'scopes', message: 'unknown field' }]);
  assertError(t, await requestLink(app, key, appId, [] as unknown as Record<string, unknown>), 400, 'validation_error');
  const count = await app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from portal_tokens where application_id = ${appId}`);
  t.is(count, 0, 'refused requests store no token');
});

test('unknown, malformed, deleted and foreign applications are 404', async (t) => {
  const { key } = await app.createOrg();
  const other = await app.createOrg();
  const foreign = (await createApplication({ on: app, key: other.key })).id as string;
  const deleted = (await createApplication({ on: app, key })).id as string;
  t.is((await app.request('DELETE', `/v1/applications/${deleted}`, { key })).status, 200);
  for (const appId of ['app_3MRoiSEQHlSh21uw49EYrYZcUFW', 'nonsense', deleted, foreign]) {
    assertError(t, await requestLink(app, key, appId), 404, 'not_found');
    assertError(t, await app.request('DELETE', `/v1/applications/${appId}/portal-links`, { key }), 404, 'not_found');
  }
  // An application of the other environment of the same organization is not found either.
  const testKey = (await createApiKey({ on: app, key }, { environment: 'test' })).key as string;
  const testModeApp = (await createApplication({ on: app, key: testKey })).id as string;
  assertError(t, await requestLink(app, key, testModeApp), 404, 'not_found');
});

test('creating needs applications:write; revoking too', async (t) => {
  const { key } = await app.createOrg();
  const appId = (await createApplication({ on: app, key })).id as string;
  for (const scopes of [['applications:read'], ['endpoints:write', 'webhooks:write']]) {
    const limited = await app.createOrg({ scopes });
    assertError(t, await requestLink(app, limited.key, appId), 403, 'forbidden');
    assertError(t, await app.request('DELETE', `/v1/applications/${appId}/portal-links`, { key: limited.key }), 403, 'forbidden');
  }
  const writer = await app.createOrg({ scopes: ['applications:write'] });
  const own = (await createApplication({ on: app, key: writer.key })).id as string;
  t.is((await requestLink(app, writer.key, own)).status, 201);
});

test('the URL starts with PUBLIC_URL (without its trailing slash)', async (t) => {
  const { key } = await publicApp.createOrg();
  const appId = (await createApplication({ on: publicApp, key })).id as string;
  const res = await requestLink(publicApp, key, appId);
  t.is(res.status, 201);
  t.is(res.body.url, `https://hooks.example.com/hookline/portal#${res.body.token}`);
});

test('only a SHA-256 hash of the token is stored', async (t) => {
  const { key } = await app.createOrg();
  const appId = (await createApplication({ on: app, key })).id as string;
  const res = await requestLink(app, key, appId, { read_only: true, expires_in: 120 });
  const rows = await app.pool.any(sql.type(z.object({ hash: z.string(), read_only: z.boolean(), as_text: z.string() }))`
    select encode(token_hash, 'hex') as hash, read_only, row_to_json(portal_tokens)::text as as_text
    from portal_tokens where application_id = ${appId}`);
  t.is(rows.length, 1);
  const { createHash } = await import('node:crypto');
  t.is(rows[0]?.hash, createHash('sha256').update(res.body.token).digest('hex'));
  t.true(rows[0]?.read_only);
  t.false(rows[0]?.as_text.includes(res.body.token.slice(8)), 'the token itself is nowhere in the row');
});
