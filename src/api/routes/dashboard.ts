// GET /dashboard: the organization's operator console (decisions section 16; docs/dashboard.md), a page that calls
// the public /v1 API with the API key pasted into it and nothing else. No auth here: the page
// itself is public; the key stays in the browser tab (memory and sessionStorage). No framing:
// an operator's console is never embedded, unlike the portal.
import type { Router } from 'express';
import { makePageRouter } from '../page-router.ts';

export function makeDashboardRouter(): Router {
  return makePageRouter('dashboard', { title: 'hookline dashboard', frameAncestors: "'none'", headers: { 'X-Frame-Options': 'DENY' } });
}
