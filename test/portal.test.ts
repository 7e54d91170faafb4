// GET /portal as the server sends it: the page, its Content-Security-Policy with
// PORTAL_FRAME_ANCESTORS, and its hashed assets cached for good. The page itself is driven in
// headless Chromium through real portal links by test/portal-session.test.ts (a customer's
// session), test/portal-failures.test.ts (failures, circuit, resend, recover) and
// test/portal-access.test.ts (read-only, expired and revoked links, isolation, iframes).
import test from 'ava';
import { startTestApp } from './helpers/app.ts';

const app = startTestApp({ PORTAL_FRAME_ANCESTORS: "'self' http://127.0.0.1:*" });

test('GET /portal: the page, its CSP with PORTAL_FRAME_ANCESTORS, and hashed assets cached for good', async (t) => {
  const res = await fetch(`${app.baseUrl}/portal`);
  t.is(res.status, 200);
  t.is(res.headers.get('cache-control'), 'no-cache');
  const csp = res.headers.get('content-security-policy') ?? '';
  t.regex(csp, /default-src 'none'/);
  t.regex(csp, /connect-src 'self'/);
  t.regex(csp, /frame-ancestors 'self' http:\/\/127\.0\.0\.1:\*/);
  const html = await res.text();
  const [icon, ...assets] = [...html.matchAll(/(?:href|src)="([^"]+)"/g)].map((m) => m[1]!);
  t.is(icon, 'data:,', 'an empty icon: no request for /favicon.ico');
  t.is(assets.length, 2);
  for (const asset of assets) {
    const one = await fetch(`${app.baseUrl}${asset}`);
    t.is(one.status, 200, asset);
    t.is(one.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    t.true((await one.text()).length > 100);
    t.is((await fetch(`${app.baseUrl}${asset.replace(/assets\/[^/]+/, 'assets/0000')}`)).status, 404, 'another version is not served');
  }
});
