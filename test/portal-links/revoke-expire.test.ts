// When a portal token stops working (401 with a message that says why): revoked, expired,
// application deleted, unknown; and what DELETE /v1/applications/{id}/portal-links counts.
import test from 'ava';
import { sql } from 'slonik';
import { assertError, startTestApp, type TestApp } from '../helpers/app.ts';
import { createApplication } from '../helpers/fixtures.ts';
import { tokenFor } from './helpers.ts';

const app = startTestApp();

/** Moves the token's whole life into the past, as if `expires_in` had run out. */
async function expire(on: TestApp, token: string): Promise<void> {
  const { createHash } = await import('node:crypto');
  const hash = createHash('sha256').update(token).digest();
  await on.pool.query(sql.unsafe`
    update portal_tokens set created_at = now() - interval '2 hours', expires_at = now() - interval '1 hour'
    where token_hash = ${sql.binary(hash)}`);
}

async function setup() {
  const { key } = await app.createOrg();
  const appId = (await createApplication({ on: app, key })).id as string;
  return { key, appId, endpointsPath: `/v1/endpoints?application_id=${appId}` };
}

test('revoking: every token of the application gets 401 "revoked"; revoked counts the ones that still worked', async (t) => {
  const { key, appId, endpointsPath } = await setup();
  const tokens = [
    await tokenFor(t, app, key, appId),
    await tokenFor(t, app, key, appId, { read_only: true }),
    await tokenFor(t, app, key, appId),
  ];
  const other = (await createApplication({ on: app, key })).id as string;
  const otherToken = await tokenFor(t, app, key, other);
  await expire(app, tokens[2] as string);

  for (const token of tokens.slice(0, 2)) t.is((await app.request('GET', endpointsPath, { key: token })).status, 200);
  const revoked = await app.request('DELETE', `/v1/applications/${appId}/portal-links`, { key });
  t.is(revoked.status, 200);
  t.deepEqual(revoked.body, { id: appId, revoked: 2 }, 'the expired token is not counted');
  for (const token of tokens) {
    const res = await app.request('GET', endpointsPath, { key: token });
    assertError(t, res, 401, 'unauthorized');
    t.regex(res.body.error.message, /revoked/);
  }
  t.deepEqual((await app.request('DELETE', `/v1/applications/${appId}/portal-links`, { key })).body, { id: appId, revoked: 0 });
  t.is((await app.request('GET', `/v1/endpoints?application_id=${other}`, { key: otherToken })).status, 200, 'another application\'s token still works');
  // A new link after a revocation works.
  t.is((await app.request('GET', endpointsPath, { key: await tokenFor(t, app, key, appId) })).status, 200);
});

test('an expired token: 401 saying it expired', async (t) => {
  const { key, appId, endpointsPath } = await setup();
  const token = await tokenFor(t, app, key, appId, { expires_in: 60 });
  t.is((await app.request('GET', endpointsPath, { key: token })).status, 200);
  await expire(app, token);
  const res = await app.request('GET', endpointsPath, { key: token });
  assertError(t, res, 401, 'unauthorized');
  t.regex(res.body.error.message, /expired/);
});

test('a token of a deleted application: 401 saying so, and the application is not found to revoke', async (t) => {
  const { key, appId, endpointsPath } = await setup();
  const token = await tokenFor(t, app, key, appId);
  t.is((await app.request('DELETE', `/v1/applications/${appId}`, { key })).status, 200);
  for (const path of [endpointsPath, `/v1/applications/${appId}`, '/v1/event-types']) {
    const res = await app.request('GET', path, { key: token });
    assertError(t, res, 401, 'unauthorized');
    t.regex(res.body.error.message, /deleted/);
  }
  assertError(t, await app.request('DELETE', `/v1/applications/${appId}/portal-links`, { key }), 404, 'not_found');
});

test('an unknown token of the right form and a malformed one: 401', async (t) => {
  const { endpointsPath } = await setup();
  const unknown = await app.request('GET', endpointsPath, { key: `pt_live_${'A'.repeat(40)}` });
  assertError(t, unknown, 401, 'unauthorized');
  t.regex(unknown.body.error.message, /Invalid portal token/);
  assertError(t, await app.request('GET', endpointsPath, { key: 'pt_live_short' }), 401, 'unauthorized');
});
