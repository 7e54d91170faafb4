// What a keyboard-only probe of the portal found, each checked here as the customer meets it:
// - after Send test event, Pause, Resume or Rotate the keyboard focus was on the body (the
//   button was disabled while its request ran, and Pause was swapped for a new Resume button),
//   so a second Enter did nothing;
// - a rejected Save of a long form (150 event types) showed the error by the URL at its top while
//   the focus went to the body and the window stayed at the Save button;
// - a 429 of Send test event after a success showed "Test event sent" beside the error;
// - "← All endpoints" (or a delete) from an endpoint opened on page 2 of the list showed page 1;
// - the focus ring (#93c5fd) had 1.8:1 contrast on white, under the 3:1 of WCAG 1.4.11;
// - Next pressed to reach the list's last page (Previous its first) turned disabled under the
//   focus, which fell to the body; Older in an endpoint's attempt log took the pager away (and the
//   focus) while the older page loaded;
// - a refused rotation showed its error under the earlier rotation's "Secret rotated";
// - an action in one part of the endpoint's page left the last outcome of another part shown:
//   "Deliveries are resumed." beside "Secret rotated…", "Copied to the clipboard." beside both.
// Each request that matters is held (page.route) until the test has seen the page mid-action:
// nothing depends on timing. Screenshots: test-output/portal/.
import type { ExecutionContext } from 'ava';
import type { Page } from 'playwright-core';
import { createApplication, createEndpoint, createEventType } from './helpers/fixtures.ts';
import { focused, focusRingContrasts, hold } from './helpers/browser.ts';
import { until } from './helpers/until.ts';
import { axe, browserTest, magicLink, openPage, shot, skipped, startPortalApp } from './portal-links/browser.ts';

const app = startPortalApp({}, { worker: false });


async function endpointPage(t: ExecutionContext, eventTypes = 1) {
  const { key } = await app.createOrg();
  const by = { on: app, key, t };
  const names = Array.from({ length: eventTypes }, (_, i) => `invoice.kind${String(i).padStart(3, '0')}`);
  for (const name of names) await createEventType(by, name);
  const appId = (await createApplication(by, { name: 'Acme Corp' })).id as string;
  const endpoint = await createEndpoint(by, { application_id: appId, url: 'https://hooks.example.com/focus', event_types: [names[0]] });
  const link = await magicLink(t, app, key, appId);
  const session = await openPage(t, [new URL(link.url).host]);
  await session.page.goto(link.url);
  await session.page.getByRole('link', { name: 'https://hooks.example.com/focus' }).click();
  await session.page.getByRole('heading', { name: 'Signing secret' }).waitFor();
  return { ...session, key, appId, endpointId: endpoint.id as string };
}

/** Enter on `name` with the keyboard, its request held: the button keeps the focus while busy (aria-disabled) and after. */
async function enterHeld(t: ExecutionContext, page: Page, name: string, request: Awaited<ReturnType<typeof hold>>, n: number) {
  const button = page.getByRole('button', { name, exact: true });
  await button.focus();
  await page.keyboard.press('Enter');
  await request.arrived(n);
  t.is(await focused(page), name, `${name}: the focus while its request runs`);
  t.is(await button.getAttribute('aria-disabled'), 'true', `${name}: busy, and says so`);
  request.release();
}

browserTest(`the focus stays on the button after Send test event, Pause, Resume and Rotate, and a second Enter works${skipped}`, async (t) => {
  const { page, endpointId, errors } = await endpointPage(t);

  const test = await hold(page, new RegExp(`/v1/endpoints/${endpointId}/test$`), 'POST');
  await enterHeld(t, page, 'Send test event', test, 1);
  await page.getByText(/Test event sent \(job_/).waitFor();
  t.is(await focused(page), 'Send test event');

  // Pause, then Resume with a second Enter: the one button changes its words and keeps the focus.
  const patch = await hold(page, new RegExp(`/v1/endpoints/${endpointId}$`), 'PATCH');
  await enterHeld(t, page, 'Pause', patch, 1);
  await page.getByText('Deliveries are paused. They wait until you resume.').waitFor();
  t.is(await focused(page), 'Resume', 'the focus on the button, now Resume');
  await page.keyboard.press('Enter');
  await patch.arrived(2);
  patch.release();
  await page.getByText('Deliveries are resumed.').waitFor();
  t.is(await focused(page), 'Pause', 'the second Enter resumed, the focus still there');
  await shot(page, 'focus-after-resume', false);

  const rotate = await hold(page, new RegExp(`/v1/endpoints/${endpointId}/rotate-secret$`), 'POST'); // the confirm is accepted
  await enterHeld(t, page, 'Rotate', rotate, 1);
  await page.getByText(/Secret rotated\./).waitFor();
  t.is(await focused(page), 'Rotate');
  await axe(t, page, 'an endpoint after actions');
  t.deepEqual(errors, []);
});

browserTest(`a rejected Save of a form with 150 event types takes the focus to the URL and its error${skipped}`, async (t) => {
  const { page } = await endpointPage(t, 150);
  await page.getByRole('button', { name: 'Edit' }).click();
  await page.getByRole('heading', { name: 'Edit endpoint' }).waitFor();
  await page.getByLabel('Endpoint URL').fill('not a url');
  const save = page.getByRole('button', { name: 'Save changes' });
  await save.focus(); // at the bottom, past 150 event types
  await page.keyboard.press('Enter');
  const error = page.getByRole('alert').first();
  await error.waitFor();
  const url = page.getByLabel('Endpoint URL');
  t.true(await url.evaluate((element) => element === document.activeElement), `the focus is on the URL, not on ${await focused(page)}`);
  t.is(await url.getAttribute('aria-invalid'), 'true');
  t.true((await url.getAttribute('aria-describedby'))!.includes((await error.getAttribute('id'))!));
  const inView = (locator: typeof url) => locator.evaluate((element) => {
    const box = element.getBoundingClientRect();
    return box.top >= 0 && box.bottom <= window.innerHeight;
  });
  t.true(await inView(url), 'the URL field is in the window');
  t.true(await inView(error), 'its error is in the window');
  await shot(page, 'focus-rejected-save', false);
  await axe(t, page, 'the form after a rejected save');
});

browserTest(`a 429 of Send test event after a success replaces "Test event sent"${skipped}`, async (t) => {
  const { page, endpointId } = await endpointPage(t);
  const send = page.getByRole('button', { name: 'Send test event' });
  await send.click();
  const sent = page.getByText(/Test event sent \(job_/);
  await sent.waitFor();
  await page.route(new RegExp(`/v1/endpoints/${endpointId}/test$`), (route) => route.fulfill({
    status: 429, contentType: 'application/json', headers: { 'Retry-After': '60' },
    body: JSON.stringify({ error: { code: 'rate_limited', message: 'Too many requests. Try again in 60 seconds.' } }),
  }));
  await send.click();
  await page.getByRole('alert').filter({ hasText: 'Too many requests. Try again in 60 seconds.' }).waitFor();
  t.is(await sent.count(), 0, 'the earlier success is gone');
  await shot(page, 'test-event-429', false);
});

browserTest(`a refused rotation replaces "Secret rotated" with its error${skipped}`, async (t) => {
  const { page, endpointId, errors } = await endpointPage(t);
  const rotate = page.getByRole('button', { name: 'Rotate', exact: true });
  await rotate.click(); // the confirm is accepted
  const rotated = page.getByText(/^Secret rotated\./);
  await rotated.waitFor();
  await page.route(new RegExp(`/v1/endpoints/${endpointId}/rotate-secret$`), (route) => route.fulfill({
    status: 503, contentType: 'application/json',
    body: JSON.stringify({ error: { code: 'unavailable', message: 'The service is busy. Try again shortly.' } }),
  }));
  await rotate.click();
  const panel = page.getByRole('region', { name: 'Signing secret' });
  await panel.getByRole('alert').filter({ hasText: 'The service is busy. Try again shortly.' }).waitFor();
  t.is(await rotated.count(), 0, 'the earlier rotation\'s outcome is gone');
  await shot(page, 'rotate-refused-after-rotation', false);
  t.deepEqual(errors, []);
});

browserTest(`one outcome at a time across the endpoint's page: the header's actions, the secret's and a recovery replace each other's${skipped}`, async (t) => {
  const { page, errors } = await endpointPage(t);
  const paused = page.getByText('Deliveries are paused. They wait until you resume.');
  await page.getByRole('button', { name: 'Pause', exact: true }).click();
  await paused.waitFor();
  await page.getByRole('button', { name: 'Rotate', exact: true }).click(); // the confirm is accepted
  const rotated = page.getByText(/^Secret rotated\./);
  await rotated.waitFor();
  t.is(await paused.count(), 0, 'the pause\'s message is gone');
  await page.getByRole('button', { name: 'Send test event' }).click();
  await page.getByText(/Test event sent \(job_/).waitFor();
  t.is(await rotated.count(), 0, 'the rotation\'s message is gone');
  await page.getByRole('button', { name: 'Hide' }).click(); // not an action with an outcome (the rotation showed the secret): nothing changes
  t.is(await page.getByText(/Test event sent \(job_/).count(), 1);
  await page.getByRole('button', { name: 'Recover' }).click();
  await page.getByText('No failed deliveries in that range.').waitFor();
  t.is(await page.getByText(/Test event sent \(job_/).count(), 0, 'the test event\'s message is gone');
  await page.getByRole('button', { name: 'Resume', exact: true }).click();
  await page.getByText('Deliveries are resumed.').waitFor();
  t.is(await page.getByText('No failed deliveries in that range.').count(), 0, 'the recovery\'s message is gone');
  await shot(page, 'one-outcome-at-a-time', false);
  t.deepEqual(errors, []);
});

browserTest(`"← All endpoints" and a delete return to the page of the list the endpoint was opened from${skipped}`, async (t) => {
  const { key } = await app.createOrg();
  const by = { on: app, key, t };
  await createEventType(by, 'invoice.paid');
  const appId = (await createApplication(by, { name: 'Acme Corp' })).id as string;
  for (let i = 0; i < 30; i += 1) await createEndpoint(by, { application_id: appId, url: `https://hooks.example.com/n${String(i).padStart(2, '0')}` });
  const link = await magicLink(t, app, key, appId);
  const { page } = await openPage(t, [new URL(link.url).host]);
  await page.goto(link.url);
  const pager = page.getByRole('navigation', { name: 'Endpoint pages' });
  await pager.getByText('Page 1 of 2').waitFor();
  await pager.getByRole('button', { name: 'Next' }).click();
  await pager.getByText('Page 2 of 2').waitFor();
  const onPage2 = await page.getByRole('table').getByRole('link').allTextContents();
  t.is(onPage2.length, 5);

  await page.getByRole('link', { name: onPage2[0] }).click();
  await page.getByRole('button', { name: '← All endpoints' }).click();
  await page.getByRole('link', { name: onPage2[1] }).waitFor();
  t.is(await pager.getByText('Page 2 of 2').count(), 1, 'back on page 2');

  await page.getByRole('link', { name: onPage2[1] }).click();
  await page.getByRole('button', { name: 'Delete' }).click(); // the confirm is accepted
  await page.getByText(/Endpoint deleted\./).waitFor();
  await page.getByRole('link', { name: onPage2[2] }).waitFor();
  t.is(await pager.getByText('Page 2 of 2').count(), 1, 'on page 2 after the delete');
  t.is(await page.getByRole('table').getByRole('link').count(), 4);
  await shot(page, 'list-page-2-after-delete');
});

browserTest(`the focus ring has 3:1 contrast with the background it is drawn on${skipped}`, async (t) => {
  const { page } = await endpointPage(t);
  await page.evaluate(() => { (document.activeElement as HTMLElement | null)?.blur(); window.scrollTo(0, 0); });
  const rings = await focusRingContrasts(page, 16);
  t.true(rings.length >= 10, `${rings.length} rings seen`);
  t.true(rings.some((r) => r.on === 'rgb(248, 250, 252)'), 'one on the page background');
  t.true(rings.some((r) => r.on === 'rgb(255, 255, 255)'), 'one on a card');
  t.deepEqual(rings.filter((r) => r.ratio < 3), [], 'every ring reaches 3:1');
  await page.getByRole('button', { name: 'Send test event' }).focus();
  await page.keyboard.press('Shift+Tab');
  await page.keyboard.press('Tab'); // by the keyboard: :focus-visible
  await shot(page, 'focus-ring', false);
});

/** Enter on the pager's `name` button, by the keyboard, until `shows` is in the pager; the focus then stays on that button, which says it is off. */
async function pageWithKeyboard(t: ExecutionContext, page: Page, pager: string, name: string, shows: string) {
  const nav = page.getByRole('navigation', { name: pager, exact: true });
  const button = nav.getByRole('button', { name, exact: true });
  await button.focus();
  await page.keyboard.press('Enter');
  await nav.getByText(shows, { exact: true }).waitFor();
  t.is(await focused(page), name, `${pager}: the focus after ${name} reached the end`);
  t.is(await button.getAttribute('aria-disabled'), 'true', `${pager}: ${name} says it is off`);
  await page.keyboard.press('Enter'); // ignored: still the same page, the focus still there
  t.is(await nav.getByText(shows, { exact: true }).count(), 1);
  t.is(await focused(page), name);
}

browserTest(`the focus stays on the pager when Next or Previous reaches the end of the endpoint list${skipped}`, async (t) => {
  const { key } = await app.createOrg();
  const by = { on: app, key, t };
  const appId = (await createApplication(by, { name: 'Acme Corp' })).id as string;
  for (let i = 0; i < 26; i += 1) await createEndpoint(by, { application_id: appId, url: `https://hooks.example.com/p${String(i).padStart(2, '0')}` });
  const link = await magicLink(t, app, key, appId);
  const { page, errors } = await openPage(t, [new URL(link.url).host]);
  await page.goto(link.url);
  await page.getByRole('navigation', { name: 'Endpoint pages' }).getByText('Page 1 of 2').waitFor();

  // Next to the last page, then Previous to the first: the button pressed turns off under the focus.
  await pageWithKeyboard(t, page, 'Endpoint pages', 'Next', 'Page 2 of 2');
  await shot(page, 'pager-focus-last-page', false);
  await pageWithKeyboard(t, page, 'Endpoint pages', 'Previous', 'Page 1 of 2');
  await axe(t, page, 'the endpoint list with its pager');
  t.deepEqual(errors, []);
});

browserTest(`the focus stays on the attempt log's pager while Older loads and when Older or Newer reaches the end${skipped}`, async (t) => {
  const { page, errors } = await endpointPage(t);
  // The attempt log's cursor pager, its two pages made up (this app delivers nothing). Page 2 is
  // held until the test has seen the log loading it: the pager stays meanwhile, and so does the focus.
  let asked = 0;
  let release = () => {};
  const released = new Promise<void>((resolve) => { release = resolve; });
  await page.route(/\/v1\/endpoints\/[^/]+\/attempts(\?|$)/, async (route) => {
    const cursor = new URL(route.request().url()).searchParams.get('cursor');
    if (cursor) { asked += 1; await released; }
    return route.fulfill({ contentType: 'application/json', body: JSON.stringify({ data: [], next_cursor: cursor ? null : 'older' }) });
  });
  await page.getByRole('button', { name: 'Refresh' }).click(); // the log read again, through the made-up pages
  const attempts = page.getByRole('navigation', { name: 'Attempt pages', exact: true });
  await attempts.getByText('Page 1', { exact: true }).waitFor();
  await attempts.getByRole('button', { name: 'Older' }).focus();
  await page.keyboard.press('Enter');
  await until('page 2 of the attempts asked', () => asked >= 1);
  t.is(await focused(page), 'Older', 'the focus while the older attempts load');
  release();
  await attempts.getByText('Page 2', { exact: true }).waitFor();
  t.is(await focused(page), 'Older', 'the focus once the last page is shown');
  t.is(await attempts.getByRole('button', { name: 'Older' }).getAttribute('aria-disabled'), 'true');
  await shot(page, 'pager-focus-attempts-last-page', false);
  await pageWithKeyboard(t, page, 'Attempt pages', 'Newer', 'Page 1');
  await axe(t, page, 'an endpoint with its attempt pager');
  t.deepEqual(errors, []);
});
