// GET /v1/summary: the overview counts of the key's organization and environment (endpoints by
// health, open deliveries). Read with the endpoints' scope, like GET /v1/stats.
import { Router } from 'express';
import type { DatabasePool } from 'slonik';
import { z } from 'zod';
import { readSummary } from '../../db/summary.ts';
import { authOf } from '../middleware/auth.ts';
import type { summary } from '../responses.ts';
import { noQuery } from '../validation.ts';

export function makeSummaryRouter(pool: DatabasePool): Router {
  const router = Router();
  router.get('/', noQuery, async (_req, res) => {
    const tenant = authOf(res);
    const counts = await readSummary(pool, tenant);
    res.json({ environment: tenant.environment, ...counts } satisfies z.output<typeof summary>);
  });
  return router;
}
