// The routes of a browser page (src/pages/<name>/): GET /<name> and its two hashed assets. The
// page is public (it holds no data; it calls the /v1 API with the credential the user gives it).
// The Content-Security-Policy allows this origin only, plus `frameAncestors` for embedding.
// Script and style carry a content hash in their URL and are cached for good; the page itself
// is revalidated. An empty icon: without it every browser asks for /favicon.ico, a 404 that
// shows as an error in the console (a probe).
import { Router, type Request, type Response, type NextFunction } from 'express';
import { pageBundle, type PageName } from '../pages/build.ts';

export function pageCsp(frameAncestors: string): string {
  return [
    "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:", "connect-src 'self'",
    "base-uri 'none'", "form-action 'none'", `frame-ancestors ${frameAncestors}`,
  ].join('; ');
}

const html = (name: PageName, title: string, version: string) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${title}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/${name}/assets/${version}/${name}.css">
</head>
<body>
<div id="app"><p class="boot">Loading…</p></div>
<script src="/${name}/assets/${version}/${name}.js"></script>
</body>
</html>
`;

export function makePageRouter(name: PageName, page: { title: string; frameAncestors: string; headers?: Record<string, string> }): Router {
  const router = Router();
  const csp = pageCsp(page.frameAncestors);
  // X-Content-Type-Options: nosniff is on every answer (request-context.ts).
  const common = { 'Referrer-Policy': 'no-referrer' };
  const asset = (kind: 'js' | 'css') => async (req: Request, res: Response, next: NextFunction) => {
    const bundle = await pageBundle(name);
    if (req.params.version !== bundle.version) return next();
    res.set({ ...common, 'Cache-Control': 'public, max-age=31536000, immutable' });
    res.type(kind).send(kind === 'js' ? bundle.js : bundle.css);
  };
  router.get(`/${name}`, async (_req, res) => {
    const { version } = await pageBundle(name);
    res.set({ ...common, 'Cache-Control': 'no-cache', 'Content-Security-Policy': csp, ...page.headers });
    res.type('html').send(html(name, page.title, version));
  });
  router.get(`/${name}/assets/:version/${name}.js`, asset('js'));
  router.get(`/${name}/assets/:version/${name}.css`, asset('css'));
  return router;
}
