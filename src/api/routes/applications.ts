// /v1/applications: create, list (offset, search), retrieve (with its endpoints), by-uid,
// patch (metadata replaced whole, uid may be cleared), delete (soft; endpoints follow), and
// its portal links: create one (an application-scoped token in a URL) or revoke them all.
import { Router, type Response } from 'express';
import type { CommonQueryMethods, DatabasePool } from 'slonik';
import { z } from 'zod';
import type { Config } from '../../config.ts';
import { createPortalLink } from '../../core/portal-tokens.ts';
import {
  findApplication, findApplicationByUid, insertApplication, listApplications, softDeleteApplication, updateApplication,
  type ApplicationRow,
} from '../../db/applications.ts';
import { listApplicationEndpoints } from '../../db/endpoints.ts';
import { pagination } from '../../db/offset.ts';
import { heavyRead } from '../../db/heavy-reads.ts';
import { inOneSnapshot } from '../../db/one-snapshot.ts';
import { revokePortalTokens } from '../../db/portal-tokens.ts';
import type { Tenant } from '../../db/tenant.ts';
import { isId, newId } from '../../ids.ts';
import { forbidden, notFound } from '../../errors.ts';
import { authOf } from '../middleware/auth.ts';
import { enforceRateLimit, rateLimitRules } from '../middleware/rate-limit.ts';
import {
  application, applicationDetail, applicationEndpoint, applicationPatched, applicationSummary, deletedView, portalLink, portalLinksRevoked, shaper,
  type applicationList,
} from '../responses.ts';
import { metadata, offsetQuery, searchText } from '../schemas.ts';
import { assertNoQuery, noInput, noQuery, parseBody, parseQuery } from '../validation.ts';

const name = z.string().trim().min(1, { message: 'must not be empty' }).max(255);
const uid = z.string().regex(/^[A-Za-z0-9_-]{1,256}$/, { message: 'must be 1 to 256 letters, digits, dashes or underscores' });

const createBody = z.strictObject({ name, uid: uid.nullable().default(null), metadata: metadata.default({}) });
const patchBody = z.strictObject({ name: name.optional(), uid: uid.nullable().optional(), metadata: metadata.optional() });
const listQuery = z.strictObject({
  ...offsetQuery,
  search: searchText.optional().meta({ description: 'Case-insensitive part of the name or uid.' }),
});

const portalLinkBody = z.strictObject({
  expires_in: z.number().int().min(60).max(604_800).default(3600)
    .meta({ description: 'Seconds until the link stops working (60 to 604800, 7 days).', examples: [3600] }),
  read_only: z.boolean().default(false)
    .meta({ description: 'A read-only link may only read (GET), and never shows an endpoint secret.', examples: [false] }),
});

/** What the OpenAPI document says this resource accepts. */
export const applicationRequests = { createBody, patchBody, listQuery, uid, portalLinkBody };

const toApplication = shaper(application);
const toDetail = shaper(applicationDetail);
const toSummary = shaper(applicationSummary);
const toPatched = shaper(applicationPatched);
const toEndpoint = shaper(applicationEndpoint);
const toPortalLink = shaper(portalLink);
const toRevoked = shaper(portalLinksRevoked);

/** An application retrieve with more endpoints than this is a heavy read (sendDetail). */
const HEAVY_DETAIL_ENDPOINTS = 100;

export function makeApplicationsRouter(pool: DatabasePool, config: Config): Router {
  const router = Router();
  const { portalLinkCreation } = rateLimitRules(config);

  /**
   * The retrieve response: the application `find` reads and its live endpoints, from one snapshot
   * (its endpoints_count agrees with them). Null for an application of more than `atMost`
   * endpoints: none of them read.
   */
  async function detail(tenant: Tenant, find: (db: CommonQueryMethods) => Promise<ApplicationRow | null>, atMost = Infinity) {
    const found = await inOneSnapshot(pool, async (db) => {
      const app = await find(db);
      if (!app || app.endpoints_count > atMost) return app && { app, endpoints: null };
      return { app, endpoints: await listApplicationEndpoints(db, tenant, app.id) };
    });
    if (!found) throw notFound('Application');
    return found.endpoints && toDetail({ ...found.app, endpoints: found.endpoints.map(toEndpoint) });
  }

  /**
   * The retrieve: of an application with more than HEAVY_DETAIL_ENDPOINTS endpoints, read again
   * in its organization's turn for heavy reads (src/db/heavy-reads.ts). Its answer carries every
   * endpoint: 1,000 of 2,048-character URLs are 2.1 MB and 120-190 ms of the web's time, and 25
   * such retrieves a second from one tenant held another's simple reads for seconds (a probe).
   */
  async function sendDetail(res: Response, tenant: Tenant, find: (db: CommonQueryMethods) => Promise<ApplicationRow | null>) {
    const small = await detail(tenant, find, HEAVY_DETAIL_ENDPOINTS);
    if (small) {
      res.json(small);
      return;
    }
    await heavyRead(pool, async () => { res.json(await detail(tenant, find)); });
  }

  router.post('/', noQuery, async (req, res) => {
    const body = parseBody(createBody, req.body);
    const app = await insertApplication(pool, authOf(res), { id: newId('app'), ...body });
    res.status(201).json(toApplication(app));
  });

  router.get('/', async (req, res) => {
    const query = parseQuery(listQuery, req.query);
    const page = { page: query.page, perPage: query.per_page };
    const { rows, total } = await listApplications(pool, authOf(res), { ...page, search: query.search });
    res.json({ data: rows.map(toSummary), pagination: pagination(page, total) } satisfies z.output<typeof applicationList>);
  });

  router.get('/by-uid/:uid', noQuery, async (req, res) => {
    const tenant = authOf(res);
    if (!uid.safeParse(req.params.uid).success) throw notFound('Application');
    await sendDetail(res, tenant, (db) => findApplicationByUid(db, tenant, req.params.uid));
  });

  router.get('/:id', noQuery, async (req, res) => {
    const tenant = authOf(res);
    if (!isId('app', req.params.id)) throw notFound('Application');
    await sendDetail(res, tenant, (db) => findApplication(db, tenant, req.params.id));
  });

  router.patch('/:id', noQuery, async (req, res) => {
    if (!isId('app', req.params.id)) throw notFound('Application');
    const body = parseBody(patchBody, req.body);
    const updated = await updateApplication(pool, authOf(res), req.params.id, body);
    if (!updated) throw notFound('Application');
    res.json(toPatched(updated));
  });

  router.delete('/:id', ...noInput, async (req, res) => {
    const deleted = isId('app', req.params.id) ? await softDeleteApplication(pool, authOf(res), req.params.id) : null;
    if (!deleted) throw notFound('Application');
    res.json(deletedView(deleted));
  });

  router.post('/:id/portal-links', async (req, res) => {
    const tenant = authOf(res);
    if (tenant.kind !== 'api_key') throw forbidden('A portal token cannot use this operation.');
    // A malformed request is refused before the limit counts it.
    assertNoQuery(req);
    const body = parseBody(portalLinkBody, req.body);
    await enforceRateLimit(pool, res, portalLinkCreation, tenant.orgId);
    const link = await createPortalLink(pool, tenant, {
      applicationId: req.params.id, apiKeyId: tenant.keyId, expiresInSeconds: body.expires_in, readOnly: body.read_only, publicUrl: config.publicUrl,
    });
    res.status(201).json(toPortalLink(link));
  });

  router.delete('/:id/portal-links', ...noInput, async (req, res) => {
    const tenant = authOf(res);
    const app = isId('app', req.params.id) ? await findApplication(pool, tenant, req.params.id) : null;
    if (!app) throw notFound('Application');
    res.json(toRevoked({ id: app.id, revoked: await revokePortalTokens(pool, tenant, app.id) }));
  });

  return router;
}
