// What every browser test shares: Debian's Chromium driven by playwright-core, with the flags
// that keep it off the network; a guard that refuses (and notes) any request to another host;
// and axe-core's serious and critical findings.
import type { ExecutionContext } from 'ava';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { BrowserContext, Page } from 'playwright-core';
import { until } from './until.ts';

export const CHROMIUM = '/usr/bin/chromium';
// As in the machine notes: without the background-networking flags Chromium tries Google's hosts.
export const CHROMIUM_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];
export const hasChromium = existsSync(CHROMIUM);
export const skipReason = hasChromium ? '' : ` (skipped: Chromium not installed (${CHROMIUM}); .ci/run installs it)`;

/**
 * Every request of `context` to a host `allowed` refuses is aborted and its URL noted in
 * `refused`; `hosts` collects every host asked for. A page must work with no internet.
 */
export async function guardHosts(context: BrowserContext, allowed: (url: URL) => boolean): Promise<{ refused: string[]; hosts: Set<string> }> {
  const refused: string[] = [];
  const hosts = new Set<string>();
  await context.route('**/*', async (route) => {
    const url = new URL(route.request().url());
    hosts.add(url.host);
    if (allowed(url)) return route.continue();
    refused.push(url.href);
    return route.abort('blockedbyclient');
  });
  return { refused, hosts };
}

const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** Fails `t` on any serious or critical axe-core finding in the page as it is now. */
export async function axe(t: ExecutionContext, page: Page, what: string): Promise<void> {
  await page.evaluate(AXE); // through the DevTools protocol: the CSP (rightly) refuses inline scripts
  const violations = await page.evaluate(async () => {
    const result = await (window as any).axe.run(document, { resultTypes: ['violations'] });
    return result.violations.filter((v: any) => v.impact === 'serious' || v.impact === 'critical')
      .map((v: any) => `${v.id}: ${v.help} (${v.nodes.map((n: any) => n.target.join(' ')).join(', ')})`);
  });
  t.deepEqual(violations, [], `axe on ${what}`);
}

/**
 * Where the text under `selector` wraps mid-word: each line break found character by character,
 * reported as "befo|re" unless it falls after a space, a dot or a comma (or an element boundary).
 */
export function midWordBreaks(page: Page, selector: string): Promise<string[]> {
  return page.$$eval(selector, (elements) => elements.flatMap((element) => {
    const found: string[] = [];
    const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const text = node.textContent ?? '';
      const range = document.createRange();
      let previous: number | null = null;
      for (let i = 0; i < text.length; i += 1) {
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        const rect = range.getClientRects()[0];
        if (!rect || rect.width === 0) continue;
        if (previous !== null && rect.top > previous + 2 && !/[\s.,]/.test(text[i - 1] ?? ' ')) {
          found.push(`${text.slice(Math.max(0, i - 12), i)}|${text.slice(i, i + 12)}`);
        }
        previous = rect.top;
      }
    }
    return found;
  }));
}

/**
 * Tabs through the first `steps` stops of the page and returns, for each, its focus ring's
 * contrast with the background it is drawn on (the nearest ancestor's opaque background: the
 * ring sits outside the element, `outline-offset` away). WCAG 1.4.11 asks 3:1 of a focus ring.
 */
export async function focusRingContrasts(page: Page, steps: number): Promise<Array<{ element: string; ring: string; on: string; ratio: number }>> {
  const found: Array<{ element: string; ring: string; on: string; ratio: number }> = [];
  for (let i = 0; i < steps; i += 1) {
    await page.keyboard.press('Tab');
    const one = await page.evaluate(() => {
      const element = document.activeElement as HTMLElement | null;
      if (!element || element === document.body || !element.matches(':focus-visible')) return null;
      const style = getComputedStyle(element);
      if (style.outlineStyle === 'none' || parseFloat(style.outlineWidth) === 0) return { element: element.outerHTML.slice(0, 80), ring: 'none', on: '', ratio: 0 };
      const rgb = (color: string) => (color.match(/[\d.]+/g) ?? []).map(Number);
      let parent = element.parentElement;
      let on = 'rgb(255, 255, 255)';
      for (; parent; parent = parent.parentElement) {
        const background = getComputedStyle(parent).backgroundColor;
        const [, , , alpha = 1] = rgb(background);
        if (alpha > 0) { on = background; break; }
      }
      const luminance = (color: string) => {
        const [r = 0, g = 0, b = 0] = rgb(color).slice(0, 3).map((c) => c / 255).map((c) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4));
        return 0.2126 * r + 0.7152 * g + 0.0722 * b;
      };
      const [a, b] = [luminance(style.outlineColor), luminance(on)];
      return { element: element.outerHTML.slice(0, 80), ring: style.outlineColor, on, ratio: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05) };
    });
    if (one) found.push(one);
  }
  return found;
}

/** The text of the element with the keyboard focus ('BODY' when nothing has it), once the browser has moved a lost focus. */
export const focused = (page: Page): Promise<string> => page.evaluate(async () => {
  await new Promise((frame) => requestAnimationFrame(() => requestAnimationFrame(frame)));
  return document.activeElement === document.body ? 'BODY' : document.activeElement?.textContent?.trim() ?? '';
});

/** Holds every `method` request whose URL matches `url` until `release()`: an action in flight for as long as the test looks. */
export async function hold(page: Page, url: RegExp, method: string) {
  const held: Array<() => void> = [];
  let asked = 0;
  await page.route(url, async (route) => {
    if (route.request().method() !== method) return route.fallback();
    asked += 1;
    await new Promise<void>((release) => held.push(release));
    return route.continue();
  });
  return {
    /** Waits for the `n`th request to be held. */
    arrived: (n: number) => until(`request ${n} to ${url} held`, () => asked >= n && held.length > 0),
    release: () => { for (const release of held.splice(0)) release(); },
  };
}
