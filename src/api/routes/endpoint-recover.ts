// POST /v1/endpoints/{id}/recover: every delivery to the endpoint that gave up (not cancelled)
// at a time in [since, until] is delivered again as a new round. The request records the
// recovery with its exact count; the workers re-queue the deliveries in batches afterwards
// (src/worker/upkeep.ts, sql/017-recover.sql), so its time does not grow with their number
// beyond one indexed count.
import { Router } from 'express';
import type { DatabasePool } from 'slonik';
import { z } from 'zod';
import { findEndpoint } from '../../db/endpoints.ts';
import { heavyRead } from '../../db/heavy-reads.ts';
import { recordRecovery } from '../../db/recoveries.ts';
import { notFound } from '../../errors.ts';
import { isId } from '../../ids.ts';
import { authOf } from '../middleware/auth.ts';
import { shaper } from '../responses.ts';
import { timestamp } from '../schemas.ts';
import { noQuery, parseBody } from '../validation.ts';

/** How far back `since` may reach. */
export const RECOVER_MAX_AGE_DAYS = 14;
/** Slack for a `since` computed as "14 days ago" by a client a little before the request arrives. */
const CLOCK_SLACK_MS = 60_000;

const DAY_MS = 86_400_000;

/** A timestamp as the schema normalises it (an input it refused reads back otherwise, or not at all). */
const normalised = (value: string) => {
  const date = new Date(value);
  return !Number.isNaN(date.getTime()) && date.toISOString() === value;
};

/** The request body (also what the OpenAPI document says the operation accepts). */
export const recoverBody = z.strictObject({
  since: timestamp.meta({ description: `Start of the range (inclusive) of the times deliveries gave up; at most ${RECOVER_MAX_AGE_DAYS} days ago.` }),
  until: timestamp.optional().meta({ description: 'End of the range (inclusive); after `since`. Default: now.' }),
}).superRefine((body, ctx) => {
  // Only the fields that passed as timestamps (normalised, so they read back the same): a
  // refused `since` of 2026-02-30 was read as 2 March, and the answer said it was also more than
  // 14 days ago (a probe).
  if (!normalised(body.since)) return;
  if (body.until !== undefined && !normalised(body.until)) return;
  const now = Date.now();
  const since = Date.parse(body.since);
  if (since < now - RECOVER_MAX_AGE_DAYS * DAY_MS - CLOCK_SLACK_MS) {
    ctx.addIssue({ code: 'custom', path: ['since'], message: `must be at most ${RECOVER_MAX_AGE_DAYS} days ago` });
  }
  if (body.until !== undefined && Date.parse(body.until) <= since) {
    ctx.addIssue({ code: 'custom', path: ['until'], message: 'must be after since' });
  } else if (body.until === undefined && since >= now) {
    ctx.addIssue({ code: 'custom', path: ['since'], message: 'must be in the past when until is not given' });
  }
});

export const endpointRecovering = z.object({
  id: z.string().regex(/^ep_[0-9A-Za-z]{27}$/).meta({ description: 'Endpoint id.', examples: ['ep_3MRoiOGljZNTyxKbuM2hR2jeyER'] }),
  status: z.literal('recovering'),
  deliveries: z.number().int().min(0).meta({ description: 'How many deliveries gave up in the range when the request ran: exactly those are delivered again.' }),
}).meta({ id: 'EndpointRecovering' });

const toRecovering = shaper(endpointRecovering);

export function makeEndpointRecoverRouter(pool: DatabasePool): Router {
  const router = Router();

  router.post('/:id/recover', noQuery, async (req, res) => {
    const tenant = authOf(res);
    if (!isId('ep', req.params.id)) throw notFound('Endpoint');
    const body = parseBody(recoverBody, req.body);
    // Its count reads every failure of the range: a heavy read (src/db/heavy-reads.ts).
    const recorded = await heavyRead(pool, () => pool.transaction(async (tx) => {
      const endpoint = await findEndpoint(tx, tenant, req.params.id);
      return endpoint ? recordRecovery(tx, endpoint.id, body.since, body.until ?? null) : null;
    }));
    if (!recorded) throw notFound('Endpoint');
    res.status(202).json(toRecovering({ id: req.params.id, status: 'recovering', deliveries: recorded.deliveries }));
  });

  return router;
}
