// GET /health: no auth; 200 when the database answers within 1.5 s, else 503: an answer within
// the documented 2 s, also when the database is frozen (a probe's `curl --max-time 2` got no
// answer while the check waited 2 s).
import { Router } from 'express';
import { sql, type DatabasePool } from 'slonik';
import { within } from '../../within.ts';

/** How long /health waits for the database before answering 503: the 503 comes within the documented 2 s. */
export const HEALTH_TIMEOUT_MS = 1_500;

export function makeHealthRouter(pool: DatabasePool, timeoutMs: number = HEALTH_TIMEOUT_MS): Router {
  const router = Router();
  router.get('/health', async (_req, res) => {
    // Unavailable when the database refuses or does not answer `select 1` within timeoutMs.
    const answered = await within(pool.query(sql.unsafe`select 1`).then(() => true), timeoutMs, false).catch(() => false);
    if (answered) res.json({ status: 'ok' });
    else res.status(503).json({ status: 'unavailable' });
  });
  return router;
}
