// refresh_success_rates (sql/009-success-rates.sql) recomputes the rates of endpoints and their
// applications from the last 24 h of endpoint_attempt_stats, whatever wrote the stats (a DBA's
// hand edit here): the endpoints' and their applications', in any grouping of the endpoints.
// (Recordings keep the rates through running sums instead: test/success-windows.test.ts.)
import test from 'ava';
import pg from 'pg';
import { startTestApp } from './helpers/app.ts';
import { createApplication, createEndpoint, createEventType } from './helpers/fixtures.ts';

const app = startTestApp();

/** Two applications, three endpoints each, and a client to the database closed at teardown. */
async function fixture(t: import('ava').ExecutionContext) {
  const { key } = await app.createOrg();
  const by = { on: app, key };
  await createEventType(by, 'rate.item');
  const applications: Array<{ id: string; endpoints: string[] }> = [];
  for (let a = 0; a < 2; a++) {
    const application = await createApplication(by);
    const endpoints: string[] = [];
    for (let e = 0; e < 3; e++) {
      endpoints.push((await createEndpoint(by, { application_id: application.id, url: `https://example.com/${a}/${e}`, event_types: ['rate.item'] })).id);
    }
    applications.push({ id: application.id, endpoints });
  }
  const db = new pg.Client({ connectionString: app.databaseUrl });
  await db.connect();
  t.teardown(() => db.end());
  return { db, applications };
}

type Rates = Record<string, string>;

/** Attempts and successes of each endpoint in the last hour, and one old minute outside the 24 h. */
async function record(db: pg.Client, stats: Array<[endpointId: string, attempts: number, successes: number]>) {
  for (const [endpointId, attempts, successes] of stats) {
    await db.query(
      `insert into endpoint_attempt_stats (endpoint_id, application_id, minute, attempts, successes)
       select id, application_id, date_trunc('minute', now()) - interval '5 minutes', $2, $3 from endpoints where id = $1
       union all
       select id, application_id, date_trunc('minute', now()) - interval '25 hours', 10, 0 from endpoints where id = $1
       on conflict (endpoint_id, minute) do update set attempts = excluded.attempts, successes = excluded.successes`,
      [endpointId, attempts, successes]);
  }
}

async function rates(db: pg.Client, ids: string[]): Promise<Rates> {
  const { rows } = await db.query<{ id: string; rate: string }>(
    `select id, success_rate::text as rate from endpoints where id = any($1)
     union all select id, success_rate::text from applications where id = any($1)`, [ids]);
  return Object.fromEntries(rows.map((row) => [row.id, row.rate]));
}

test('endpoints refreshed all at once or a few at a time get the same rates, old minutes left out', async (t) => {
  const { db, applications } = await fixture(t);
  const [first, second] = applications as [{ id: string; endpoints: string[] }, { id: string; endpoints: string[] }];
  const all = [...first.endpoints, ...second.endpoints];
  const ids = [...all, first.id, second.id];
  await record(db, [[all[0]!, 4, 3], [all[1]!, 2, 0], [all[2]!, 0, 0], [all[3]!, 3, 3], [all[4]!, 7, 1], [all[5]!, 1, 1]]);
  const expected: Rates = {
    [all[0]!]: '75.00', [all[1]!]: '0.00', [all[2]!]: '100.00', [all[3]!]: '100.00', [all[4]!]: '14.29', [all[5]!]: '100.00',
    [first.id]: '50.00', // 3 of 6
    [second.id]: '45.45', // 5 of 11
  };

  await db.query('select refresh_success_rates($1)', [all]); // all 6 endpoints
  t.deepEqual(await rates(db, ids), expected);

  await db.query(`update endpoints set success_rate = 1 where id = any($1)`, [all]);
  await db.query(`update applications set success_rate = 1 where id = any($1)`, [[first.id, second.id]]);
  await db.query('select refresh_success_rates($1)', [all.slice(0, 3)]); // one application's 3
  await db.query('select refresh_success_rates($1)', [[all[3], all[4], all[5], all[3]]]); // 4, one twice
  t.deepEqual(await rates(db, ids), expected);
});

test('an application is refreshed even when its endpoint\'s own rate stays the same', async (t) => {
  const { db, applications } = await fixture(t);
  const [a, b] = applications[0]!.endpoints as [string, string];
  await record(db, [[a, 1, 1], [b, 1, 0]]);
  await db.query('select refresh_success_rates($1)', [[a, b]]);
  t.like(await rates(db, [a, b, applications[0]!.id]), { [a]: '100.00', [b]: '0.00', [applications[0]!.id]: '50.00' });

  // a succeeds twice more: still 100%, but its application goes from 1 of 2 to 3 of 4
  await record(db, [[a, 3, 3]]);
  await db.query('select refresh_success_rates($1)', [[a]]);
  t.like(await rates(db, [a, applications[0]!.id]), { [a]: '100.00', [applications[0]!.id]: '75.00' });
});

test('the stats\' default window is the success rate\'s: the minute holding "24 hours ago" is in neither', async (t) => {
  // A DBA's probe: the stats counted that minute and the rates did not, so with a day of traffic
  // the two "last 24 hours" disagreed (115 of 215 against a rate of 100).
  const { key } = await app.createOrg();
  const by = { on: app, key };
  await createEventType(by, 'rate.item');
  const application = await createApplication(by);
  const endpoint = (await createEndpoint(by, { application_id: application.id, url: 'https://example.com/edge', event_types: ['rate.item'] })).id as string;
  const db = new pg.Client({ connectionString: app.databaseUrl });
  await db.connect();
  t.teardown(() => db.end());
  // At the first second of a minute the two edges are further apart than any request takes.
  const secondOfMinute = new Date().getUTCSeconds();
  if (secondOfMinute > 50) await new Promise((resolve) => setTimeout(resolve, (61 - secondOfMinute) * 1000));
  await db.query(
    `insert into endpoint_attempt_stats (endpoint_id, application_id, minute, attempts, successes)
     select id, application_id, date_trunc('minute', now() - interval '24 hours'), 100, 0 from endpoints where id = $1
     union all
     select id, application_id, date_trunc('minute', now() - interval '24 hours') + interval '1 minute', 10, 5 from endpoints where id = $1
     union all
     select id, application_id, date_trunc('minute', now()) - interval '1 minute', 10, 10 from endpoints where id = $1`, [endpoint]);
  await db.query('select refresh_success_rates($1)', [[endpoint]]);
  const rate = (await app.request('GET', `/v1/applications/${application.id}`, { key })).body.endpoints[0].success_rate;
  t.is(rate, 75); // 15 of 20: the boundary minute's 100 failures are out
  for (const path of [`/v1/endpoints/${endpoint}/stats`, '/v1/stats']) {
    const stats = (await app.request('GET', path, { key })).body;
    t.deepEqual(stats.totals, { attempts: 20, successes: 15, failures: 5 }, path);
    t.is(Date.parse(stats.data[0].start), Date.parse(stats.since), 'the first bucket starts at since');
  }
});
