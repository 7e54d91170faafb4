// What a keyboard-only probe of the dashboard found, each checked here as an operator meets it:
// - after Sign in with a wrong key, Generate portal link, Pause, Resume or Cancel (a job) the
//   keyboard focus was on the body (the button was disabled while its request ran, the sign-in
//   form was swapped for a spinner), so a second Enter did nothing;
// - the event type form's fields with an error had aria-describedby but no aria-invalid;
// - a key name with an unterminated U+202E reversed the rest of Revoke's confirm() text;
// - `#/settings` said "There is no page" without a level-one heading;
// - the focus ring (#93c5fd) had 1.8:1 contrast on white, under the 3:1 of WCAG 1.4.11;
// - Older pressed to reach a list's last page turned disabled under the focus, which fell to the
//   body; Newer back to the first page took the pager away while that page loaded, and the focus.
// Each request that matters is held (page.route) until the test has seen the page mid-action:
// nothing depends on timing. Screenshots: test-output/dashboard/.
import test, { type ExecutionContext } from 'ava';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { startTestApp } from './helpers/app.ts';
import { axe, focused, focusRingContrasts, hasChromium, hold, skipReason } from './helpers/browser.ts';
import { createApiKey, createApplication, createEndpoint, createEventType, createJob } from './helpers/fixtures.ts';
import { until } from './helpers/until.ts';
import { openPage as openSharedPage } from './portal-links/browser.ts';

const SHOTS = path.resolve('test-output/dashboard');
const app = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true' }); // no worker: a job stays queued, so it can be cancelled
const browserTest = hasChromium ? test.serial : test.skip;
const skip = skipReason;

/** A 1440×900 page of the app, any other host refused (the portal tests' openPage). */
const openPage = (t: ExecutionContext) => openSharedPage(t, [new URL(app.baseUrl).host], { width: 1440, height: 900 });

async function shot(page: Page, name: string) {
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`) });
}


/** Enter on the focused `name`, its request held: the button keeps the focus while busy and after. */
async function enterHeld(t: ExecutionContext, page: Page, name: string, request: Awaited<ReturnType<typeof hold>>, n: number) {
  await page.getByRole('button', { name, exact: true }).focus();
  await page.keyboard.press('Enter');
  await request.arrived(n);
  t.is(await focused(page), name, `${name}: the focus while its request runs`);
  request.release();
}

async function world(t: ExecutionContext) {
  const { key } = await app.createOrg();
  const by = { on: app, key, t };
  await createEventType(by, 'invoice.paid');
  const acme = await createApplication(by, { name: 'Acme Corp' });
  const endpoint = await createEndpoint(by, { application_id: acme.id, url: 'https://hooks.example.com/focus', event_types: ['invoice.paid'] });
  const job = await createJob(by, { application_id: acme.id, event_type: 'invoice.paid', payload: { n: 1 } });
  return { key, by, acme, endpoint, job };
}

browserTest(`the focus stays on the button after a refused sign-in, Generate portal link, Pause, Resume and Cancel${skip}`, async (t) => {
  const w = await world(t);
  const { page, errors, refused } = await openPage(t);
  await page.goto(`${app.baseUrl}/dashboard`);

  // A wrong key, with the keyboard: the sign-in form stays, and so does the focus.
  const credential = await hold(page, /\/v1\/credential$/, 'GET');
  await page.getByLabel('API key').fill('sk_live_NotAKeyOfAnyOrganizationAtAll012');
  await enterHeld(t, page, 'Sign in', credential, 1);
  await page.getByText(/This API key was not accepted/).waitFor();
  t.is(await focused(page), 'Sign in', 'the focus after the refusal');
  await shot(page, 'focus-wrong-key');
  await page.unroute(/\/v1\/credential$/);
  await page.getByLabel('API key').fill(w.key);
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { name: 'Overview' }).waitFor();

  await page.goto(`${app.baseUrl}/dashboard#/applications/${w.acme.id}`);
  const link = await hold(page, /\/portal-links$/, 'POST');
  await enterHeld(t, page, 'Generate portal link', link, 1);
  await page.getByRole('link', { name: 'Open the portal' }).waitFor();
  t.is(await focused(page), 'Generate portal link');

  await page.goto(`${app.baseUrl}/dashboard#/endpoints/${w.endpoint.id}`);
  const patch = await hold(page, new RegExp(`/v1/endpoints/${w.endpoint.id}$`), 'PATCH');
  await enterHeld(t, page, 'Pause', patch, 1);
  await page.getByText('Endpoint paused: deliveries are held until it is resumed.').waitFor();
  await page.getByRole('button', { name: 'Resume', exact: true }).waitFor();
  t.is(await focused(page), 'Resume', 'the focus on the button, now Resume');
  await page.keyboard.press('Enter'); // the second Enter
  await patch.arrived(2);
  patch.release();
  await page.getByText('Endpoint resumed.').waitFor();
  await page.getByRole('button', { name: 'Pause', exact: true }).waitFor();
  t.is(await focused(page), 'Pause');

  await page.goto(`${app.baseUrl}/dashboard#/jobs/${w.job.id}`);
  const cancel = await hold(page, /\/cancel$/, 'POST');
  await enterHeld(t, page, 'Cancel', cancel, 1); // the confirm is accepted
  await page.getByText('Job cancelled.').waitFor();
  // Once the job is read again Cancel is no longer possible: it says so, and keeps the focus.
  await until('Cancel off', async () => (await page.getByRole('button', { name: 'Cancel', exact: true }).getAttribute('aria-disabled')) === 'true');
  t.is(await focused(page), 'Cancel');
  await shot(page, 'focus-job-cancelled');
  await axe(t, page, 'a cancelled job');
  t.deepEqual(errors, []);
  t.deepEqual(refused, []);
});

async function signedIn(t: ExecutionContext, key: string, hash = '') {
  const session = await openPage(t);
  await session.page.goto(`${app.baseUrl}/dashboard`);
  await session.page.getByLabel('API key').fill(key);
  await session.page.getByRole('button', { name: 'Sign in' }).click();
  await session.page.getByRole('heading', { name: 'Overview' }).waitFor();
  if (hash) await session.page.goto(`${app.baseUrl}/dashboard${hash}`);
  return session;
}

browserTest(`the event type form marks each field with an error aria-invalid and focuses the first${skip}`, async (t) => {
  const w = await world(t);
  const { page } = await signedIn(t, w.key, '#/event-types');
  await page.getByRole('button', { name: 'New event type' }).click();
  await page.getByLabel('Name').fill('Not A Valid Name!');
  await page.getByRole('button', { name: 'Create event type' }).click();
  await page.getByRole('alert').first().waitFor();
  t.is(await page.getByLabel('Name').getAttribute('aria-invalid'), 'true');
  t.true(await page.getByLabel('Name').evaluate((element) => element === document.activeElement), 'the focus on the field with the error');
  t.is(await page.getByLabel('Description').getAttribute('aria-invalid'), null, 'a field without an error is not marked');
  await page.getByLabel('Name').fill('invoice.voided');
  await page.getByLabel('Payload schema (JSON Schema)').fill('{ not json');
  await page.getByRole('button', { name: 'Create event type' }).click();
  await page.getByText(/This is not valid JSON/).waitFor();
  t.is(await page.getByLabel('Payload schema (JSON Schema)').getAttribute('aria-invalid'), 'true');
  t.is(await page.getByLabel('Name').getAttribute('aria-invalid'), null, 'its error gone, the name is no longer marked');
  await shot(page, 'event-type-invalid');
  await axe(t, page, 'the event type form with an error');
});

browserTest(`a key name with a right-to-left override is isolated in Revoke's confirm text${skip}`, async (t) => {
  const w = await world(t);
  const name = 'deploy \u202Ebot';
  const evil = await createApiKey(w.by, { name, scopes: ['webhooks:read'] });
  const { page, dialogs } = await signedIn(t, w.key, '#/settings/api-keys');
  await page.getByRole('button', { name: `Revoke ${name}`, exact: true }).click();
  await page.getByText(`Key “${name}” revoked.`).waitFor();
  t.is(dialogs.length, 1);
  t.true(dialogs[0]!.includes(`“\u2068${name}\u2069” (${evil.prefix}…)`), JSON.stringify(dialogs[0]));
});

browserTest(`#/settings is the API keys page; an unknown page has a level-one heading${skip}`, async (t) => {
  const w = await world(t);
  const { page } = await signedIn(t, w.key, '#/settings');
  await page.getByRole('heading', { level: 1, name: 'Settings → API keys' }).waitFor();
  t.is(await page.getByText(/There is no page/).count(), 0);
  t.is(await page.getByRole('link', { name: /API keys/ }).getAttribute('aria-current'), 'page');
  await page.goto(`${app.baseUrl}/dashboard#/nowhere`);
  await page.getByText('There is no page “nowhere”.', { exact: false }).waitFor();
  t.is(await page.getByRole('heading', { level: 1 }).textContent(), 'Page not found');
  await shot(page, 'not-found');
  await axe(t, page, 'an unknown page');
});

browserTest(`the focus ring has 3:1 contrast with the background it is drawn on${skip}`, async (t) => {
  const w = await world(t);
  const { page } = await openPage(t);
  await page.goto(`${app.baseUrl}/dashboard`);
  const signIn = await focusRingContrasts(page, 3);
  await page.getByLabel('API key').fill(w.key);
  await page.keyboard.press('Enter');
  await page.getByRole('heading', { name: 'Overview' }).waitFor();
  await page.goto(`${app.baseUrl}/dashboard#/endpoints/${w.endpoint.id}`);
  await page.getByRole('heading', { name: 'Health' }).waitFor();
  const rings = [...signIn, ...await focusRingContrasts(page, 14)];
  t.true(rings.length >= 10, `${rings.length} rings seen`);
  t.true(rings.some((r) => r.on === 'rgb(248, 250, 252)'), 'one on the page background');
  t.true(rings.some((r) => r.on === 'rgb(255, 255, 255)'), 'one on a card');
  t.deepEqual(rings.filter((r) => r.ratio < 3), [], 'every ring reaches 3:1');
  await shot(page, 'focus-ring');
});

browserTest(`the focus stays on the pager when Older or Newer reaches the end of a list${skip}`, async (t) => {
  const w = await world(t); // one event type; 50 more make two pages of 50
  for (let i = 0; i < 50; i += 1) await createEventType(w.by, `invoice.kind${String(i).padStart(2, '0')}`);
  const { page, errors } = await signedIn(t, w.key, '#/event-types');
  const pager = page.getByRole('navigation', { name: 'Event type pages', exact: true });
  await pager.getByText('Page 1', { exact: true }).waitFor();
  for (const [name, shows] of [['Older', 'Page 2'], ['Newer', 'Page 1']] as const) {
    const button = pager.getByRole('button', { name, exact: true });
    await button.focus();
    await page.keyboard.press('Enter');
    await pager.getByText(shows, { exact: true }).waitFor();
    await until(`${name} off`, () => button.isDisabled()); // disabled or aria-disabled: once the page has loaded
    t.is(await focused(page), name, `the focus after ${name} reached the end`);
    t.is(await button.getAttribute('aria-disabled'), 'true', `${name} says it is off`);
    await page.keyboard.press('Enter'); // ignored: the same page, the focus still there
    t.is(await pager.getByText(shows, { exact: true }).count(), 1);
    t.is(await focused(page), name);
    if (name === 'Older') await shot(page, 'pager-focus-last-page');
  }
  t.true(await pager.getByRole('button', { name: 'Newer' }).isDisabled(), 'playwright counts aria-disabled as disabled');
  await axe(t, page, 'the event types with their pager');
  t.deepEqual(errors, []);
});
