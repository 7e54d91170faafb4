// GET /portal: the consumer portal (decisions section 10), a page that calls the public /v1
// API with the application-scoped token it finds in the URL fragment and nothing else. No
// auth here: the page itself is public, the token never reaches the server in a request line.
// PORTAL_FRAME_ANCESTORS says which sites may embed it in an iframe.
import type { Router } from 'express';
import { makePageRouter } from '../page-router.ts';

export function makePortalRouter(frameAncestors: string): Router {
  return makePageRouter('portal', { title: 'Webhooks', frameAncestors });
}
