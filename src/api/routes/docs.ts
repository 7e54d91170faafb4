// GET /docs: no auth; Swagger UI (the swagger-ui-dist package, served from node_modules, never
// a CDN) rendering /v1/openapi.json. The page and its assets load nothing from other hosts,
// which the Content-Security-Policy enforces, so it works offline.
import { createRequire } from 'node:module';
import path from 'node:path';
import { Router } from 'express';

const distDir = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
const { version } = createRequire(import.meta.url)('swagger-ui-dist/package.json') as { version: string };
/** Only what the page uses: not the package's own index.html (the petstore), maps or package.json. */
const ASSETS = new Set(['swagger-ui-bundle.js', 'swagger-ui.css', 'favicon-32x32.png', 'favicon-16x16.png']);
// The version is in the asset URLs, so an upgrade changes them and they can be cached for good.
const assets = `/docs/assets/${version}`;

const CSP = [
  "default-src 'none'", "script-src 'self'", "style-src 'self' 'unsafe-inline'", "img-src 'self' data:",
  "font-src 'self'", "connect-src 'self'", "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'",
].join('; ');

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Hookline API</title>
<link rel="stylesheet" href="${assets}/swagger-ui.css">
<link rel="icon" type="image/png" href="${assets}/favicon-32x32.png" sizes="32x32">
<link rel="icon" type="image/png" href="${assets}/favicon-16x16.png" sizes="16x16">
</head>
<body>
<div id="swagger-ui"></div>
<script src="${assets}/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
`;

// validatorUrl null: the default shows a badge fetched from validator.swagger.io.
const INIT = `window.ui = SwaggerUIBundle({
  url: '/v1/openapi.json',
  dom_id: '#swagger-ui',
  presets: [SwaggerUIBundle.presets.apis],
  layout: 'BaseLayout',
  deepLinking: true,
  docExpansion: 'list',
  validatorUrl: null,
});
`;

export function makeDocsRouter(): Router {
  const router = Router();
  router.get('/docs', (_req, res) => {
    // X-Content-Type-Options: nosniff is on every answer (request-context.ts).
    res.set({ 'Cache-Control': 'no-cache', 'Content-Security-Policy': CSP, 'Referrer-Policy': 'no-referrer' });
    res.type('html').send(PAGE);
  });
  router.get('/docs/init.js', (_req, res) => {
    res.set('Cache-Control', 'no-cache');
    res.type('js').send(INIT);
  });
  router.get('/docs/assets/:version/:file', (req, res, next) => {
    if (req.params.version !== version || !ASSETS.has(req.params.file)) return next();
    res.sendFile(req.params.file, { root: distDir, maxAge: '365d', immutable: true }, (error) => {
      if (error && !res.headersSent) next(error);
    });
  });
  return router;
}
