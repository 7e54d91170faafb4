// What the portal's browser tests share: the app started on a port chosen up front, so PUBLIC_URL
// keeps its default (http://localhost:<PORT>) and the links POST .../portal-links returns open
// as they are; real magic links; headless Chromium (Debian's) with every request's host
// recorded and any other host refused; axe-core; screenshots in the git-ignored test-output/.
import test, { type ExecutionContext } from 'ava';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startTestApp, type TestApp, type TestAppOptions } from '../helpers/app.ts';
import { closedPort } from '../helpers/receiver.ts';
import { axe, CHROMIUM, CHROMIUM_ARGS, guardHosts, hasChromium, skipReason } from '../helpers/browser.ts';
import { TOKEN } from './helpers.ts';

const SHOTS = path.resolve('test-output/portal');
/** A limit for a busy shared machine (deliveries, retries, the page's refresh), never a measure. */
export const WAIT_MS = 90_000;

export { axe, hasChromium };
export const browserTest = hasChromium ? test.serial : test.skip;
export const skipped = skipReason;

/** The app with a worker, its PORT picked now (bound to 0, released) so its PUBLIC_URL is known. */
export function startPortalApp(
  env: Record<string, string> | (() => Promise<Record<string, string>>) = {}, options: TestAppOptions = {},
): TestApp {
  return startTestApp(async () => ({
    ALLOW_PRIVATE_DESTINATIONS: 'true', ...(typeof env === 'function' ? await env() : env), PORT: String(await closedPort()),
  }), { worker: true, ...options });
}

export type MagicLink = { url: string; token: string; expires_at: string; read_only: boolean };

/** POST /v1/applications/{appId}/portal-links, as the customer's backend makes a link. */
export async function magicLink(t: ExecutionContext, on: TestApp, key: string, appId: string, body: Record<string, unknown> = {}): Promise<MagicLink> {
  const res = await on.request('POST', `/v1/applications/${appId}/portal-links`, { key, body });
  if (res.status !== 201) throw new Error(`no portal link: ${res.status} ${JSON.stringify(res.body)}`);
  t.regex(res.body.token, TOKEN);
  t.is(res.body.url, `${on.config.publicUrl}/portal#${res.body.token}`);
  return res.body as MagicLink;
}

let browser: Browser | undefined;
test.after.always(async () => { await browser?.close(); });

export type Session = { page: Page; hosts: Set<string>; refused: string[]; errors: string[]; dialogs: string[] };

/**
 * A fresh browser context and page. Every request's host is recorded; a request for any other
 * host than `allowed` (host:port) is refused and noted in `refused`. Dialogs are accepted, their
 * messages noted in `dialogs`.
 */
export async function openPage(t: ExecutionContext, allowed: string[], viewport = { width: 1280, height: 800 }): Promise<Session> {
  browser ??= await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  const context = await browser.newContext({ viewport });
  t.teardown(() => context.close());
  const { hosts, refused } = await guardHosts(context, (url) => allowed.includes(url.host));
  const errors: string[] = [];
  context.on('weberror', (error) => errors.push(error.error().message));
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT_MS);
  const dialogs: string[] = [];
  page.on('dialog', (dialog) => { dialogs.push(dialog.message()); void dialog.accept(); });
  return { page, hosts, refused, errors, dialogs };
}

/** A screenshot in test-output/portal/ for a reviewer's eye: the full page, or what the window shows. */
export async function shot(page: Page, name: string, fullPage = true): Promise<void> {
  mkdirSync(SHOTS, { recursive: true });
  const size = page.viewportSize();
  await page.screenshot({ path: path.join(SHOTS, `${name}-${size?.width}x${size?.height}.png`), fullPage });
}

export const VIEWPORTS = [{ width: 1280, height: 800 }, { width: 390, height: 844 }] as const;
