// A customer's session in the portal, through a real magic link (the `url` POST
// /v1/applications/{id}/portal-links returns), driven in headless Chromium as a person would:
// the empty state; add an endpoint for a local receiver (the API's validation error next to
// the field first); send a test event and see it in the attempt log with its response body and
// in the chart; reveal and rotate the secret (the old one's expiry shown); edit; pause and
// resume; delete and restore. Then the same application at phone size. Every screen passes
// axe-core, and no request leaves for another host. Screenshots: test-output/portal/.
import test from 'ava';
import { sql } from 'slonik';
import { z } from 'zod';
import { createApplication, createEventType } from './helpers/fixtures.ts';
import { startReceiver } from './helpers/receiver.ts';
import { until } from './helpers/until.ts';
import { axe, browserTest, magicLink, openPage, shot, skipped, startPortalApp } from './portal-links/browser.ts';

const app = startPortalApp();

test('the portal link is PUBLIC_URL (by default http://localhost:<PORT>) + /portal#<token>', (t) => {
  t.regex(app.config.publicUrl, /^http:\/\/localhost:\d+$/);
  t.not(app.config.publicUrl, 'http://localhost:0');
});

browserTest(`a customer session through a real magic link, at 1280×800 then 390×844${skipped}`, async (t) => {
  const receiver = await startReceiver(() => ({ status: 200, body: 'thanks from the receiver' }));
  const { key } = await app.createOrg();
  const by = { on: app, key, t };
  await createEventType(by, {
    name: 'invoice.paid', description: 'An invoice was paid.',
    schema: { type: 'object', required: ['invoice_id'], properties: { invoice_id: { type: 'string' } } },
  });
  await createEventType(by, { name: 'invoice.refunded', description: 'An invoice was refunded in full or in part.' });
  const appId = (await createApplication(by, { name: 'Acme Corp' })).id as string;
  const link = await magicLink(t, app, key, appId);
  const portalHost = new URL(link.url).host;
  const { page, hosts, refused, errors } = await openPage(t, [portalHost]);

  await page.goto(link.url);
  await page.getByRole('heading', { name: 'Endpoints', exact: true }).waitFor();
  t.false(page.url().includes('#'), 'the token is gone from the address bar');
  t.false(page.url().includes(link.token));
  t.is(await page.evaluate(() => document.cookie + JSON.stringify(localStorage) + JSON.stringify(sessionStorage)), '{}{}');
  await page.getByText('Acme Corp').waitFor();
  await page.getByText(/Link valid until/).waitFor();
  await page.getByText('No endpoints yet.').waitFor();
  await shot(page, 'empty');
  await axe(t, page, 'the empty list');

  // Add an endpoint: the API refuses a plain-text URL, and says so under the field.
  await page.getByRole('button', { name: 'Add endpoint' }).click();
  await page.getByText('An invoice was paid.').waitFor();
  await page.getByText('Payload schema').first().click();
  await page.getByText('"invoice_id"').first().waitFor();
  const urlField = page.getByLabel('Endpoint URL');
  await urlField.fill('not a url');
  await page.getByRole('button', { name: 'Create endpoint' }).click();
  const urlError = page.getByRole('alert').filter({ hasText: /url|URL/ }).first();
  await urlError.waitFor();
  t.true((await urlField.getAttribute('aria-describedby'))!.includes((await urlError.getAttribute('id'))!), 'the error describes the field');
  t.is(await urlField.getAttribute('aria-invalid'), 'true');
  await shot(page, 'form-error');
  await axe(t, page, 'the form with an error');
  const target = receiver.at('/hooks');
  await urlField.fill(target);
  await page.getByRole('checkbox', { name: /invoice\.paid/ }).check();
  await page.getByRole('button', { name: 'Create endpoint' }).click();
  await page.getByText('Endpoint created.').waitFor();
  await page.getByRole('heading', { name: target }).waitFor();
  const listed = await app.request('GET', `/v1/endpoints?application_id=${appId}`, { key });
  t.deepEqual(listed.body.data.map((e: { url: string; event_types: string[] }) => [e.url, e.event_types]), [[target, ['invoice.paid']]]);
  const endpointId = listed.body.data[0].id as string;

  // A test event: at the receiver, then in the attempt log (with the response body) and the chart.
  await page.getByText('No attempts yet. Send a test event to see one here.').waitFor();
  await page.getByRole('button', { name: 'Send test event' }).click();
  await page.getByText(/Test event sent/).waitFor();
  await until('the test event at the receiver', () => receiver.arrivals.some((a) => a.url === '/hooks'));
  const attempts = page.getByRole('list', { name: 'Attempts' });
  await attempts.getByText('Succeeded').waitFor();
  await attempts.getByText('webhook.test').click();
  t.is(await attempts.getByLabel('Response body').textContent(), 'thanks from the receiver');
  await page.getByRole('img', { name: /Attempts per hour over the last 24 hours: 1 attempt, 0 failed/ }).waitFor();
  t.true(await page.locator('canvas').count() > 0, 'uPlot drew the chart');

  // The secret: revealed, then rotated; the page says until when the old one still signs.
  await page.getByRole('button', { name: 'Reveal' }).click();
  const before = (await page.getByLabel('Secret value').textContent())!;
  t.is(before, (await app.request('GET', `/v1/endpoints/${endpointId}`, { key })).body.secret);
  await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: new URL(link.url).origin });
  await page.getByRole('button', { name: 'Copy' }).click();
  await page.getByText('Copied to the clipboard.').waitFor();
  t.is(await page.evaluate(() => navigator.clipboard.readText()), before);
  await page.getByRole('button', { name: 'Rotate' }).click();
  const rotated = page.getByText(/The previous secret also signs deliveries until/);
  await rotated.waitFor();
  const after = (await page.getByLabel('Secret value').textContent())!;
  t.regex(after, /^whsec_[0-9a-f]{64}$/);
  t.not(after, before);
  t.is(after, (await app.request('GET', `/v1/endpoints/${endpointId}`, { key })).body.secret);
  // The expiry shown is the one stored, written as the page writes times.
  const oldExpiresAt = await app.pool.oneFirst(sql.type(z.object({ at: z.string() }))`
    select to_json(old_secret_expires_at) #>> '{}' as at from endpoints where id = ${endpointId}`);
  const expiry = await page.evaluate((iso) => new Date(iso).toLocaleString(undefined, {
    year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit',
  }), oldExpiresAt);
  t.true((await rotated.textContent())!.includes(expiry), `the old secret's expiry (${expiry}) is shown`);
  await page.getByRole('button', { name: 'Hide' }).click();

  // Edit: a refused timeout lands under its field, then a valid one is saved.
  await page.getByRole('button', { name: 'Edit' }).click();
  const timeoutField = page.getByLabel('Timeout (milliseconds)');
  await timeoutField.fill('10');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.getByRole('alert').filter({ hasText: /1000/ }).waitFor();
  await timeoutField.fill('5000');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.getByText('Changes saved.').waitFor();
  await page.getByText('5000 ms').waitFor();

  await page.getByRole('button', { name: 'Pause' }).click();
  await page.getByText(/Deliveries are paused/).waitFor();
  t.is((await app.request('GET', `/v1/endpoints/${endpointId}`, { key })).body.status, 'paused');
  await page.getByRole('button', { name: 'Resume' }).click();
  await page.getByText('Deliveries are resumed.').waitFor();
  t.is((await app.request('GET', `/v1/endpoints/${endpointId}`, { key })).body.status, 'active');
  await shot(page, 'endpoint');
  await axe(t, page, 'the endpoint');

  // Keyboard: back to the list with Enter.
  await page.getByRole('button', { name: '← All endpoints' }).focus();
  await page.keyboard.press('Enter');
  const row = page.getByRole('row').filter({ hasText: target });
  await row.getByText('Active').waitFor();
  await row.getByText('100%').waitFor();
  await shot(page, 'list');
  await axe(t, page, 'the list');

  // Delete, then restore from "Deleted endpoints".
  await page.getByRole('link', { name: target }).click();
  await page.getByRole('button', { name: 'Delete' }).click();
  await page.getByText(/Endpoint deleted/).waitFor();
  await page.getByText('No endpoints yet.').waitFor();
  t.is((await app.request('GET', `/v1/endpoints/${endpointId}`, { key })).status, 404);
  await page.getByRole('button', { name: `Restore ${target}` }).click();
  await page.getByText('Endpoint restored.').waitFor();
  await page.getByRole('heading', { name: target }).waitFor();
  const restored = await app.request('GET', `/v1/endpoints/${endpointId}`, { key });
  t.is(restored.status, 200);
  t.deepEqual([restored.body.status, restored.body.event_types], ['active', ['invoice.paid']]);

  // The same application on a phone, with a new link.
  const phone = await openPage(t, [portalHost], { width: 390, height: 844 });
  await phone.page.goto((await magicLink(t, app, key, appId)).url);
  await phone.page.getByRole('link', { name: target }).waitFor();
  await shot(phone.page, 'list');
  await axe(t, phone.page, 'the list on a phone');
  await phone.page.getByRole('link', { name: target }).click();
  await phone.page.getByRole('list', { name: 'Attempts' }).getByText('Succeeded').first().waitFor();
  await phone.page.getByRole('img', { name: /Attempts per hour/ }).waitFor();
  await shot(phone.page, 'endpoint');
  await axe(t, phone.page, 'the endpoint on a phone');
  await phone.page.getByRole('button', { name: '← All endpoints' }).click();
  await phone.page.getByRole('button', { name: 'Add endpoint' }).click();
  await phone.page.getByLabel('Endpoint URL').fill('ftp://example.com');
  await phone.page.getByRole('button', { name: 'Create endpoint' }).click();
  await phone.page.getByRole('alert').first().waitFor();
  await shot(phone.page, 'form-error');
  await axe(t, phone.page, 'the form on a phone');

  t.deepEqual([...hosts, ...phone.hosts].filter((host) => host !== portalHost), [], 'every request went to the portal\'s own host');
  t.deepEqual([...refused, ...phone.refused], []);
  t.deepEqual([...errors, ...phone.errors], [], 'no script error');
});
