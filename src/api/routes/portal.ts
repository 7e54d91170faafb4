// GET /portal: the consumer portal (decisions section 10), a page that calls the public /v1
// API with the application-scoped token it finds in the URL fragment and nothing else. No
// auth here: the page itself is public, the token never reaches the server in a request line.
// The Content-Security-Policy allows this origin only; PORTAL_FRAME_ANCESTORS says which sites
// may embed it in an iframe. Its script and style carry a content hash in their URL and are
// cached for good; the page itself is revalidated.
import { Router, type Request, type Response, type NextFunction } from 'express';
import { pageBundle } from '../../pages/build.ts';

const PAGE = (version: string) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Webhooks</title>
<link rel="stylesheet" href="/portal/assets/${version}/portal.css">
</head>
<body>
<div id="app"><p class="boot">Loading…</p></div>
<script src="/portal/assets/${version}/portal.js"></script>
</body>
</html>
`;

export function portalCsp(frameAncestors: string): string {
  return [
    "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:", "connect-src 'self'",
    "base-uri 'none'", "form-action 'none'", `frame-ancestors ${frameAncestors}`,
  ].join('; ');
}

export function makePortalRouter(frameAncestors: string): Router {
  const router = Router();
  const csp = portalCsp(frameAncestors);
  const common = { 'X-Content-Type-Options': 'nosniff', 'Referrer-Policy': 'no-referrer' };
  const asset = (kind: 'js' | 'css') => async (req: Request, res: Response, next: NextFunction) => {
    const bundle = await pageBundle('portal');
    if (req.params.version !== bundle.version) return next();
    res.set({ ...common, 'Cache-Control': 'public, max-age=31536000, immutable' });
    res.type(kind).send(kind === 'js' ? bundle.js : bundle.css);
  };
  router.get('/portal', async (_req, res) => {
    const { version } = await pageBundle('portal');
    res.set({ ...common, 'Cache-Control': 'no-cache', 'Content-Security-Policy': csp });
    res.type('html').send(PAGE(version));
  });
  router.get('/portal/assets/:version/portal.js', asset('js'));
  router.get('/portal/assets/:version/portal.css', asset('css'));
  return router;
}
