// GET /v1/openapi.json: no auth; the OpenAPI document, built once from the routes' schemas.
import { Router } from 'express';
import { openApiText } from '../openapi/document.ts';

export function makeOpenApiRouter(): Router {
  const router = Router();
  router.get('/v1/openapi.json', (_req, res) => {
    // Public and the same for everyone: other origins' tools (code generators, viewers) may read it.
    res.set({ 'Cache-Control': 'no-cache', 'Access-Control-Allow-Origin': '*' });
    res.type('json').send(openApiText());
  });
  return router;
}
