// The portal of a big tenant, as a probe met it (one application with 2,000 endpoints and 1,501
// event types): the first render walked every page of the event types, one after another, and
// read the application twice before it asked for the endpoints (2.1 s); "Add endpoint" drew all
// 1,501 checkboxes in one list 130,000 px tall, with no way to find one. Checked here in requests
// made and in what the page shows, never in time: 1,500 event types (written in SQL, as
// test/event-types/list.test.ts does), their later pages held until the test has seen the page.
// Screenshots: test-output/portal/.
import type { ExecutionContext } from 'ava';
import type { Request } from 'playwright-core';
import { sql } from 'slonik';
import { createApplication, createEndpoint } from './helpers/fixtures.ts';
import { axe, browserTest, magicLink, openPage, shot, skipped, startPortalApp } from './portal-links/browser.ts';

const app = startPortalApp({}, { worker: false });

const TYPES = 1_500;
const GROUPS = ['billing', 'customer', 'invoice', 'order', 'shipment'];
/** `order.event_0042`: the group cycles, the number is the type's own. */
const typeName = (i: number) => `${GROUPS[i % GROUPS.length]}.event_${String(i).padStart(4, '0')}`;

async function bigTenant(t: ExecutionContext, linkBody: Record<string, unknown> = {}) {
  const { key, orgId } = await app.createOrg();
  await app.pool.query(sql.unsafe`
    insert into event_types (id, org_id, environment, name)
    select 'evt_' || substr(${orgId}, 5, 20) || lpad(i::text, 7, '0'), ${orgId}, 'live',
      (${sql.array(GROUPS, 'text')})[i % ${GROUPS.length} + 1] || '.event_' || lpad(i::text, 4, '0')
    from generate_series(0, ${TYPES - 1}) i`);
  const by = { on: app, key, t };
  const appId = (await createApplication(by, { name: 'Big Corp' })).id as string;
  const endpoint = await createEndpoint(by, { application_id: appId, url: 'https://hooks.example.com/big', event_types: [typeName(1499)] });
  const link = await magicLink(t, app, key, appId, linkBody);
  const session = await openPage(t, [new URL(link.url).host]);
  /** Every request the page made, in the order it made them: "GET /v1/…?…". */
  const requests: string[] = [];
  session.page.on('request', (request: Request) => {
    const url = new URL(request.url());
    if (url.pathname.startsWith('/v1/')) requests.push(`${request.method()} ${url.pathname}${url.search}`);
  });
  return { ...session, key, appId, link, endpointId: endpoint.id as string, requests };
}

browserTest(`a big tenant's first render reads the application once and asks for the endpoints without waiting for the event types${skipped}`, async (t) => {
  const { page, link, appId, requests, errors } = await bigTenant(t);
  // The event types held: the list must show without them (it waited for all 15 pages).
  let release = () => {};
  const released = new Promise<void>((resolve) => { release = resolve; });
  await page.route(/\/v1\/event-types/, async (route) => { await released; return route.continue(); });
  await page.goto(link.url);
  await page.getByRole('link', { name: 'https://hooks.example.com/big' }).waitFor({ timeout: 30_000 });
  t.deepEqual(requests.filter((r) => r.startsWith('GET /v1/event-types')), ['GET /v1/event-types?limit=100'], 'the first page of event types asked for, held');
  t.is(await page.getByText('Big Corp', { exact: true }).count(), 1, 'the application\'s name in the header');
  await shot(page, 'big-tenant-list');

  // The form opens while the event types are still read: its URL is there to type in.
  await page.getByRole('button', { name: 'Add endpoint' }).click();
  await page.getByLabel('Endpoint URL').fill('https://hooks.example.com/new');
  await page.getByText('Loading event types…').waitFor();
  release();
  await page.getByLabel('Filter event types').waitFor();

  const application = requests.filter((r) => r === `GET /v1/applications/${appId}`);
  const eventTypePages = requests.filter((r) => r.startsWith('GET /v1/event-types'));
  t.log(requests.map((r) => r.replace(/cursor=[^&]+/, 'cursor=…')).join('\n'));
  t.is(application.length, 1, 'one GET of the application (its answer carries every endpoint)');
  t.is(eventTypePages.length, TYPES / 100, 'each page of the event types read once, for the list and the form');
  await axe(t, page, 'the form of a big tenant');
  t.deepEqual(errors, []);
});

browserTest(`the event type picker filters 1,500 types by name, says how many match, and keeps a picked one picked${skipped}`, async (t) => {
  const { page, link, key, requests, errors } = await bigTenant(t);
  await page.goto(link.url);
  await page.getByRole('button', { name: 'Add endpoint' }).click();
  const filter = page.getByLabel('Filter event types');
  await filter.waitFor();
  const boxes = page.getByRole('checkbox');
  const status = page.getByRole('status').filter({ hasText: 'event type' });
  t.is(await status.textContent(), 'Showing 50 of 1,500 event types. Filter by name to find the others.');
  t.is(await boxes.count(), 50, 'a page of rows, not 1,500');
  const nodes = await page.locator('form *').count();
  t.log(`${nodes} elements in the form`);
  t.true(nodes < 1_000, `${nodes} elements in the form`);
  await shot(page, 'big-tenant-form', false);

  // Narrowed by name, from the keyboard: the one type, picked with Space.
  await page.getByLabel('Endpoint URL').fill('https://hooks.example.com/picked');
  await filter.focus();
  await page.keyboard.type('event_0042');
  await status.filter({ hasText: '1 of 1,500 event types matches.' }).waitFor();
  t.deepEqual(await boxes.evaluateAll((all) => all.map((box) => (box as HTMLInputElement).value)), [typeName(42)]);
  await page.keyboard.press('Tab');
  await page.keyboard.press('Space');
  t.true(await page.getByRole('checkbox', { name: typeName(42) }).isChecked());

  // Filtered out, it stays picked, and says so; back in the list, it is still checked.
  await filter.fill('event_001');
  await status.filter({ hasText: '10 of 1,500 event types match.' }).waitFor();
  const names = await boxes.evaluateAll((all) => all.map((box) => (box as HTMLInputElement).value));
  t.deepEqual(names, Array.from({ length: 10 }, (_, i) => typeName(10 + i)).sort());
  t.is(await page.locator('.chosen').textContent(), `1 picked: ${typeName(42)}`);
  await page.getByRole('checkbox', { name: typeName(13) }).check();
  await filter.fill('no such type');
  await status.filter({ hasText: 'No event type matches “no such type”.' }).waitFor();
  t.is(await boxes.count(), 0);
  await filter.fill('0042');
  await status.filter({ hasText: '1 of 1,500 event types matches.' }).waitFor();
  t.true(await page.getByRole('checkbox', { name: typeName(42) }).isChecked(), 'still picked after being filtered out');
  await shot(page, 'big-tenant-form-filtered', false);
  await axe(t, page, 'the picker, filtered');

  // A wide filter shows a page of its matches, and all of them on demand.
  await filter.fill('order.');
  await status.filter({ hasText: '300 of 1,500 event types match.' }).waitFor();
  t.is(await boxes.count(), 50);
  await page.getByRole('button', { name: 'Show all 300 matching event types' }).click();
  t.is(await boxes.count(), 300);

  await page.getByRole('button', { name: 'Create endpoint' }).click();
  await page.getByRole('heading', { name: 'Signing secret' }).waitFor();
  t.is(requests.filter((r) => r.startsWith('GET /v1/event-types')).length, TYPES / 100, 'the form read no event types of its own');
  const created = await app.request('GET', `/v1/endpoints?per_page=100`, { key });
  const picked = created.body.data.find((e: { url: string }) => e.url === 'https://hooks.example.com/picked');
  t.deepEqual(picked?.event_types, [typeName(13), typeName(42)].sort());
  t.deepEqual(errors, []);
});

browserTest(`editing an endpoint lists its own event types first, picked, however far down the alphabet${skipped}`, async (t) => {
  const { page, link } = await bigTenant(t);
  await page.goto(link.url);
  await page.getByRole('link', { name: 'https://hooks.example.com/big' }).click();
  await page.getByRole('button', { name: 'Edit' }).click();
  await page.getByLabel('Filter event types').waitFor();
  const first = page.getByRole('checkbox').first();
  t.is(await first.getAttribute('value'), typeName(1499));
  t.true(await first.isChecked());
  t.is(await page.locator('.chosen').textContent(), `1 picked: ${typeName(1499)}`);
  await shot(page, 'big-tenant-edit', false);
  await page.setViewportSize({ width: 390, height: 844 });
  await page.getByLabel('Filter event types').fill('shipment.event_14');
  await page.getByRole('status').filter({ hasText: '20 of 1,500 event types match.' }).waitFor();
  t.is(await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth), 0, 'no sideways scroll at 390 px');
  await shot(page, 'big-tenant-edit-filtered', false);
});

browserTest(`the endpoint page's refresh reads the endpoint and its stats, its success rate from them, not the whole application${skipped}`, async (t) => {
  // It read the application (232 KB with 2,000 endpoints) every 3 seconds for one number.
  const { page, link, appId, endpointId, requests, errors } = await bigTenant(t);
  await app.pool.query(sql.unsafe`
    insert into endpoint_attempt_stats (endpoint_id, application_id, minute, attempts, successes)
    values (${endpointId}, ${appId}, date_trunc('minute', now()) - interval '5 minutes', 8, 6)`);
  await app.pool.query(sql.unsafe`select refresh_success_rates(${sql.array([endpointId], 'text')})`);
  await page.goto(link.url);
  await page.getByRole('link', { name: 'https://hooks.example.com/big' }).click();
  await page.getByText('75.0% success (24 h)').waitFor();
  const reads = () => requests.filter((r) => r === `GET /v1/endpoints/${endpointId}`).length;
  const before = reads();
  for (let waited = 0; reads() < before + 2 && waited < 30_000; waited += 250) await new Promise((resolve) => setTimeout(resolve, 250));
  t.true(reads() >= before + 2, 'two refreshes of the endpoint');
  t.deepEqual(requests.filter((r) => r === `GET /v1/applications/${appId}`), [`GET /v1/applications/${appId}`], 'the application read once, by the first view');
  await shot(page, 'big-tenant-endpoint');
  t.deepEqual(errors, []);
});

browserTest(`a read-only link reads no event types: only the endpoint form, which it never opens, uses them${skipped}`, async (t) => {
  const { page, link, endpointId, requests, errors } = await bigTenant(t, { read_only: true });
  await page.goto(link.url);
  await page.getByRole('link', { name: 'https://hooks.example.com/big' }).click();
  const reads = () => requests.filter((r) => r === `GET /v1/endpoints/${endpointId}`).length;
  for (let waited = 0; reads() < 2 && waited < 30_000; waited += 250) await new Promise((resolve) => setTimeout(resolve, 250));
  t.true(reads() >= 2, 'the endpoint page shown and refreshed once');
  t.is(await page.getByRole('button', { name: 'Edit' }).count(), 0, 'read-only: no form to open');
  t.deepEqual(requests.filter((r) => r.startsWith('GET /v1/event-types')), []);
  await shot(page, 'big-tenant-read-only');
  t.deepEqual(errors, []);
});
