// What every browser test shares: Debian's Chromium driven by playwright-core, with the flags
// that keep it off the network; a guard that refuses (and notes) any request to another host;
// and axe-core's serious and critical findings.
import type { ExecutionContext } from 'ava';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { BrowserContext, Page } from 'playwright-core';

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
