// GET /dashboard: the organization's operator console (decisions section 11), a page that calls
// the public /v1 API with the API key pasted into it and nothing else. No auth here: the page
// itself is public; the key stays in the browser tab (memory and sessionStorage). The
// Content-Security-Policy allows this origin only and no framing (an operator's console is
// never embedded, unlike the portal). Script and style carry a content hash in their URL and are
// cached for good; the page itself is revalidated.
import { Router, type Request, type Response, type NextFunction } from 'express';
import { pageBundle } from '../../pages/build.ts';

const PAGE = (version: string) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>hookline dashboard</title>
<link rel="stylesheet" href="/dashboard/assets/${version}/dashboard.css">
</head>
<body>
<div id="app"><p class="boot">Loading…</p></div>
<script src="/dashboard/assets/${version}/dashboard.js"></script>
</body>
</html>
`;

export const DASHBOARD_CSP = [
  "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:", "connect-src 'self'",
  "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'",
].join('; ');

export function makeDashboardRouter(): Router {
  const router = Router();
  const common = { 'X-Content-Type-Options': 'nosniff', 'Referrer-Policy': 'no-referrer' };
  const asset = (kind: 'js' | 'css') => async (req: Request, res: Response, next: NextFunction) => {
    const bundle = await pageBundle('dashboard');
    if (req.params.version !== bundle.version) return next();
    res.set({ ...common, 'Cache-Control': 'public, max-age=31536000, immutable' });
    res.type(kind).send(kind === 'js' ? bundle.js : bundle.css);
  };
  router.get('/dashboard', async (_req, res) => {
    const { version } = await pageBundle('dashboard');
    res.set({ ...common, 'Cache-Control': 'no-cache', 'Content-Security-Policy': DASHBOARD_CSP, 'X-Frame-Options': 'DENY' });
    res.type('html').send(PAGE(version));
  });
  router.get('/dashboard/assets/:version/dashboard.js', asset('js'));
  router.get('/dashboard/assets/:version/dashboard.css', asset('css'));
  return router;
}
