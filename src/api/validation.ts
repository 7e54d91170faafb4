// Request bodies and query strings checked by zod; every issue becomes a { path, message }
// detail of one 400 validation_error.
import { parse } from 'node:querystring';
import type { NextFunction, Request, Response } from 'express';
import { z } from 'zod';
import { decodeCursor, type Cursor } from '../db/cursor.ts';
import { isId, type IdPrefix } from '../ids.ts';
import { MAX_DETAILS, moreProblems, validationError, type ErrorDetail } from '../errors.ts';

/**
 * The first MAX_DETAILS problems as details (and how many more), whatever the number of issues:
 * an unknown-keys issue is one problem per key, so thirty stray fields say "and 10 more".
 */
function details(issues: readonly z.core.$ZodIssue[], root: string): ErrorDetail[] {
  const listed: ErrorDetail[] = [];
  let total = 0;
  for (const issue of issues) {
    const base = issue.path.map(String).join('.');
    const keys = issue.code === 'unrecognized_keys' ? issue.keys : null;
    total += keys ? keys.length : 1;
    if (listed.length >= MAX_DETAILS) continue;
    if (keys) {
      for (const key of keys.slice(0, MAX_DETAILS - listed.length)) listed.push({ path: base ? `${base}.${key}` : key, message: 'unknown field' });
    } else {
      listed.push({ path: base || root, message: issue.message });
    }
  }
  return total > listed.length ? [...listed, moreProblems(total - listed.length)] : listed;
}

export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  const result = schema.safeParse(body ?? {});
  if (!result.success) throw validationError('The request body is invalid.', details(result.error.issues, 'body'));
  return result.data;
}

/**
 * The app's query string parser (express's "simple" one, node:querystring): a name or value
 * holding U+0000 (`%00`) is a 400 here, as no query value may carry it to PostgreSQL.
 */
export function parseQueryString(text: string): Record<string, string | string[]> {
  const query = parse(text);
  for (const [name, value] of Object.entries(query)) {
    if (name.includes('\0') || (Array.isArray(value) ? value.some((v) => v.includes('\0')) : value?.includes('\0'))) {
      throw validationError('The query string is invalid.', [{ path: name.replaceAll('\0', ''), message: 'must not contain the character U+0000' }]);
    }
  }
  return query as Record<string, string | string[]>;
}

export function parseQuery<S extends z.ZodType>(schema: S, query: unknown): z.output<S> {
  const result = schema.safeParse(query);
  if (!result.success) {
    // A parameter given twice (`?type=a&type=b`) arrives as an array, which the schema's own
    // words ("must be one of …") did not say (a probe).
    const given = (query ?? {}) as Record<string, unknown>;
    const issues = result.error.issues.map((issue) => {
      const name = issue.path[0];
      const value = typeof name === 'string' && Object.hasOwn(given, name) ? given[name] : undefined;
      return Array.isArray(value) && issue.path.length === 1 ? { ...issue, message: `is given ${value.length} times: give it once` } : issue;
    });
    throw validationError('The query string is invalid.', details(issues, 'query'));
  }
  return result.data;
}

const noParameters = z.strictObject({});

/**
 * An operation that defines no query parameter refuses any, as one that defines some refuses
 * the others (README: a typo must not pass unnoticed): the same 400 and details as parseQuery.
 * A URL without `?` costs one string search and no parsing, so job creation, the hot path,
 * checks it too.
 */
export function assertNoQuery(req: Request<unknown>): void {
  if (req.url.includes('?')) parseQuery(noParameters, req.query);
}

/**
 * assertNoQuery as the first handler of a route that defines no query parameter (generic, so the
 * route's own handler keeps the parameters its path names).
 */
export function noQuery<P>(req: Request<P>, _res: Response, next: NextFunction): void {
  assertNoQuery(req);
  next();
}

const noFields = z.strictObject({});

/**
 * As noQuery, for the body of an operation that takes none (a delete, an action such as retry,
 * rotate-secret or reset-circuit): absent or `{}`, else a 400 naming each field. Any JSON object
 * passed before and the action ran: a caller who sent `{"since": …}` to retry by mistake got a
 * silent retry (a probe of the contract).
 */
export function noBody<P>(req: Request<P>, _res: Response, next: NextFunction): void {
  if (req.body !== undefined) parseBody(noFields, req.body);
  next();
}

/** noQuery and noBody: an operation that takes neither. */
export const noInput = [noQuery, noBody];

/** The `cursor` of a cursor list: null when absent, a 400 when it is not one this list issued. */
export function parseCursor(value: string | undefined, prefix: IdPrefix): Cursor | null {
  if (value === undefined) return null;
  const cursor = decodeCursor(value, (id) => isId(prefix, id));
  if (!cursor) throw validationError('The query string is invalid.', [{ path: 'cursor', message: 'is not a cursor returned by this list' }]);
  return cursor;
}
