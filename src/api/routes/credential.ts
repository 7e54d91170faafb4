// GET /v1/credential: what the calling credential is. A page that holds only a credential (the
// portal with its magic link, the dashboard with a pasted key) learns from it which application,
// environment and scopes it works with, and shows what it may not do as disabled.
import { Router } from 'express';
import type { DatabasePool } from 'slonik';
import { z } from 'zod';
import { findApiKey } from '../../db/api-keys.ts';
import { portalTokenExpiry } from '../../db/portal-tokens.ts';
import { unauthorized } from '../../errors.ts';
import { authOf } from '../middleware/auth.ts';
import type { credential } from '../responses.ts';
import { noQuery } from '../validation.ts';

export function makeCredentialRouter(pool: DatabasePool): Router {
  const router = Router();
  router.get('/', noQuery, async (_req, res) => {
    const auth = authOf(res);
    let body: z.output<typeof credential>;
    if (auth.kind === 'api_key') {
      const key = await findApiKey(pool, auth.orgId, auth.keyId);
      // Deleted between authentication and this read: as if it had been gone a moment earlier.
      if (!key) throw unauthorized('Invalid API key.');
      body = {
        type: 'api_key', id: key.id, name: key.name, environment: key.environment, scopes: key.scopes,
        read_only: false, application_id: null, expires_at: key.expires_at,
      };
    } else {
      const expiresAt = await portalTokenExpiry(pool, auth.tokenId);
      if (!expiresAt) throw unauthorized('Invalid portal token.');
      body = {
        type: 'portal_token', id: null, name: null, environment: auth.environment, scopes: [],
        read_only: auth.readOnly, application_id: auth.applicationId, expires_at: expiresAt,
      };
    }
    res.json(body);
  });
  return router;
}
