// Portal link generation: 100 per minute per organization (decisions section 9), with the
// X-RateLimit-* headers, a 429 that creates no token, and budgets per organization. Exact
// whatever the clock: the requests run until the first 429, and the counts are checked in that
// 429's window (the one its X-RateLimit-Reset names), however many minute boundaries passed.
import test from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { assertError, startTestApp, type Response } from '../helpers/app.ts';
import { createApplication } from '../helpers/fixtures.ts';
import { requestLink } from './helpers.ts';

const app = startTestApp();

const rate = (res: Response) => ({
  limit: Number(res.headers.get('x-ratelimit-limit')),
  remaining: Number(res.headers.get('x-ratelimit-remaining')),
  reset: Number(res.headers.get('x-ratelimit-reset')),
});

test('100 links per minute per organization; the 101st in a minute is a 429 with Retry-After that stores no token', async (t) => {
  const { key } = await app.createOrg();
  const appId = (await createApplication({ on: app, key })).id as string;
  const responses: Response[] = [];
  for (let i = 0; i < 250; i += 1) {
    const res = await requestLink(app, key, appId, { expires_in: 60 });
    responses.push(res);
    if (res.status !== 201) break;
  }
  const limited = responses.at(-1) as Response;
  assertError(t, limited, 429, 'rate_limit_exceeded');
  const { reset } = rate(limited);
  t.is(reset % 60, 0, 'windows end on the minute');
  const window = responses.slice(0, -1).filter((res) => rate(res).reset === reset);
  t.is(window.length, 100, 'exactly 100 admitted in the 429\'s window');
  window.forEach((res, i) => {
    t.is(res.status, 201);
    t.deepEqual(rate(res), { limit: 100, remaining: 99 - i, reset });
  });
  t.deepEqual(rate(limited), { limit: 100, remaining: 0, reset });
  const retryAfter = Number(limited.headers.get('retry-after'));
  t.true(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
  t.is(limited.body.error.retry_after, retryAfter);

  const stored = await app.pool.oneFirst(sql.type(z.object({ n: z.number() }))`
    select count(*)::int as n from portal_tokens where application_id = ${appId}`);
  t.is(stored, responses.length - 1, 'every 201 stored its token, the 429 none');

  // Another organization has a budget of its own.
  const other = await app.createOrg();
  const otherApp = (await createApplication({ on: app, key: other.key })).id as string;
  const fresh = await requestLink(app, other.key, otherApp);
  t.is(fresh.status, 201);
  t.is(rate(fresh).remaining, 99);
});
