// Building blocks shared by request schemas of several resources.
import { z } from 'zod';

export const environment = z.enum(['live', 'test']);

/** ISO 8601 with a time and an offset; normalised to UTC with milliseconds. */
export const timestamp = z.iso
  .datetime({ offset: true, message: 'must be an ISO 8601 date-time with a time zone, e.g. 2026-11-22T10:00:00Z' })
  .transform((value) => new Date(value).toISOString());

/** A positive whole number written in a query string. */
export const queryInteger = (min: number, max: number, fallback: number) =>
  z.string().regex(/^\d+$/, { message: 'must be a whole number' }).transform(Number)
    .pipe(z.number().min(min, { message: `must be at least ${min}` }).max(max, { message: `must be at most ${max}` }))
    .default(fallback);

/** `limit` and `cursor` of a cursor list (decisions section 5). */
export const cursorQuery = {
  limit: queryInteger(1, 100, 20),
  cursor: z.string().min(1).optional(),
};
