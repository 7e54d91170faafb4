// Building blocks shared by request schemas of several resources, and the payload size check
// that runs before them.
import { z } from 'zod';
import { payloadTooLarge } from '../errors.ts';
import { reservedHeaderProblem } from '../core/custom-headers.ts';

export const environment = z.enum(['live', 'test']);

const TIMESTAMP_MESSAGE = 'must be an ISO 8601 date-time with a time zone, e.g. 2026-11-22T10:00:00Z';

/**
 * ISO 8601 with a time and an offset; normalised to UTC with milliseconds. Its UTC year must be
 * 1 to 9999 (an offset can push 0000 or 9999 out of it): PostgreSQL and the ISO form hold no other.
 */
export const timestamp = z.iso
  .datetime({ offset: true, message: TIMESTAMP_MESSAGE })
  .transform((value, ctx) => {
    const date = new Date(value);
    const year = date.getUTCFullYear();
    if (Number.isNaN(year) || year < 1 || year > 9999) {
      ctx.issues.push({ code: 'custom', message: `${TIMESTAMP_MESSAGE}, in the years 1 to 9999 UTC`, input: value });
      return z.NEVER;
    }
    return date.toISOString();
  });

/** A positive whole number written in a query string (documented as the integer it stands for). */
export const queryInteger = (min: number, max: number, fallback: number, description: string) =>
  z.string().regex(/^\d+$/, { message: 'must be a whole number' }).transform(Number)
    .pipe(z.number().min(min, { message: `must be at least ${min}` }).max(max, { message: `must be at most ${max}` }))
    .default(fallback)
    .meta({
      description,
      override: ({ jsonSchema }: { jsonSchema: Record<string, unknown> }) => {
        for (const key of Object.keys(jsonSchema)) delete jsonSchema[key];
        Object.assign(jsonSchema, { type: 'integer', minimum: min, maximum: max, default: fallback });
      },
    });

/** `limit` and `cursor` of a cursor list (decisions section 5). */
export const cursorQuery = {
  limit: queryInteger(1, 100, 20, 'Items per page.'),
  cursor: z.string().min(1).optional().meta({ description: 'The `next_cursor` of the previous page; omit for the first page.' }),
};

/** `page` and `per_page` of an offset list (decisions section 5). */
export const offsetQuery = {
  page: queryInteger(1, 1_000_000, 1, 'Page number, from 1.'),
  per_page: queryInteger(1, 100, 25, 'Items per page.'),
};

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$/;
// Visible ASCII, space and tab: no CR/LF (header injection), no bytes undici would refuse.
const HEADER_VALUE = /^[\t\x20-\x7e]{0,4096}$/;
export const MAX_CUSTOM_HEADERS = 20;
/**
 * The bytes of one set's names and values together (ASCII: a byte a character). At 6 KB an
 * endpoint's set and a job's, both at their most, with the longest URL and event type name and
 * a rotation's two signatures, make a request head of about 15 KB: inside the 16 KB that Node
 * and many other servers take by default, so no delivery is refused for its headers alone
 * (test/custom-header-limits.test.ts sends one). It also bounds what a send's headers cost the
 * worker (its memory, and the queue share, which weighs a delivery by its payload).
 */
export const MAX_CUSTOM_HEADER_BYTES = 6 * 1024;

/** Custom headers of endpoints and jobs (decisions section 6). */
export const customHeaders = z.record(z.string(), z.string({ message: 'header values must be strings' }))
  .superRefine((headers, ctx) => {
    const names = Object.keys(headers);
    if (names.length > MAX_CUSTOM_HEADERS) {
      ctx.addIssue({ code: 'custom', message: `at most ${MAX_CUSTOM_HEADERS} headers` });
    }
    const bytes = names.reduce((sum, name) => sum + name.length + (headers[name]?.length ?? 0), 0);
    if (bytes > MAX_CUSTOM_HEADER_BYTES) {
      ctx.addIssue({ code: 'custom', message: `at most ${MAX_CUSTOM_HEADER_BYTES} bytes of names and values together (${bytes} given)` });
    }
    const seen = new Set<string>();
    for (const name of names) {
      const lower = name.toLowerCase();
      const reserved = reservedHeaderProblem(name);
      if (!HEADER_NAME.test(name)) {
        ctx.addIssue({ code: 'custom', path: [name], message: 'is not a valid HTTP header name' });
      } else if (reserved !== null) {
        ctx.addIssue({ code: 'custom', path: [name], message: reserved });
      } else if (seen.has(lower)) {
        ctx.addIssue({ code: 'custom', path: [name], message: 'repeats a header name (names are case-insensitive)' });
      }
      seen.add(lower);
      if (!HEADER_VALUE.test(headers[name] ?? '')) {
        ctx.addIssue({ code: 'custom', path: [name], message: 'must be at most 4096 printable ASCII characters' });
      }
    }
  });

export const METADATA_MAX_BYTES = 16 * 1024;

/** Application metadata: any JSON object of at most 16 KB serialized. */
export const metadata = z.record(z.string(), z.unknown(), { message: 'must be a JSON object' })
  .refine((value) => Buffer.byteLength(JSON.stringify(value)) <= METADATA_MAX_BYTES, {
    message: `must be at most ${METADATA_MAX_BYTES} bytes as JSON`,
  });

export const PAYLOAD_MAX_BYTES = 256 * 1024;

/**
 * 256 KB of the payload's JSON (decisions section 3), checked before anything else about it,
 * by both routes that take a job payload: webhook jobs and an endpoint's test.
 */
export function assertPayloadSize(value: unknown): void {
  if (value !== null && typeof value === 'object' && Buffer.byteLength(JSON.stringify(value)) > PAYLOAD_MAX_BYTES) {
    throw payloadTooLarge(`payload must be at most ${PAYLOAD_MAX_BYTES} bytes of JSON.`);
  }
}

/** A query string of free text (search). */
export const searchText = z.string().max(255);

export const EVENT_TYPE_NAME = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/;
