// GET /portal driven in headless Chromium as a customer would: open the link, add an endpoint
// for a local receiver (the API's validation error shown next to the field first), send a test
// event, rotate the secret, pause and resume, delete; a read-only credential shows no action
// and no secret; a bad or expired credential shows a clear message; the page works inside an
// iframe of another origin; axe-core finds nothing serious; nothing is fetched from another
// host. Screenshots go to test-output/portal/ (git-ignored) for a reviewer's eye.
import test, { type ExecutionContext } from 'ava';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { createRequire } from 'node:module';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { startTestApp } from './helpers/app.ts';
import { createApplication, createEventType } from './helpers/fixtures.ts';
import { startReceiver } from './helpers/receiver.ts';
import { until } from './helpers/until.ts';

const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];
const SHOTS = path.resolve('test-output/portal');
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

const app = startTestApp({ ALLOW_PRIVATE_DESTINATIONS: 'true', PORTAL_FRAME_ANCESTORS: "'self' http://127.0.0.1:*" }, { worker: true });

test('GET /portal: the page, its CSP with PORTAL_FRAME_ANCESTORS, and hashed assets cached for good', async (t) => {
  const res = await fetch(`${app.baseUrl}/portal`);
  t.is(res.status, 200);
  t.is(res.headers.get('cache-control'), 'no-cache');
  const csp = res.headers.get('content-security-policy') ?? '';
  t.regex(csp, /default-src 'none'/);
  t.regex(csp, /connect-src 'self'/);
  t.regex(csp, /frame-ancestors 'self' http:\/\/127\.0\.0\.1:\*/);
  const html = await res.text();
  const assets = [...html.matchAll(/(?:href|src)="([^"]+)"/g)].map((m) => m[1]!);
  t.is(assets.length, 2);
  for (const asset of assets) {
    const one = await fetch(`${app.baseUrl}${asset}`);
    t.is(one.status, 200, asset);
    t.is(one.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    t.true((await one.text()).length > 100);
    t.is((await fetch(`${app.baseUrl}${asset.replace(/assets\/[^/]+/, 'assets/0000')}`)).status, 404, 'another version is not served');
  }
});

const hasChromium = existsSync(CHROMIUM);
const browserTest = hasChromium ? test.serial : test.skip;
const skip = hasChromium ? '' : ` (skipped: Chromium not installed (${CHROMIUM}); .ci/run installs it)`;

let browser: Browser | undefined;
test.after.always(async () => { await browser?.close(); });

/** A context whose requests to any other host than the app's (and `allowed`) are refused and noted. */
async function openContext(t: ExecutionContext, viewport = { width: 1280, height: 800 }, allowed: string[] = []) {
  browser ??= await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  const context = await browser.newContext({ viewport });
  t.teardown(() => context.close());
  const origins = [new URL(app.baseUrl).origin, ...allowed];
  const foreign: string[] = [];
  const errors: string[] = [];
  await context.route('**/*', async (route) => {
    const url = route.request().url();
    if (origins.includes(new URL(url).origin)) return route.continue();
    foreign.push(url);
    return route.abort('blockedbyclient');
  });
  context.on('weberror', (error) => errors.push(error.error().message));
  return { context, foreign, errors };
}

async function newPage(context: BrowserContext): Promise<Page> {
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  page.on('dialog', (dialog) => void dialog.accept());
  return page;
}

async function axe(t: ExecutionContext, page: Page, what: string) {
  // Through the DevTools protocol: the page's CSP (rightly) refuses an inline script tag.
  await page.evaluate(AXE);
  const violations = await page.evaluate(async () => {
    const result = await (window as any).axe.run(document, { resultTypes: ['violations'] });
    return result.violations.filter((v: any) => v.impact === 'serious' || v.impact === 'critical')
      .map((v: any) => `${v.id}: ${v.help} (${v.nodes.map((n: any) => n.target.join(' ')).join(', ')})`);
  });
  t.deepEqual(violations, [], `axe on ${what}`);
}

async function shot(page: Page, name: string) {
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

async function setup(t: ExecutionContext, scopes?: string[]) {
  const org = await app.createOrg();
  const by = { on: app, key: org.key, t };
  await createEventType(by, { name: 'invoice.paid', description: 'An invoice was paid.', schema: { type: 'object', required: ['invoice_id'], properties: { invoice_id: { type: 'string' } } } });
  await createEventType(by, { name: 'invoice.refunded', description: 'An invoice was refunded in full or in part.' });
  const application = await createApplication(by, { name: 'Acme Corp' });
  let key = org.key;
  if (scopes) {
    const created = await app.request('POST', '/v1/api-keys', { key: org.key, body: { name: 'read only', scopes } });
    t.is(created.status, 201, JSON.stringify(created.body));
    key = created.body.key;
  }
  return { by, appId: application.id as string, link: `${app.baseUrl}/portal#${key}&application_id=${application.id}` };
}

browserTest(`a customer session: add an endpoint, send a test event, rotate, pause, resume, delete${skip}`, async (t) => {
  const receiver = await startReceiver(() => ({ status: 200, body: 'thanks' }));
  const { link } = await setup(t);
  for (const viewport of [{ width: 1280, height: 800 }, { width: 390, height: 844 }]) {
    const { context, foreign, errors } = await openContext(t, viewport);
    const page = await newPage(context);
    const size = `${viewport.width}x${viewport.height}`;
    await page.goto(link);
    await page.getByRole('heading', { name: 'Endpoints', exact: true }).waitFor();
    t.false(page.url().includes('#'), 'the credential is gone from the address bar');
    t.is(await page.evaluate(() => document.cookie + JSON.stringify(localStorage) + JSON.stringify(sessionStorage)), '{}{}');
    if (viewport.width === 1280) {
      await page.getByText('No endpoints yet.').waitFor();
      await shot(page, `empty-${size}`);
    }
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    await page.getByText('An invoice was paid.').waitFor();
    await page.getByText('Payload schema').first().click();
    await page.getByText('"invoice_id"').first().waitFor();
    // The API refuses a plain-text URL: its message appears under the URL field.
    await page.getByLabel('Endpoint URL').fill('not a url');
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    const urlError = page.locator('.field-error').first();
    await urlError.waitFor();
    t.true((await page.getByLabel('Endpoint URL').getAttribute('aria-describedby'))!.includes(await urlError.getAttribute('id') ?? 'none'));
    await axe(t, page, `the form at ${size}`);
    await shot(page, `form-error-${size}`);
    await page.getByLabel('Endpoint URL').fill(receiver.at(`/hooks-${viewport.width}`));
    await page.getByRole('checkbox', { name: /invoice\.paid/ }).check();
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    await page.getByText('Endpoint created.').waitFor();
    await page.getByRole('heading', { name: receiver.at(`/hooks-${viewport.width}`) }).waitFor();

    await page.getByRole('button', { name: 'Send test event' }).click();
    await page.getByText(/Test event sent/).waitFor();
    await until('the test event at the receiver', () => receiver.arrivals.some((a) => a.url === `/hooks-${viewport.width}`));

    await page.getByRole('button', { name: 'Reveal' }).click();
    const before = (await page.getByLabel('Secret value').textContent())!;
    t.regex(before, /^whsec_[0-9a-f]{64}$/);
    await page.getByRole('button', { name: 'Rotate' }).click();
    await page.getByText(/The previous secret also signs deliveries until/).waitFor();
    const after = (await page.getByLabel('Secret value').textContent())!;
    t.regex(after, /^whsec_[0-9a-f]{64}$/);
    t.not(after, before);
    await page.getByRole('button', { name: 'Hide' }).click();
    await shot(page, `endpoint-${size}`);
    await axe(t, page, `the endpoint at ${size}`);

    await page.getByRole('button', { name: 'Pause' }).click();
    await page.getByText(/Deliveries are paused/).waitFor();
    await page.getByRole('button', { name: 'Resume' }).click();
    await page.getByText('Deliveries are resumed.').waitFor();
    // Keyboard: the back button is reachable and works with Enter.
    await page.getByRole('button', { name: '← All endpoints' }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('link', { name: receiver.at(`/hooks-${viewport.width}`) }).waitFor();
    await shot(page, `list-${size}`);
    await axe(t, page, `the list at ${size}`);
    await page.getByRole('link', { name: receiver.at(`/hooks-${viewport.width}`) }).click();
    await page.getByRole('button', { name: 'Delete' }).click();
    await page.getByText(/Endpoint deleted/).waitFor();
    t.deepEqual(foreign, [], 'requests to other hosts');
    t.deepEqual(errors, []);
  }
});

browserTest(`a read-only credential shows everything, no action and no secret${skip}`, async (t) => {
  const { by, appId, link } = await setup(t, ['endpoints:read', 'applications:read', 'event-types:read', 'webhooks:read']);
  const created = await app.request('POST', '/v1/endpoints', { key: by.key, body: { application_id: appId, url: 'https://hooks.example.com/in', event_types: ['invoice.paid'] } });
  t.is(created.status, 201);
  const { context, foreign } = await openContext(t);
  const page = await newPage(context);
  await page.goto(link);
  await page.getByText('Read-only').waitFor();
  await page.getByRole('link', { name: 'https://hooks.example.com/in' }).waitFor();
  t.is(await page.getByRole('button', { name: 'Add endpoint' }).count(), 0);
  await page.getByRole('link', { name: 'https://hooks.example.com/in' }).click();
  await page.getByRole('heading', { name: 'https://hooks.example.com/in' }).waitFor();
  await page.getByText('The secret is not shown on this read-only link.').waitFor();
  for (const name of ['Pause', 'Send test event', 'Edit', 'Delete', 'Reveal', 'Rotate', 'Recover']) {
    t.is(await page.getByRole('button', { name }).count(), 0, name);
  }
  t.false((await page.content()).includes(created.body.secret), 'the secret is nowhere in the page');
  await shot(page, 'read-only-1280x800');
  await axe(t, page, 'the read-only endpoint');
  t.deepEqual(foreign, []);
});

browserTest(`a revoked or unknown credential and an incomplete link show a clear message${skip}`, async (t) => {
  const { appId } = await setup(t);
  const { context } = await openContext(t);
  const page = await newPage(context);
  await page.goto(`${app.baseUrl}/portal#key_revoked_or_expired&application_id=${appId}`);
  await page.getByRole('heading', { name: 'This link has expired or was revoked' }).waitFor();
  await shot(page, 'expired-1280x800');
  await axe(t, page, 'the expired message');
  await page.goto(`${app.baseUrl}/portal`);
  await page.reload();
  await page.getByRole('heading', { name: 'This link is incomplete' }).waitFor();
  t.pass();
});

browserTest(`the portal works inside an iframe of a page on another origin, without cookies${skip}`, async (t) => {
  const { link } = await setup(t);
  // The parent is served from 127.0.0.1 on its own port; the app is reached as localhost.
  const framed = link.replace('127.0.0.1', 'localhost');
  const parent = http.createServer((_req, res) => {
    res.setHeader('content-type', 'text/html');
    res.end(`<!doctype html><html lang="en"><title>Customer dashboard</title><h1>Our product</h1><iframe title="Webhooks" src="${framed}" width="1000" height="700"></iframe>`);
  });
  await new Promise<void>((resolve) => parent.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => parent.close(() => resolve())));
  const parentUrl = `http://127.0.0.1:${(parent.address() as AddressInfo).port}`;
  const { context, foreign } = await openContext(t, undefined, [parentUrl, new URL(framed).origin]);
  await context.clearCookies();
  const page = await newPage(context);
  await page.goto(parentUrl);
  const frame = page.frameLocator('iframe');
  await frame.getByRole('heading', { name: 'Endpoints', exact: true }).waitFor();
  await frame.getByRole('button', { name: 'Add endpoint' }).click();
  await frame.getByLabel('Endpoint URL').fill('https://hooks.example.com/framed');
  await frame.getByRole('button', { name: 'Create endpoint' }).click();
  await frame.getByText('Endpoint created.').waitFor();
  t.deepEqual(await context.cookies(), []);
  t.deepEqual(foreign, []);
});
