// What endpoints did: GET /v1/endpoints/{id}/attempts (an endpoint's attempt log, cursor list)
// and GET /v1/endpoints/{id}/stats, and GET /v1/stats (every endpoint of the tenant): attempts,
// successes and failures per minute (since at most 24 h ago) or per hour (up to 7 days).
import { Router } from 'express';
import type { DatabasePool } from 'slonik';
import { z } from 'zod';
import { decodeCursor } from '../../db/cursor.ts';
import { isAttemptCursorId, listEndpointAttempts } from '../../db/delivery-attempts.ts';
import { listAttemptStats, type StatsScope } from '../../db/endpoint-attempt-stats.ts';
import { findEndpoint } from '../../db/endpoints.ts';
import { isId } from '../../ids.ts';
import { notFound, validationError } from '../../errors.ts';
import { authOf } from '../middleware/auth.ts';
import { endpointAttempt, shaper, type attemptStats, type endpointAttemptList } from '../responses.ts';
import { cursorQuery, timestamp } from '../schemas.ts';
import { parseQuery } from '../validation.ts';

const DAY_MS = 24 * 3600 * 1000;
const MINUTE_MS = 60_000;
/** How far back stats reach (the per-minute table keeps 8 days: sql/012-hourly-upkeep.sql). */
export const STATS_MAX_DAYS = 7;

export const activityRequests = {
  attemptsQuery: z.strictObject({
    ...cursorQuery,
    status: z.enum(['succeeded', 'failed']).optional().meta({ description: 'Only successful, or only failed, attempts.' }),
    event_type: z.string().max(255).optional().meta({ description: 'Only attempts of jobs of this event type.' }),
    since: timestamp.optional().meta({ description: 'Only attempts started at or after this time (ISO 8601).' }),
    until: timestamp.optional().meta({ description: 'Only attempts started before this time (ISO 8601).' }),
  }),
  statsQuery: z.strictObject({
    since: timestamp.optional().meta({
      description: `Start of the period (ISO 8601), at most ${STATS_MAX_DAYS} days ago and not in the future; default the start of the first minute after 24 hours ago (the minutes the success rates count). `
        + 'Per-minute buckets when it is at most 24 hours ago, hourly ones beyond.',
    }),
  }),
};

const toAttempt = shaper(endpointAttempt);

async function endpointOf(pool: DatabasePool, tenant: ReturnType<typeof authOf>, id: string) {
  const found = isId('ep', id) ? await findEndpoint(pool, tenant, id) : null;
  if (!found) throw notFound('Endpoint');
  return found;
}

/** Mounted beside the endpoints router under /v1/endpoints (same authentication and scope). */
export function makeEndpointActivityRouter(pool: DatabasePool): Router {
  const router = Router();

  router.get('/:id/attempts', async (req, res) => {
    const query = parseQuery(activityRequests.attemptsQuery, req.query);
    const endpoint = await endpointOf(pool, authOf(res), req.params.id);
    const cursor = query.cursor === undefined ? null : decodeCursor(query.cursor, isAttemptCursorId);
    if (query.cursor !== undefined && !cursor) {
      throw validationError('The query string is invalid.', [{ path: 'cursor', message: 'is not a cursor returned by this list' }]);
    }
    const page = await listEndpointAttempts(pool, endpoint.id, {
      limit: query.limit, cursor, status: query.status, eventType: query.event_type, since: query.since, until: query.until,
    });
    res.json({ data: page.rows.map(toAttempt), next_cursor: page.nextCursor } satisfies z.output<typeof endpointAttemptList>);
  });

  router.get('/:id/stats', async (req, res) => {
    const { since } = parseQuery(activityRequests.statsQuery, req.query);
    const endpoint = await endpointOf(pool, authOf(res), req.params.id);
    res.json(await stats(pool, { endpointId: endpoint.id }, since));
  });

  return router;
}

/** GET /v1/stats: the whole tenant (organization and environment); scope endpoints:read. */
export function makeStatsRouter(pool: DatabasePool): Router {
  const router = Router();
  router.get('/', async (req, res) => {
    const { since } = parseQuery(activityRequests.statsQuery, req.query);
    res.json(await stats(pool, { tenant: authOf(res) }, since));
  });
  return router;
}

async function stats(pool: DatabasePool, scope: StatsScope, sinceParam: string | undefined): Promise<z.output<typeof attemptStats>> {
  const now = Date.now();
  // By default the minutes the success rates count (sql/009-success-rates.sql: those starting
  // after 24 hours ago), so that the totals and the rates of the same endpoints agree; it said
  // the minute holding "24 hours ago" too, one more than the rates (a DBA's probe).
  const since = sinceParam ?? new Date((Math.floor((now - DAY_MS) / MINUTE_MS) + 1) * MINUTE_MS).toISOString();
  const sinceMs = Date.parse(since);
  if (sinceMs < now - STATS_MAX_DAYS * DAY_MS || sinceMs > now) {
    throw validationError('The query string is invalid.', [{ path: 'since', message: `must be within the last ${STATS_MAX_DAYS} days` }]);
  }
  const bucket = sinceMs >= now - DAY_MS ? 'minute' : 'hour';
  const data = await listAttemptStats(pool, scope, since, bucket);
  const totals = { attempts: 0, successes: 0, failures: 0 };
  for (const row of data) {
    totals.attempts += row.attempts;
    totals.successes += row.successes;
    totals.failures += row.failures;
  }
  return { since, until: new Date(now).toISOString(), bucket, data: [...data], totals };
}
