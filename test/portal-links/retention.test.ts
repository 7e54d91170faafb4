// Retention of portal tokens: run_retention() (sql/013-retention.sql) deletes the tokens that
// stopped working (expired or revoked, whichever came first) more than 7 days ago, and keeps the
// rest: a link that still works, and ended links younger than a week (still refused with 401).
// Tokens are made through the API; only their timestamps are moved into the past in SQL.
import test from 'ava';
import { createHash } from 'node:crypto';
import { sql } from 'slonik';
import { z } from 'zod';
import { runRetention, runRetentionBatch } from '../../src/db/retention.ts';
import { assertError, startTestApp } from '../helpers/app.ts';
import { createApplication } from '../helpers/fixtures.ts';
import { tokenFor } from './helpers.ts';

const app = startTestApp();
const settings = () => ({ attemptDays: app.config.retention.attemptDays, archivedJobDays: app.config.retention.archivedJobDays });
const hash = (token: string) => createHash('sha256').update(token).digest();

/** Sets the token's life in SQL: created, expires and (when given) revoked so many days ago. */
async function moveTo(token: string, days: { created: number; expires: number; revoked?: number }): Promise<void> {
  const revoked = days.revoked === undefined ? sql.fragment`null` : sql.fragment`now() - make_interval(days => ${days.revoked}::int)`;
  await app.pool.query(sql.unsafe`
    update portal_tokens set created_at = now() - make_interval(days => ${days.created}::int),
      expires_at = now() - make_interval(days => ${days.expires}::int), revoked_at = ${revoked}
    where token_hash = ${sql.binary(hash(token))}`);
}

const stored = async (token: string) => app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
  select count(*)::int as n from portal_tokens where token_hash = ${sql.binary(hash(token))}`);

test.serial('portal tokens expired or revoked more than 7 days ago are deleted; the others stay', async (t) => {
  await runRetention(app.pool, settings()); // nothing of an earlier test counts below
  const { key } = await app.createOrg();
  const appId = (await createApplication({ on: app, key })).id as string;
  const link = () => tokenFor(t, app, key, appId);
  const working = await link();
  const expiredLongAgo = await link();
  const expiredLately = await link();
  const revokedLongAgo = await link(); // revoked 8 days ago, "expires" only 6 days ago: it ended at the revocation
  const revokedLately = await link(); // revoked yesterday, still within its lifetime
  await moveTo(expiredLongAgo, { created: 9, expires: 8 });
  await moveTo(expiredLately, { created: 7, expires: 6 });
  await moveTo(revokedLongAgo, { created: 10, expires: 6, revoked: 8 });
  await app.pool.query(sql.unsafe`
    update portal_tokens set revoked_at = now() - interval '1 day' where token_hash = ${sql.binary(hash(revokedLately))}`);

  t.deepEqual(await runRetentionBatch(app.pool, settings(), 10_000),
    { delivery_attempts: 0, archived_jobs: 0, webhook_job_keys: 0, rate_limit_counters: 0, portal_tokens: 2, operational_events: 0 });
  t.is(await stored(expiredLongAgo), 0);
  t.is(await stored(revokedLongAgo), 0);
  for (const kept of [working, expiredLately, revokedLately]) t.is(await stored(kept), 1);

  // Deleted or not, an ended token is refused; a kept one still says why.
  t.is((await app.request('GET', `/v1/applications/${appId}`, { key: working })).status, 200);
  for (const gone of [expiredLongAgo, revokedLongAgo]) assertError(t, await app.request('GET', `/v1/applications/${appId}`, { key: gone }), 401, 'unauthorized');
  const lately = await app.request('GET', `/v1/applications/${appId}`, { key: revokedLately });
  assertError(t, lately, 401, 'unauthorized');
  t.regex(lately.body.error.message, /revoked/);
  const expired = await app.request('GET', `/v1/applications/${appId}`, { key: expiredLately });
  assertError(t, expired, 401, 'unauthorized');
  t.regex(expired.body.error.message, /expired/);

  t.is((await runRetentionBatch(app.pool, settings(), 10_000)).portal_tokens, 0, 'nothing left past retention');
});

test.serial('a backlog of ended portal tokens goes in batches', async (t) => {
  await runRetention(app.pool, settings());
  const { key } = await app.createOrg();
  const appId = (await createApplication({ on: app, key })).id as string;
  const tokens: string[] = [];
  for (let i = 0; i < 3; i += 1) tokens.push(await tokenFor(t, app, key, appId));
  for (const token of tokens) await moveTo(token, { created: 20, expires: 19 });
  t.is((await runRetentionBatch(app.pool, settings(), 2)).portal_tokens, 2);
  const rest = await runRetention(app.pool, settings(), { batch: 2 });
  t.is(rest.deleted.portal_tokens, 1);
  t.true(rest.complete);
  for (const token of tokens) t.is(await stored(token), 0);
});
