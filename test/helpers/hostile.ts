// Hostile inputs shared by the fuzz test and the memory test: values per JSON Schema type,
// forged cursors and timestamps, malformed path ids, and raw HTTP requests that the fetch
// API would refuse or normalise (wrong Content-Encoding, bare percent signs).
import http from 'node:http';
import zlib from 'node:zlib';
import { BODY_LIMIT_BYTES } from '../../src/api/middleware/json-body.ts';

export type RawResponse = { status: number; headers: http.IncomingHttpHeaders; text: string };

export type RawRequest = { method: string; path: string; headers?: Record<string, string>; body?: Buffer | string };

const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });

/** One request exactly as given (path bytes, headers, body), over a keep-alive agent. */
export function rawRequest(baseUrl: string, request: RawRequest): Promise<RawResponse> {
  const url = new URL(baseUrl);
  const body = typeof request.body === 'string' ? Buffer.from(request.body) : request.body;
  const headers: Record<string, string> = { ...request.headers };
  if (body) headers['content-length'] = String(body.length);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, method: request.method, path: request.path, headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString() }));
      res.on('error', reject);
    });
    req.on('error', (error: NodeJS.ErrnoException) => {
      // A body over the limit may be answered 413 and the connection closed before it is all
      // sent (Content-Length alone tells the server); no other request may lose its connection.
      const overLimit = body !== undefined && body.length > BODY_LIMIT_BYTES;
      if (overLimit && (error.code === 'EPIPE' || error.code === 'ECONNRESET')) resolve({ status: 413, headers: {}, text: '' });
      else reject(error);
    });
    req.end(body);
  });
}

export function closeRawAgent(): void {
  agent.destroy();
}

/** `depth` nested arrays around a value: `[[[...1...]]]`. */
export function nestedArrays(depth: number): string {
  return '['.repeat(depth) + '1' + ']'.repeat(depth);
}

/** `depth` nested objects: `{"a":{"a":...}}`. */
export function nestedObjects(depth: number): string {
  return '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
}

const NUL = 'a\u0000b';

/** Hostile JSON values for a property of this JSON Schema type. Each is JSON text. */
export function hostileValues(type: string | undefined): string[] {
  const common = [JSON.stringify(NUL), 'null', '{}', '[]', JSON.stringify('x'.repeat(20_000)), nestedArrays(3000)];
  switch (type) {
    case 'string':
      return [...common, '12345', 'true', JSON.stringify('\ud800'), JSON.stringify('%00%'), JSON.stringify('300000-01-01T00:00:00Z'),
        JSON.stringify('0000-01-01T00:00:00+23:59'), JSON.stringify('9999-12-31T23:59:59.999-23:59')];
    case 'integer':
    case 'number':
      return [...common, '1e308', '-1', '9223372036854775808', '1.5', '"1"', '-0', '1e-400'];
    case 'boolean':
      return [...common, '"true"', '0'];
    case 'array':
      return [...common, `[${Array(20_000).fill(JSON.stringify(NUL)).join(',')}]`, '[null]', '[{}]', '"x"',
        `[${Array(5000).fill('"nope"').join(',')}]`];
    case 'object':
      return [...common, `{${JSON.stringify(NUL)}:1}`, `{"k":${JSON.stringify(NUL)}}`, '{"k":"\\ud800"}', '{"\\udfff":1}', nestedObjects(3000), '"x"',
        `{${Array.from({ length: 5000 }, (_, i) => `"k${i}":${JSON.stringify(NUL)}`).join(',')}}`];
    default:
      return common;
  }
}

/** Whole request bodies that are not what any operation expects. */
export const hostileBodies: string[] = [
  '{', '{"a":', 'not json', 'null', '"s"', '123', '[]', '\u0000', '{"\\u0000":1}', '{"a":"\\u0000"}', '{"a":"\\ud800"}',
  nestedArrays(10_000), nestedObjects(10_000), '{"a":' + nestedArrays(5000) + '}',
];

/** A body with a Content-Encoding it does not match, or one that cannot be decoded. */
export function mismatchedEncodings(json: string): Array<{ encoding: string; body: Buffer }> {
  const plain = Buffer.from(json);
  const gzip = zlib.gzipSync(plain);
  return [
    { encoding: 'gzip', body: plain },
    { encoding: 'deflate', body: plain },
    { encoding: 'br', body: plain },
    { encoding: 'gzip', body: gzip.subarray(0, gzip.length - 6) }, // truncated
    { encoding: 'deflate', body: gzip },
    { encoding: 'br', body: gzip },
    { encoding: 'gzip, gzip', body: gzip },
    { encoding: 'compress', body: plain },
    { encoding: 'identity', body: gzip },
  ];
}

/** `size` bytes of JSON-ish text compressed to a few KB: a decompression bomb. */
export function gzipBomb(size: number): Buffer {
  return zlib.gzipSync(Buffer.alloc(size, ' '), { level: 9 });
}

const cursorOf = (parts: unknown) => Buffer.from(JSON.stringify(parts)).toString('base64url');

/** Cursors a client forged: impossible dates, years PostgreSQL cannot hold, foreign shapes. */
export function forgedCursors(validId: string): string[] {
  return [
    cursorOf(['300000-01-01T00:00:00.000000Z', validId]),
    cursorOf(['2026-13-45T99:99:99.999999Z', validId]),
    cursorOf(['2026-02-30T00:00:00.000000Z', validId]),
    cursorOf(['0000-01-01T00:00:00.000000Z', validId]),
    cursorOf(['2026-01-01T00:00:00.000000Z', 'x\u0000']),
    cursorOf(['2026-01-01T00:00:00.000000Z', `${validId}\u0000`]),
    cursorOf([1, 2]),
    cursorOf({}),
    cursorOf('x'.repeat(3000)),
    '%%%', '%00', 'a'.repeat(6000), '!!!!',
  ];
}

/** Timestamps a query or body may carry that PostgreSQL cannot represent or that are not dates. */
export const forgedTimestamps = [
  '300000-01-01T00:00:00Z', '+300000-01-01T00:00:00Z', '2026-02-30T00:00:00Z', '2026-01-01T00:00:00+99:99',
  '0000-01-01T00:00:00+23:59', '9999-12-31T23:59:59.999-23:59', '2026-01-01T00:00:00.0000000000000000001Z', '2026%00',
];

/** Query string values (already percent-encoded where that is the point). */
export const hostileQueryValues = [
  '%00', 'a%00b', '%', '%E0%A4%A', '%ZZ', '%C0%80', '%ED%A0%80', 'x'.repeat(8000), '-1', '0', '1e400',
  '99999999999999999999', '1.5', '', 'NaN',
];

/** Path segments in place of an id. */
export const hostileIds = [
  '%00', 'x%00', '%', '%E0%A4%A', '%ZZ', '%C0%80', '%ED%A0%80', 'x'.repeat(5000), '..%2F..%2F', '%2e%2e', 'null', '0', '-1',
];
