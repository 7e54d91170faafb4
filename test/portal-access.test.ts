// What a portal link may do, through real magic links in headless Chromium: a read-only link
// shows everything, offers no change and no secret, and the API refuses a change made with it;
// an expired and a revoked link (also one revoked while the page is open) show a clear message;
// application A's token gets 404 for application B's resources and 403 for API keys, the
// applications list and job creation, from the API directly and from the page's own origin,
// and a link with B's id added still shows A; the page works inside an iframe of a site named
// by PORTAL_FRAME_ANCESTORS (another loopback origin) without cookies, and another site's frame
// is refused. axe-core on each screen; no request leaves for another host.
import test, { type ExecutionContext } from 'ava';
import { createHash } from 'node:crypto';
import http from 'node:http';
import { sql } from 'slonik';
import { createApplication, createEndpoint, createEventType } from './helpers/fixtures.ts';
import { closedPort } from './helpers/receiver.ts';
import { axe, browserTest, magicLink, openPage, shot, skipped, startPortalApp } from './portal-links/browser.ts';

let parentPort = 0;
// No worker: these tests deliver nothing (B's job must not go looking for b.example.com).
const app = startPortalApp(async () => {
  parentPort = await closedPort();
  return { PORTAL_FRAME_ANCESTORS: `'self' http://127.0.0.1:${parentPort}` };
}, { worker: false });
const portalHost = () => new URL(app.config.publicUrl).host;

/** An organization with applications A and B, each with an endpoint that has a secret. */
async function twoApplications(t: ExecutionContext) {
  const { key } = await app.createOrg();
  const by = { on: app, key, t };
  await createEventType(by, { name: 'invoice.paid', description: 'An invoice was paid.' });
  const a = (await createApplication(by, { name: 'Acme Corp' })).id as string;
  const b = (await createApplication(by, { name: 'Globex' })).id as string;
  const endpointA = await createEndpoint(by, { application_id: a, url: 'https://a.example.com/hooks', event_types: ['invoice.paid'] });
  const endpointB = await createEndpoint(by, { application_id: b, url: 'https://b.example.com/hooks', event_types: ['invoice.paid'] });
  return { key, a, b, endpointA, endpointB };
}

browserTest(`a read-only link shows everything, offers no change and reveals no secret${skipped}`, async (t) => {
  const { key, a, endpointA } = await twoApplications(t);
  const link = await magicLink(t, app, key, a, { read_only: true });
  t.true(link.read_only);
  const { page, hosts } = await openPage(t, [portalHost()]);
  await page.goto(link.url);
  await page.getByText('Read-only').waitFor();
  await page.getByRole('link', { name: 'https://a.example.com/hooks' }).waitFor();
  t.is(await page.getByRole('button', { name: 'Add endpoint' }).count(), 0);
  await page.getByRole('link', { name: 'https://a.example.com/hooks' }).click();
  await page.getByRole('heading', { name: 'https://a.example.com/hooks' }).waitFor();
  await page.getByText('The secret is not shown on this read-only link.').waitFor();
  await page.getByRole('heading', { name: 'Delivery attempts' }).waitFor();
  await page.getByText('No attempts in the last 24 hours.').waitFor();
  for (const name of ['Pause', 'Resume', 'Send test event', 'Edit', 'Delete', 'Reveal', 'Copy', 'Rotate', 'Recover', 'Re-enable endpoint', 'Resend']) {
    t.is(await page.getByRole('button', { name, exact: true }).count(), 0, `no ${name} button`);
  }
  t.is(await page.getByRole('heading', { name: 'Recover failed deliveries' }).count(), 0);
  t.false((await page.content()).includes(endpointA.secret), 'the secret is nowhere in the page');
  // Refused by the API as well, when tried from the page's own origin with the link's token.
  const statuses = await page.evaluate(async ({ token, id }) => {
    const call = async (method: string, path: string, body?: unknown) => (await fetch(path, {
      method, headers: { Authorization: `Bearer ${token}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : null,
    })).status;
    return [
      await call('PATCH', `/v1/endpoints/${id}`, { status: 'paused' }),
      await call('POST', `/v1/endpoints/${id}/rotate-secret`),
      await call('DELETE', `/v1/endpoints/${id}`),
      await call('POST', `/v1/endpoints/${id}/test`),
      'secret' in (await (await fetch(`/v1/endpoints/${id}`, { headers: { Authorization: `Bearer ${token}` } })).json()),
    ];
  }, { token: link.token, id: endpointA.id as string });
  t.deepEqual(statuses, [403, 403, 403, 403, false]);
  t.is((await app.request('GET', `/v1/endpoints/${endpointA.id}`, { key })).body.status, 'active', 'nothing changed');
  await shot(page, 'read-only');
  await axe(t, page, 'the read-only endpoint');
  t.deepEqual([...hosts].filter((host) => host !== portalHost()), []);
});

/** Moves the token's whole life into the past, as if its expires_in had run out. */
async function expire(token: string): Promise<void> {
  const hash = createHash('sha256').update(token).digest();
  await app.pool.query(sql.unsafe`
    update portal_tokens set created_at = now() - interval '2 minutes', expires_at = now() - interval '1 minute'
    where token_hash = ${sql.binary(hash)}`);
}

browserTest(`an expired link, a revoked link and a link revoked while open show a clear message${skipped}`, async (t) => {
  const { key, a } = await twoApplications(t);
  const expired = await magicLink(t, app, key, a, { expires_in: 60 });
  await expire(expired.token);
  const { page } = await openPage(t, [portalHost()]);
  // Through about:blank: from /portal, a link to /portal#… only changes the fragment and would
  // not load the page again.
  const visit = async (url: string, heading: string) => {
    await page.goto('about:blank');
    await page.goto(url);
    await page.getByRole('heading', { name: heading, exact: true }).waitFor();
  };
  await visit(expired.url, 'This link has expired');
  await page.getByText(/This portal link has expired\. Ask the service that sent you here for a new link\./).waitFor();
  t.is(await page.getByText('Acme Corp').count(), 0, 'nothing of the application is shown');
  await shot(page, 'expired');
  await axe(t, page, 'the expired message');

  // Open, then revoked from the customer's backend: the live endpoint view notices.
  const open = await magicLink(t, app, key, a);
  await visit(open.url, 'Endpoints');
  await page.getByRole('link', { name: 'https://a.example.com/hooks' }).click();
  await page.getByRole('heading', { name: 'Signing secret' }).waitFor();
  const revoked = await app.request('DELETE', `/v1/applications/${a}/portal-links`, { key });
  t.deepEqual(revoked.body, { id: a, revoked: 1 }, 'the expired link is not counted');
  await page.getByRole('heading', { name: 'This link was revoked' }).waitFor();
  await page.getByText(/This portal link was revoked\./).waitFor();
  t.is(await page.getByRole('heading', { name: 'Signing secret' }).count(), 0, 'the endpoint is no longer shown');

  // The revoked link opened again, an unknown token, an API key, no token.
  await visit(open.url, 'This link was revoked');
  await visit(`${app.config.publicUrl}/portal#pt_live_${'x'.repeat(40)}`, 'This link does not work');
  await page.getByText('Invalid portal token.').waitFor();
  await visit(`${app.config.publicUrl}/portal#${key}`, 'This is not a portal link');
  await visit(`${app.config.publicUrl}/portal`, 'This link is incomplete or invalid');
  // A link copied in part: the advice for an incomplete link, not the API's "Malformed API key.".
  await visit(open.url.slice(0, -5), 'This link is incomplete or invalid');
  t.is(await page.getByText(/API key/).count(), 0);
  const cut = await app.request('GET', '/v1/credential', { key: open.token.slice(0, -5) });
  t.like(cut, { status: 401, body: { error: { code: 'unauthorized', message: 'Malformed portal token: the link may be incomplete.' } } });
  t.pass();
});

browserTest(`application A's link reaches nothing of application B, from the API or the page${skipped}`, async (t) => {
  const { key, a, b, endpointB } = await twoApplications(t);
  const link = await magicLink(t, app, key, a);
  const job = (await app.request('POST', '/v1/webhook-jobs', { key, body: { application_id: b, event_type: 'invoice.paid', payload: { n: 1 } } })).body;
  const tries: Array<[string, string, unknown, number]> = [
    ['GET', `/v1/endpoints/${endpointB.id}`, undefined, 404],
    ['PATCH', `/v1/endpoints/${endpointB.id}`, { status: 'paused' }, 404],
    ['DELETE', `/v1/endpoints/${endpointB.id}`, undefined, 404],
    ['GET', `/v1/endpoints/${endpointB.id}/attempts`, undefined, 404],
    ['GET', `/v1/endpoints?application_id=${b}`, undefined, 404],
    ['GET', `/v1/webhook-jobs?endpoint_id=${endpointB.id}`, undefined, 404],
    ['POST', '/v1/endpoints', { application_id: b, url: 'https://evil.example.com/' }, 404],
    ['GET', `/v1/applications/${b}`, undefined, 404],
    ['GET', `/v1/webhook-jobs/${job.id}`, undefined, 404],
    ['POST', `/v1/webhook-jobs/${job.id}/retry`, undefined, 404],
    ['GET', '/v1/api-keys', undefined, 403],
    ['POST', '/v1/api-keys', { name: 'mine now', scopes: ['*'] }, 403],
    ['GET', '/v1/applications', undefined, 403],
    ['POST', '/v1/webhook-jobs', { application_id: a, event_type: 'invoice.paid', payload: {} }, 403],
    ['POST', `/v1/applications/${a}/portal-links`, {}, 403],
  ];
  // The API directly.
  for (const [method, path, body, status] of tries) {
    t.is((await app.request(method, path, body === undefined ? { key: link.token } : { key: link.token, body })).status, status, `${method} ${path}`);
  }
  // A link with B's id appended (as the old page read it) still opens A, and nothing of B shows.
  const { page, hosts } = await openPage(t, [portalHost()]);
  await page.goto(`${link.url}&application_id=${b}`);
  await page.getByRole('link', { name: 'https://a.example.com/hooks' }).waitFor();
  await page.getByText('Acme Corp').waitFor();
  t.is(await page.getByText('Globex').count(), 0);
  t.false((await page.content()).includes('https://b.example.com/hooks'));
  // The same requests from the page's origin, as the page's own client would send them.
  const fromPage = await page.evaluate(async ({ token, tries }) => {
    const statuses: number[] = [];
    for (const [method, path, body] of tries) {
      const res = await fetch(path, {
        method, headers: { Authorization: `Bearer ${token}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : null, credentials: 'omit',
      });
      statuses.push(res.status);
    }
    return statuses;
  }, { token: link.token, tries: tries.map(([method, path, body]) => [method, path, body] as const) });
  t.deepEqual(fromPage, tries.map(([, , , status]) => status));
  t.is((await app.request('GET', `/v1/endpoints/${endpointB.id}`, { key })).body.status, 'active', 'B is untouched');
  t.deepEqual([...hosts].filter((host) => host !== portalHost()), []);
});

browserTest(`in an iframe of the site PORTAL_FRAME_ANCESTORS names, without cookies; another site is refused${skipped}`, async (t) => {
  const { key, a } = await twoApplications(t);
  const link = await magicLink(t, app, key, a);
  const framing = (src: string) => http.createServer((_req, res) => {
    res.setHeader('content-type', 'text/html');
    res.end(`<!doctype html><html lang="en"><title>Our product</title><h1>Our product</h1><iframe title="Webhooks" src="${src}" width="1000" height="700"></iframe>`);
  });
  const listen = async (server: http.Server, port: number) => {
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    t.teardown(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }));
  };
  const allowed = framing(link.url);
  await listen(allowed, parentPort);
  const otherPort = await closedPort();
  await listen(framing((await magicLink(t, app, key, a)).url), otherPort);

  const { page, hosts, refused } = await openPage(t, [portalHost(), `127.0.0.1:${parentPort}`, `127.0.0.1:${otherPort}`]);
  await page.goto(`http://127.0.0.1:${parentPort}/`);
  const frame = page.frameLocator('iframe');
  await frame.getByRole('link', { name: 'https://a.example.com/hooks' }).click();
  await frame.getByRole('button', { name: 'Pause' }).click();
  await frame.getByText(/Deliveries are paused/).waitFor();
  await frame.getByRole('button', { name: '← All endpoints' }).click();
  await frame.getByRole('button', { name: 'Add endpoint' }).click();
  await frame.getByLabel('Endpoint URL').fill('https://hooks.example.com/framed');
  await frame.getByRole('button', { name: 'Create endpoint' }).click();
  await frame.getByText('Endpoint created.').waitFor();
  t.deepEqual(await page.context().cookies(), [], 'no cookie anywhere');
  await shot(page, 'iframe');
  t.is((await app.request('GET', `/v1/endpoints?application_id=${a}`, { key })).body.data.length, 2);

  // A site PORTAL_FRAME_ANCESTORS does not name: Chromium refuses to show the portal in its frame.
  const refusal = page.waitForEvent('console', (message) => /frame-ancestors/.test(message.text()));
  await page.goto(`http://127.0.0.1:${otherPort}/`);
  t.regex((await refusal).text(), new RegExp(`Framing '${app.config.publicUrl}/' violates .*"frame-ancestors 'self' http://127\\.0\\.0\\.1:${parentPort}"`));
  t.deepEqual(refused, []);
  t.deepEqual([...hosts].sort(), [portalHost(), `127.0.0.1:${parentPort}`, `127.0.0.1:${otherPort}`].sort());
});

browserTest(`embedded as docs/portal.md shows it (the frame made by script), the portal works again after Back to the page${skipped}`, async (t) => {
  // A probe: with the frame in the page's HTML, Back to the page made the browser restore the
  // frame's last address, the portal without its token ("This link is incomplete or invalid"),
  // instead of the fresh link in `src`. A frame the page's script makes gets its `src`.
  const { key, a } = await twoApplications(t);
  const server = http.createServer((req, res) => {
    res.setHeader('content-type', 'text/html');
    res.setHeader('cache-control', 'no-store');
    if (req.url !== '/') {
      res.end('<!doctype html><html lang="en"><title>Elsewhere</title><h1>Another page of our product</h1>');
      return;
    }
    // A fresh link for every view of the page, made by "our backend".
    void app.request('POST', `/v1/applications/${a}/portal-links`, { key, body: {} }).then((made) => {
      res.end(`<!doctype html><html lang="en"><title>Our product</title><h1>Our product</h1>
<div id="webhooks"></div>
<script>
  const frame = document.createElement('iframe');
  frame.title = 'Webhooks';
  frame.allow = 'clipboard-write';
  frame.style.cssText = 'width: 100%; height: 900px; border: 0';
  frame.src = ${JSON.stringify(made.body.url)};
  document.getElementById('webhooks').append(frame);
</script>`);
    });
  });
  await new Promise<void>((resolve) => server.listen(parentPort, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }));

  const { page, refused } = await openPage(t, [portalHost(), `127.0.0.1:${parentPort}`]);
  await page.goto(`http://127.0.0.1:${parentPort}/`);
  const frame = page.frameLocator('iframe');
  await frame.getByRole('link', { name: 'https://a.example.com/hooks' }).click();
  await frame.getByRole('button', { name: 'Pause' }).waitFor();
  await page.goto(`http://127.0.0.1:${parentPort}/elsewhere`);
  await page.getByRole('heading', { name: 'Another page of our product' }).waitFor();
  await page.goBack();
  await page.getByRole('heading', { name: 'Our product' }).waitFor();
  await frame.getByRole('link', { name: 'https://a.example.com/hooks' }).waitFor();
  t.false(await frame.getByText('This link is incomplete or invalid').isVisible());
  await shot(page, 'iframe-after-back');
  t.deepEqual(refused, []);
});
