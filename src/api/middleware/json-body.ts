// Request bodies are JSON or nothing: any other content type is a 415 before parsing. A body
// costs bounded memory and reaches nothing that would choke on it: at most BODY_LIMIT_BYTES
// both as sent (Content-Length) and after Content-Encoding is undone, UTF-8 only, nested at
// most MAX_JSON_DEPTH deep, and no string or key holding U+0000 (PostgreSQL text and jsonb
// cannot store it) or an unpaired UTF-16 surrogate (a `\ud800` escape without its pair: jsonb
// refuses it, text would keep U+FFFD in its place, and many receivers' JSON parsers fail on
// it). Depth, U+0000 and surrogates are found by one pass over the raw bytes before parsing.
import express, { type NextFunction, type Request, type Response } from 'express';
import { payloadTooLarge, unsupportedMediaType, validationError } from '../../errors.ts';

/** Large enough for a 256 KB job payload with its envelope; job payloads have their own limit. */
export const BODY_LIMIT_BYTES = 1024 * 1024;

/** Deeper JSON is refused: recursive code (validators, JSON.stringify, PostgreSQL's jsonb) stays shallow.
 * Deep enough for real payloads and for schemas up to their own nesting limit (64 schema levels
 * take about 128 JSON levels); event type schemas and payloads have their own, tighter checks. */
export const MAX_JSON_DEPTH = 256;

/** Thrown from body-parser's `verify` hook; body-parser tags it `entity.verify.failed`. */
export class RejectedBody extends Error {}

const BACKSLASH = 0x5c;
const QUOTE = 0x22;
const LOWER_U = 0x75;

/** The value of one hexadecimal digit's byte, or -1. */
function hexValue(byte: number | undefined): number {
  if (byte === undefined) return -1;
  if (byte >= 0x30 && byte <= 0x39) return byte - 0x30;
  const lower = byte | 0x20; // A-F to a-f
  return lower >= 0x61 && lower <= 0x66 ? lower - 0x57 : -1;
}

/** The code unit of a `\uXXXX` escape whose backslash is at `i`, or -1 when none is there. */
function escapedUnit(bytes: Uint8Array, i: number): number {
  if (bytes[i] !== BACKSLASH || bytes[i + 1] !== LOWER_U) return -1;
  let unit = 0;
  for (let k = 2; k < 6; k++) {
    const digit = hexValue(bytes[i + k]);
    if (digit < 0) return -1;
    unit = unit * 16 + digit;
  }
  return unit;
}

const isHighSurrogate = (unit: number) => unit >= 0xd800 && unit <= 0xdbff;
const isLowSurrogate = (unit: number) => unit >= 0xdc00 && unit <= 0xdfff;
const UNPAIRED = 'Strings in the request body must not contain an unpaired UTF-16 surrogate (a \\uD800-\\uDFFF escape without its pair).';

/** Why these JSON bytes are refused before parsing, or null. Invalid JSON is left to the parser. */
export function inspectJson(bytes: Uint8Array, maxDepth = MAX_JSON_DEPTH): string | null {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i];
    if (inString) {
      if (c === BACKSLASH) {
        const unit = escapedUnit(bytes, i);
        if (unit === 0) return 'Strings in the request body must not contain the character U+0000.';
        if (isLowSurrogate(unit)) return UNPAIRED;
        if (isHighSurrogate(unit)) {
          if (!isLowSurrogate(escapedUnit(bytes, i + 6))) return UNPAIRED;
          i += 11; // both escapes
          continue;
        }
        i++; // the escaped character, so that \" does not end the string
      } else if (c === QUOTE) {
        inString = false;
      }
    } else if (c === QUOTE) {
      inString = true;
    } else if (c === 0x5b || c === 0x7b) { // [ {
      if (++depth > maxDepth) return `The request body is nested more than ${maxDepth} levels deep.`;
    } else if (c === 0x5d || c === 0x7d) { // ] }
      depth--;
    }
  }
  return null;
}

const parseJson = express.json({
  limit: BODY_LIMIT_BYTES,
  type: () => true,
  verify: (_req, _res, bytes) => {
    const problem = inspectJson(bytes);
    if (problem) throw new RejectedBody(problem);
  },
});

function hasBody(req: Request): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** UTF-8 (or no charset): the raw-byte inspection above reads UTF-8. */
const UTF8 = /^utf-?8$/i;

/** body-parser's errors, each a client mistake, as the error rows of decisions section 3. */
function bodyError(error: unknown) {
  const { type } = error as { type?: unknown };
  if (error instanceof RejectedBody) return validationError(error.message);
  switch (type) {
    case 'entity.too.large':
      return payloadTooLarge(`The request body is larger than ${BODY_LIMIT_BYTES} bytes.`);
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return unsupportedMediaType();
    case 'entity.parse.failed':
      return validationError('The request body is not valid JSON.');
    default:
      // request.aborted, request.size.invalid, and a body its Content-Encoding does not decode
      return validationError('The request body could not be read (does it match its Content-Encoding?).');
  }
}

export function jsonBody(req: Request, res: Response, next: NextFunction): void {
  if (!hasBody(req)) return next();
  if (!req.is(['application/json', '+json'])) return next(unsupportedMediaType());
  const charset = /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(req.headers['content-type'] ?? '')?.[1];
  if (charset !== undefined && !UTF8.test(charset)) return next(unsupportedMediaType());
  // Refused before a byte is read (or inflated) when the sender says it is too large.
  if (Number(req.headers['content-length']) > BODY_LIMIT_BYTES) {
    return next(payloadTooLarge(`The request body is larger than ${BODY_LIMIT_BYTES} bytes.`));
  }
  parseJson(req, res, (error?: unknown) => next(error === undefined ? undefined : bodyError(error)));
}
