// GET /health: no auth; 200 when the database answers within 2 s, else 503.
import { Router } from 'express';
import { sql, type DatabasePool } from 'slonik';

const TIMEOUT_MS = 2_000;

export function makeHealthRouter(pool: DatabasePool): Router {
  const router = Router();
  router.get('/health', async (_req, res) => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('database health check timed out')), TIMEOUT_MS);
    });
    try {
      await Promise.race([pool.query(sql.unsafe`select 1`), timeout]);
      res.json({ status: 'ok' });
    } catch {
      res.status(503).json({ status: 'unavailable' });
    } finally {
      clearTimeout(timer);
    }
  });
  return router;
}
