// Lists longer than a page, in both pages (headless Chromium, real data made through the API):
// none shows its first page as if it were all. The portal pages its endpoints and deleted
// endpoints (25 a page), offers every event type in the endpoint form (the API's pages are 100),
// and pages an endpoint's attempt log (50 a page, older through the cursor); the dashboard pages
// an application's deleted endpoints, the event types, the API keys and the operational events,
// and lists every operational endpoint. Each pager is a navigation landmark of its own name;
// axe-core finds nothing serious on the paged views. Screenshots: test-output/portal/long-*.
import test, { type ExecutionContext } from 'ava';
import type { Page } from 'playwright-core';
import { createApiKey as createKeyRow } from '../src/core/api-keys.ts';
import { createApplication, createEndpoint, createEventType, createJob, type By } from './helpers/fixtures.ts';
import { startReceiver } from './helpers/receiver.ts';
import { until } from './helpers/until.ts';
import { axe, browserTest, magicLink, openPage, shot, skipped, startPortalApp } from './portal-links/browser.ts';

const app = startPortalApp({ MAX_OPERATIONAL_ENDPOINTS: '150' });

const ENDPOINTS = 30; // live endpoints of the application: 2 pages of 25
const DELETED = 26; // deleted ones: 2 pages of 25 in the portal, 2 of 20 in the dashboard
const EVENT_TYPES = 105; // 2 pages of 100 for the portal's form, 3 of 50 in the dashboard
const ATTEMPTS = 55; // 2 pages of 50 in the portal's attempt log
const OPERATIONAL = 101; // 2 pages of 100 for the dashboard's list of them
const KEYS = 55; // and the organization's own: 2 pages of 50

const names = (n: number) => Array.from({ length: n }, (_, i) => `evt.n${String(i).padStart(3, '0')}`);

/** An organization whose every list is longer than a page. */
async function world(t: ExecutionContext) {
  const receiver = await startReceiver();
  t.teardown(() => receiver.close());
  const org = await app.createOrg();
  const by: By = { on: app, key: org.key };
  // Operational endpoints first: their events record the endpoints' creations and deletes below.
  // The oldest takes every event (to the receiver); the others only an event nothing here causes,
  // so each event has one delivery, to an endpoint past the first page of 100.
  for (let i = 0; i < OPERATIONAL; i += 1) {
    const body = i === 0 ? { url: receiver.at('/ops') } : { url: `https://ops.example.com/hook/${i}`, event_types: ['delivery.exhausted'] };
    const res = await app.request('POST', '/v1/operational-webhooks/endpoints', { key: org.key, body });
    if (res.status !== 201) throw new Error(`operational endpoint: ${res.status}`);
  }
  for (const name of names(EVENT_TYPES)) await createEventType(by, name);
  const appId = (await createApplication(by, { name: 'Acme Corp' })).id as string;
  // The oldest endpoint receives the attempts: it is on the list's second page.
  const logged = await createEndpoint(by, { application_id: appId, url: receiver.at('/logged'), event_types: ['evt.n000'] });
  for (let i = 1; i < ENDPOINTS; i += 1) await createEndpoint(by, { application_id: appId, url: receiver.at(`/live/${i}`) });
  for (let i = 0; i < DELETED; i += 1) {
    const gone = await createEndpoint(by, { application_id: appId, url: receiver.at(`/deleted/${i}`) });
    t.is((await app.request('DELETE', `/v1/endpoints/${gone.id}`, { key: org.key })).status, 200);
  }
  for (let i = 0; i < ATTEMPTS; i += 1) await createJob(by, { application_id: appId, event_type: 'evt.n000', payload: { n: i } });
  for (let i = 0; i < KEYS; i += 1) {
    await createKeyRow(app.pool, { orgId: org.orgId, environment: 'live', name: `key ${i}`, scopes: ['*'], expiresAt: null });
  }
  await until('every job delivered', () => receiver.arrivals.filter((a) => a.url === '/logged').length >= ATTEMPTS);
  return { ...org, appId, logged: receiver.at('/logged') as string, loggedId: logged.id as string };
}

const pager = (page: Page, name: string) => page.getByRole('navigation', { name, exact: true });
/** A dashboard route, as its links go there (the key stays in the page). */
const go = (page: Page, hash: string) => page.evaluate((to) => { window.location.hash = to; }, hash);

browserTest(`the portal pages its endpoints, deleted endpoints and attempts, and offers every event type${skipped}`, async (t) => {
  const w = await world(t);
  const link = await magicLink(t, app, w.key, w.appId);
  const { page, refused, errors } = await openPage(t, [new URL(link.url).host]);
  await page.goto(link.url);
  await page.getByRole('heading', { name: 'Endpoints', exact: true }).waitFor();

  const rows = page.locator('table.endpoints tbody tr');
  await pager(page, 'Endpoint pages').getByText('Page 1 of 2').waitFor();
  t.is(await rows.count(), 25);
  t.is(await page.getByRole('link', { name: w.logged }).count(), 0, 'the oldest endpoint is not on the first page');
  await pager(page, 'Deleted endpoint pages').getByText('Page 1 of 2').waitFor();
  t.is(await page.locator('ul.deleted li').count(), 25);
  await shot(page, 'long-endpoints');
  await axe(t, page, 'the paged endpoint lists');

  await pager(page, 'Deleted endpoint pages').getByRole('button', { name: 'Next' }).click();
  await pager(page, 'Deleted endpoint pages').getByText('Page 2 of 2').waitFor();
  t.is(await page.locator('ul.deleted li').count(), DELETED - 25);
  await pager(page, 'Endpoint pages').getByRole('button', { name: 'Next' }).click();
  await pager(page, 'Endpoint pages').getByText('Page 2 of 2').waitFor();
  t.is(await rows.count(), ENDPOINTS - 25);
  t.true(await pager(page, 'Endpoint pages').getByRole('button', { name: 'Next' }).isDisabled());

  // The attempt log: 50, then the older 5, then back.
  await page.getByRole('link', { name: w.logged }).click();
  await page.getByRole('heading', { name: w.logged }).waitFor();
  const attempts = page.getByRole('list', { name: 'Attempts' }).locator(':scope > li');
  await pager(page, 'Attempt pages').getByText('Page 1').waitFor();
  t.is(await attempts.count(), 50);
  await pager(page, 'Attempt pages').getByRole('button', { name: 'Older' }).click();
  await pager(page, 'Attempt pages').getByText('Page 2').waitFor();
  await until('the older attempts shown', async () => (await attempts.count()) === ATTEMPTS - 50);
  t.true(await pager(page, 'Attempt pages').getByRole('button', { name: 'Older' }).isDisabled());
  await shot(page, 'long-attempts');
  await axe(t, page, 'the attempt log\'s second page');
  await pager(page, 'Attempt pages').getByRole('button', { name: 'Newer' }).click();
  await pager(page, 'Attempt pages').getByText('Page 1').waitFor();
  await until('the newest attempts shown again', async () => (await attempts.count()) === 50);

  // The form offers the 105th event type, on the API's second page: through its filter, and
  // among all of them once asked (50 rows are drawn at first: test/portal-big-tenant.test.ts).
  await page.getByRole('button', { name: '← All endpoints' }).click();
  await page.getByRole('button', { name: 'Add endpoint' }).click();
  const filter = page.getByRole('searchbox', { name: 'Filter event types' });
  await filter.fill('evt.n104');
  await page.getByRole('checkbox', { name: /evt\.n104/ }).waitFor();
  t.is(await page.getByRole('checkbox').count(), 1);
  await filter.fill('');
  await page.getByRole('button', { name: `Show all ${EVENT_TYPES} event types` }).click();
  await page.getByRole('checkbox', { name: /evt\.n104/ }).waitFor();
  t.is(await page.getByRole('checkbox').count(), EVENT_TYPES);

  t.deepEqual(refused, []);
  t.deepEqual(errors, []);
});

browserTest(`the dashboard pages deleted endpoints, event types, keys and operational events, and lists every operational endpoint${skipped}`, async (t) => {
  const w = await world(t);
  const { page, refused, errors } = await openPage(t, [new URL(app.baseUrl).host], { width: 1440, height: 900 });
  await page.goto(`${app.baseUrl}/dashboard`);
  await page.getByLabel('API key').fill(w.key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Dashboard' }).waitFor();

  await go(page, `#/applications/${w.appId}`);
  await page.getByRole('heading', { name: 'Acme Corp' }).waitFor();
  const deleted = page.locator('ul.deleted li');
  await pager(page, 'Deleted endpoint pages').getByText('Page 1 of 2').waitFor();
  t.is(await deleted.count(), 20);
  await pager(page, 'Deleted endpoint pages').getByRole('button', { name: 'Next' }).click();
  await pager(page, 'Deleted endpoint pages').getByText('Page 2 of 2').waitFor();
  t.is(await deleted.count(), DELETED - 20);

  await go(page, '#/event-types');
  const typeRows = page.locator('table.list tbody tr');
  await pager(page, 'Event type pages').getByText('Page 1').waitFor();
  t.is(await typeRows.count(), 50);
  // Newest first: each page's first row names its own type (a count alone passed on the rows of
  // the page before, still shown while the next one loads).
  const newest = (n: number) => `evt.n${String(EVENT_TYPES - 1 - 50 * (n - 1)).padStart(3, '0')}`;
  const shows = async (n: number, count: number) => (await typeRows.count()) === count
    && (await typeRows.first().locator('td').first().textContent()) === newest(n);
  await until('event type page 1', () => shows(1, 50));
  // "Older" clicked again while page 2 loads (its request held for a second) takes page 2 once,
  // not page 3 over page 2's rows.
  let held = 0;
  const older = (url: URL) => url.pathname === '/v1/event-types' && url.searchParams.has('cursor');
  await page.route(older, async (route) => {
    held += 1;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await route.continue();
  });
  await pager(page, 'Event type pages').getByRole('button', { name: 'Older' }).click();
  await pager(page, 'Event type pages').getByText('Page 2').waitFor();
  await pager(page, 'Event type pages').getByRole('button', { name: 'Older' }).click();
  await until('event type page 2', () => shows(2, 50));
  t.is(await pager(page, 'Event type pages').locator('span').textContent(), 'Page 2');
  t.is(held, 1, 'one request for page 2');
  await page.unroute(older);
  await pager(page, 'Event type pages').getByRole('button', { name: 'Older' }).click();
  await pager(page, 'Event type pages').getByText('Page 3').waitFor();
  await until('event type page 3', () => shows(3, EVENT_TYPES - 100));
  t.true(await pager(page, 'Event type pages').getByRole('button', { name: 'Older' }).isDisabled());
  await shot(page, 'long-dashboard-event-types');
  await axe(t, page, 'the event types\' last page');

  await go(page, '#/settings/api-keys');
  const keyRows = page.locator('section[aria-labelledby="keys"] table.list tbody tr');
  await pager(page, 'Key pages').getByText('Page 1').waitFor();
  t.is(await keyRows.count(), 50);
  await pager(page, 'Key pages').getByRole('button', { name: 'Older' }).click();
  await pager(page, 'Key pages').getByText('Page 2').waitFor();
  await until('the older keys', async () => (await keyRows.count()) === KEYS + 1 - 50);

  await go(page, '#/operational');
  const opRows = page.locator('section[aria-labelledby="op-endpoints"] table.list tbody tr');
  await until('every operational endpoint listed', async () => (await opRows.count()) === OPERATIONAL);
  const eventRows = page.locator('section[aria-labelledby="op-events"] table.list tbody tr');
  await pager(page, 'Event pages').getByText('Page 1').waitFor();
  t.is(await eventRows.count(), 25);
  await pager(page, 'Event pages').getByRole('button', { name: 'Older' }).click();
  await pager(page, 'Event pages').getByText('Page 2').waitFor();
  t.false(await page.getByText('a deleted endpoint').first().isVisible().catch(() => false), 'every delivery names a listed endpoint');
  await shot(page, 'long-dashboard-operational');
  await axe(t, page, 'the operational page with its events\' second page');

  t.deepEqual(refused, []);
  t.deepEqual(errors, []);
});
