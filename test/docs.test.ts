// GET /docs: the page and its assets over HTTP, then the page in headless Chromium (Debian's
// package, driven by playwright-core): every operation and webhook of /v1/openapi.json is
// listed, nothing is loaded from another host, and nothing is logged as an error.
import test from 'ava';
import { chromium } from 'playwright-core';
import { startTestApp } from './helpers/app.ts';
import { CHROMIUM, CHROMIUM_ARGS, guardHosts, hasChromium, skipReason } from './helpers/browser.ts';

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

const app = startTestApp();

/** One line per operation as the page should show it: section, method, path (or webhook name), summary. */
function documentedOperations(document: any): string[] {
  const lines = new Set<string>();
  for (const section of ['paths', 'webhooks'] as const) {
    for (const [name, item] of Object.entries<any>(document[section] ?? {})) {
      for (const method of METHODS) {
        const operation = item[method];
        if (operation) lines.add(`${section} ${method.toUpperCase()} ${name} | ${operation.summary ?? ''}`);
      }
    }
  }
  return [...lines].sort();
}

test('GET /docs serves the page and only the viewer files it uses, versioned and cached', async (t) => {
  const page = await fetch(`${app.baseUrl}/docs`);
  t.is(page.status, 200);
  t.is(page.headers.get('content-type'), 'text/html; charset=utf-8');
  t.is(page.headers.get('cache-control'), 'no-cache');
  t.regex(page.headers.get('content-security-policy') ?? '', /default-src 'none'.*connect-src 'self'/);
  const html = await page.text();
  const assets = [...html.matchAll(/(?:href|src)="([^"]+)"/g)].map((match) => match[1]!);
  t.true(assets.includes('/docs/init.js'));

  const expected: Record<string, string> = {
    '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8', '.png': 'image/png',
  };
  for (const asset of assets) {
    const res = await fetch(`${app.baseUrl}${asset}`);
    t.is(res.status, 200, asset);
    t.is(res.headers.get('content-type'), expected[asset.slice(asset.lastIndexOf('.'))] ?? 'unexpected asset', asset);
    const immutable = asset.startsWith('/docs/assets/');
    t.is(res.headers.get('cache-control'), immutable ? 'public, max-age=31536000, immutable' : 'no-cache', asset);
    await res.arrayBuffer();
  }
  const init = await (await fetch(`${app.baseUrl}/docs/init.js`)).text();
  t.regex(init, /url: '\/v1\/openapi\.json'/);

  const bundle = assets.find((asset) => asset.endsWith('/swagger-ui-bundle.js'))!;
  for (const other of [bundle.replace(/[^/]+$/, 'package.json'), bundle.replace(/[^/]+$/, 'index.html'), bundle.replace(/\/[^/]+\/([^/]+)$/, '/0.0.0/$1')]) {
    t.is((await fetch(`${app.baseUrl}${other}`)).status, 404, other);
  }
});

const browserTest = hasChromium ? test : test.skip;

browserTest(`GET /docs lists every operation and webhook of /v1/openapi.json, offline and without errors${skipReason}`, async (t) => {
  t.timeout(4 * 60_000); // Chromium's start and render on a busy machine
  const document = await (await fetch(`${app.baseUrl}/v1/openapi.json`)).json();
  const expected = documentedOperations(document);
  t.true(expected.length > 0);

  const origin = new URL(app.baseUrl).origin;
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  t.teardown(() => browser.close());
  const context = await browser.newContext();
  const errors: string[] = [];
  // Anything for another host is refused and noted: the page must work with no internet.
  const { refused: foreign } = await guardHosts(context, (url) => url.origin === origin);
  const page = await context.newPage();
  // Chromium starts and renders slowly on a busy shared machine: these waits are for the page to
  // get there, never a measure of its speed.
  page.setDefaultTimeout(90_000);
  page.on('console', (message) => { if (message.type() === 'error') errors.push(`console: ${message.text()}`); });
  page.on('pageerror', (error) => errors.push(`page error: ${error.message}`));
  page.on('requestfailed', (request) => errors.push(`request failed: ${request.url()} ${request.failure()?.errorText}`));
  page.on('response', (response) => { if (response.status() >= 400) errors.push(`HTTP ${response.status()}: ${response.url()}`); });

  await page.goto(`${app.baseUrl}/docs`);
  // Swagger UI renders one .opblock per operation and tag; wait for as many as there are operations.
  await page.waitForFunction(`document.querySelectorAll('.opblock').length >= ${expected.length}`, undefined, { timeout: 90_000 })
    .catch(() => t.log('fewer operations rendered than documented'));
  await page.waitForLoadState('networkidle');

  const rendered = new Set<string>();
  for (const [section, selector] of [['paths', '.opblock-tag-section .opblock'], ['webhooks', '.webhooks .opblock']] as const) {
    for (const block of await page.locator(selector).all()) {
      const method = (await block.locator('.opblock-summary-method').textContent())?.trim();
      const path = await block.locator('.opblock-summary-path').getAttribute('data-path');
      const summary = (await block.locator('.opblock-summary-description').textContent())?.trim();
      rendered.add(`${section} ${method} ${path} | ${summary ?? ''}`);
    }
  }
  t.deepEqual([...rendered].sort(), expected);
  // No tag heading without operations under it (an empty "Deliveries" sat above the webhooks).
  const emptyTags = await page.locator('.opblock-tag-section').evaluateAll((sections) => sections
    .filter((section) => section.querySelectorAll('.opblock').length === 0)
    .map((section) => section.textContent?.trim() ?? ''));
  t.deepEqual(emptyTags, []);
  // Descriptions the page shows as plain text carry no Markdown.
  const servers = await page.locator('.servers option').allTextContents();
  t.true(servers.length > 0);
  for (const server of servers) t.false(server.includes('`'), server);
  t.is(await page.locator('.errors-wrapper').count(), 0, 'Swagger UI reports errors in the document');
  t.deepEqual(foreign, [], 'requests to other hosts');
  t.deepEqual(errors, []);
});
