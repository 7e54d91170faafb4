// Request bodies are JSON or nothing: any other content type is a 415 before parsing. A body
// costs bounded memory and reaches nothing that would choke on it: at most BODY_LIMIT_BYTES
// both as sent (Content-Length) and after Content-Encoding is undone, UTF-8 only, nested at
// most MAX_JSON_DEPTH deep, and no string or key holding U+0000 (PostgreSQL text and jsonb
// cannot store it) or an unpaired UTF-16 surrogate (a `\ud800` escape without its pair: jsonb
// refuses it, text would keep U+FFFD in its place, and many receivers' JSON parsers fail on
// it). Depth, U+0000 and surrogates are found by one pass over the raw bytes before parsing.
// Two more things are refused after parsing, as the body would otherwise be stored other than
// sent: a number beyond a double's range (`1e400` parses to Infinity, which passes a schema's
// `minimum` and is stored and sent as null) and a key named `__proto__` (the API's validation
// drops it, so a payload, metadata or headers lost it silently). The parsed body is walked for
// them only when the same pass saw a number with an exponent or of more than 308 digits, a
// `\u` escape of a character of `__proto__`, or those bytes.
import { isUtf8 } from 'node:buffer';
import express, { type NextFunction, type Request, type Response } from 'express';
import { payloadTooLarge, unsupportedMediaType, validationError, type AppError } from '../../errors.ts';
import { currentRequestScope } from '../../db/request-scope.ts';
import { settleBody } from './body-budget.ts';
import { headerCount } from './raw-headers.ts';

/** Large enough for a 256 KB job payload with its envelope; job payloads have their own limit. */
export const BODY_LIMIT_BYTES = 1024 * 1024;

/** Deeper JSON is refused: recursive code (validators, JSON.stringify, PostgreSQL's jsonb) stays shallow.
 * Deep enough for real payloads and for schemas up to their own nesting limit (64 schema levels
 * take about 128 JSON levels); event type schemas and payloads have their own, tighter checks. */
export const MAX_JSON_DEPTH = 256;

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

/** What the raw pass saw that only the parsed value can tell: a number that may overflow, a `\u` escape that may spell `__proto__`. */
export type JsonMarks = { longNumber: boolean; escape: boolean };

/** The characters of `__proto__`: a `\u` escape of another (the non-ASCII text of many JSON encoders) spells no such key. */
const PROTO_UNITS = new Set([...'_proto'].map((ch) => ch.charCodeAt(0)));

/**
 * Why these JSON bytes are refused before parsing, or null. Invalid JSON is left to the parser.
 * `marks`, when given, is set for what the parsed value must be checked for (checkParsedJson).
 */
export function inspectJson(bytes: Uint8Array, maxDepth = MAX_JSON_DEPTH, marks?: JsonMarks): string | null {
  let depth = 0;
  let inString = false;
  let digits = 0;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (inString) {
      if (c === BACKSLASH) {
        const unit = escapedUnit(bytes, i);
        if (marks && PROTO_UNITS.has(unit)) marks.escape = true;
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
    } else if (c >= 0x30 && c <= 0x39) { // a digit
      // More digits than a double's largest integer has may overflow (a fraction's too: a false alarm costs a walk).
      if (++digits > 308 && marks) marks.longNumber = true;
      continue;
    } else if ((c === 0x65 || c === 0x45) && digits > 0) { // e E after a digit: an exponent (outside strings, the e of true and false follows a letter)
      if (marks) marks.longNumber = true;
    } else if (c === QUOTE) {
      inString = true;
    } else if (c === 0x5b || c === 0x7b) { // [ {
      if (++depth > maxDepth) return `The request body is nested more than ${maxDepth} levels deep.`;
    } else if (c === 0x5d || c === 0x7d) { // ] }
      depth--;
    }
    digits = 0;
  }
  return null;
}

const PROTO_KEY = { message: 'Keys named "__proto__" are not accepted in request bodies.', detail: 'is a key named __proto__' };
const NOT_FINITE = {
  message: 'Numbers in the request body must lie within a double\'s range (about ±1.8e308).', detail: 'is a number beyond a double\'s range',
};

/**
 * Why a parsed body is refused, with where, or null: a number that parsed to ±Infinity, a key
 * named `__proto__`. Walked without recursion; the depth was bounded before parsing.
 */
export function checkParsedJson(value: unknown): { message: string; detail: string; path: string } | null {
  const stack: Array<[unknown, string]> = [[value, '']];
  while (stack.length > 0) {
    const [node, path] = stack.pop()!;
    if (typeof node === 'number') {
      if (!Number.isFinite(node)) return { ...NOT_FINITE, path };
    } else if (Array.isArray(node)) {
      for (let i = node.length - 1; i >= 0; i--) stack.push([node[i], path === '' ? String(i) : `${path}.${i}`]);
    } else if (typeof node === 'object' && node !== null) {
      const keys = Object.keys(node);
      for (let i = keys.length - 1; i >= 0; i--) {
        const key = keys[i]!;
        const at = path === '' ? key : `${path}.${key}`;
        if (key === '__proto__') return { ...PROTO_KEY, path: at };
        stack.push([(node as Record<string, unknown>)[key], at]);
      }
    }
  }
  return null;
}

const PROTO_BYTES = Buffer.from('__proto__');

/** The body's bytes, read (and inflated) within the limit; parsed after, in its organization's turn. */
const readBody = express.raw({
  limit: BODY_LIMIT_BYTES,
  type: () => true,
  verify: (req, _res, bytes) => { settleBody(req as Request, bytes.length); },
});

/**
 * Bodies at least this large are inspected and parsed in their organization's turn: one at a
 * time, each in its own turn of the event loop. A tenant's dozen 1 MB bodies of 340,000 empty
 * objects (about 80 ms of parsing each) were parsed back to back, and another tenant's simple
 * GET waited 2.3 s at the median behind them (a probe). Now each step of that GET (its request,
 * its queries, its answer) waits for one parse at most: 0.3-0.9 s at the median with 12 such
 * bodies always open, against 1.4-3.5 s before (a probe, the machine otherwise busy). Parsing
 * off the event loop would be the next step.
 */
export const PARSE_IN_TURN_BYTES = 64 * 1024;

/** The end of each organization's chain of large parses (none listed: none waiting). */
const parseTurns = new Map<string, Promise<void>>();

/** `parse()` once the organization's earlier large parses are done, after a turn of the event loop. */
export function inTurn<T>(organization: string, parse: () => T): Promise<T> {
  const mine = (parseTurns.get(organization) ?? Promise.resolve())
    .then(() => new Promise<void>((resolve) => setImmediate(resolve)))
    .then(parse);
  const end = mine.then(() => {}, () => {});
  parseTurns.set(organization, end);
  void end.then(() => { if (parseTurns.get(organization) === end) parseTurns.delete(organization); });
  return mine;
}

const WHITESPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);
const UTF8_DECODER = new TextDecoder('utf-8'); // a byte order mark is dropped, as body-parser did

/**
 * The body as a value, or why it is refused: as express.json() in strict mode did (an object
 * or an array; empty: {}), after the raw pass of inspectJson and followed by checkParsedJson.
 */
function parseBody(bytes: Buffer): { value: unknown } | { error: AppError } {
  const marks: JsonMarks = { longNumber: false, escape: false };
  const problem = inspectJson(bytes, MAX_JSON_DEPTH, marks);
  if (problem) return { error: validationError(problem, [{ path: 'body', message: problem }]) };
  // Bytes that are not UTF-8 (0xFF, a surrogate's encoding ED A0 80) were decoded to U+FFFD and
  // stored so, where the escaped lone surrogate `"\ud800"` is refused for that reason (a probe).
  if (!isUtf8(bytes)) return { error: validationError('The request body is not valid UTF-8.', [{ path: 'body', message: 'is not valid UTF-8' }]) };
  const text = UTF8_DECODER.decode(bytes);
  if (text.length === 0) return { value: {} }; // an empty chunked body (or a byte order mark alone)
  let first = 0;
  while (first < text.length && WHITESPACE.has(text.charCodeAt(first))) first++;
  const opening = text[first];
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (caught) {
    return { error: validationError('The request body is not valid JSON.', [{ path: 'body', message: (caught as Error).message }]) };
  }
  if (opening !== '{' && opening !== '[') {
    // Valid JSON that is not an object (`null`, `3`, `"text"`): express.json()'s strict mode
    // said "\"null\" is not valid JSON", which said the JSON was wrong (a probe).
    return { error: validationError('The request body must be a JSON object.', [{ path: 'body', message: 'must be a JSON object, not a bare value' }]) };
  }
  if (marks.longNumber || marks.escape || bytes.indexOf(PROTO_BYTES) >= 0) {
    const found = checkParsedJson(value);
    if (found) return { error: validationError(found.message, [{ path: found.path === '' ? 'body' : found.path, message: found.detail }]) };
  }
  return { value };
}

/** Whether the request carries a body: chunked, or a Content-Length other than 0. */
export function hasBody(req: Request): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** UTF-8 (or no charset): the raw-byte inspection above reads UTF-8. */
const UTF8 = /^utf-?8$/i;

const unreadable = () => validationError('The request body could not be read (does it match its Content-Encoding?).', [{ path: 'body', message: 'could not be read' }]);

/**
 * An error of the body's reading (body-parser's `type`s) as the error row of decisions section 3;
 * null for any other error. The API's error handler asks it too; the reader's other errors (a
 * body its Content-Encoding does not decode) are `unreadable`.
 */
export function bodyParserError(error: unknown): AppError | null {
  const type = typeof error === 'object' && error !== null ? (error as { type?: unknown }).type : undefined;
  if (typeof type !== 'string') return null;
  switch (type) {
    case 'entity.too.large':
      return payloadTooLarge(`The request body is larger than ${BODY_LIMIT_BYTES} bytes.`);
    case 'encoding.unsupported':
      // Its own words: "Content-Type must be JSON" sent a client whose Content-Type was JSON
      // looking in the wrong place (a probe: `Content-Encoding: gzip, br`).
      return unsupportedMediaType(`Content-Encoding ${JSON.stringify(String((error as { encoding?: unknown }).encoding ?? '').slice(0, 100))} is not supported: send the body as is, or compressed once with gzip, deflate, br or zstd.`);
    case 'charset.unsupported':
      return unsupportedMediaType();
    case 'request.aborted':
    case 'request.size.invalid':
    case 'stream.encoding.set':
      return unreadable();
    default:
      return null;
  }
}

export function jsonBody(req: Request, res: Response, next: NextFunction): void {
  if (!hasBody(req)) return next();
  if (!req.is(['application/json', '+json'])) return next(unsupportedMediaType());
  // Two Content-Types (`application/json` then `text/plain`) were read as the first (a probe).
  const types = headerCount(req.rawHeaders, 'content-type');
  if (types > 1) return next(unsupportedMediaType(`The Content-Type header is given ${types} times: send one, application/json.`));
  const charset = /;\s*charset\s*=\s*"?([^";\s]*)/i.exec(req.headers['content-type'] ?? '')?.[1];
  if (charset !== undefined && !UTF8.test(charset)) return next(unsupportedMediaType());
  // Refused before a byte is read (or inflated) when the sender says it is too large.
  if (Number(req.headers['content-length']) > BODY_LIMIT_BYTES) {
    return next(payloadTooLarge(`The request body is larger than ${BODY_LIMIT_BYTES} bytes.`));
  }
  readBody(req, res, (error?: unknown) => {
    if (error !== undefined) return next(bodyParserError(error) ?? unreadable());
    const bytes: unknown = req.body;
    // Nothing read: the request had ended (its client gone) before its body was read. It goes on
    // without one, as before, and its scope refuses its database work.
    if (!Buffer.isBuffer(bytes)) return next();
    const done = (parsed: { value: unknown } | { error: AppError }) => {
      if ('error' in parsed) return next(parsed.error);
      req.body = parsed.value;
      next();
    };
    if (bytes.length < PARSE_IN_TURN_BYTES) return done(parseBody(bytes));
    inTurn(currentRequestScope()?.organization ?? '', () => parseBody(bytes)).then(done, next);
  });
}
