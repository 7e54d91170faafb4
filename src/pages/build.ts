// Browser pages (the consumer portal, the operator dashboard) are TypeScript + Preact under
// src/pages/<name>/, bundled by esbuild when the server first serves them: in memory, once per
// process, with no output on disk, so `npm ci` + `npm start` stays the whole setup and a stale
// bundle cannot exist. tsc checks the pages with the rest of the code (tsconfig: dom lib, JSX),
// and their API types are `import type`s of src/api/responses.ts, so a renamed field breaks tsc.
import { createHash } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

export type Bundle = { js: string; css: string; version: string };

const pagesDir = path.dirname(fileURLToPath(import.meta.url));
const cache = new Map<string, Promise<Bundle>>();

async function bundle(name: string): Promise<Bundle> {
  const result = await build({
    entryPoints: [path.join(pagesDir, name, 'main.tsx')],
    bundle: true,
    write: false,
    outdir: '/out', // only names the outputs; nothing is written
    format: 'iife',
    target: ['es2022'],
    platform: 'browser',
    minify: true,
    legalComments: 'none',
    jsx: 'automatic',
    jsxImportSource: 'preact',
    logLevel: 'silent',
    define: { 'process.env.NODE_ENV': '"production"' },
  });
  const js = result.outputFiles.find((file) => file.path.endsWith('.js'))?.text ?? '';
  const css = result.outputFiles.find((file) => file.path.endsWith('.css'))?.text ?? '';
  const version = createHash('sha256').update(js).update(css).digest('hex').slice(0, 16);
  return { js, css, version };
}

/** The pages under src/pages/ that are served. */
export type PageName = 'portal' | 'dashboard';

/** The page's bundle, built on first use and kept for the life of the process. */
export function pageBundle(name: PageName): Promise<Bundle> {
  let pending = cache.get(name);
  if (!pending) {
    pending = bundle(name);
    pending.catch(() => cache.delete(name));
    cache.set(name, pending);
  }
  return pending;
}
