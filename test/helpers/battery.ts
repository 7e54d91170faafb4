// The worst hostile inputs for memory (issue 18): bodies just over the limit (declared and
// chunked), a decompression bomb, JSON nested 10,000 deep, arrays of 100,000 elements that
// each fail validation, and very long strings in fields and query parameters.
import http from 'node:http';
import { gzipBomb, nestedArrays, rawRequest, type RawRequest, type RawResponse } from './hostile.ts';

export type BatteryTargets = { key: string; applicationId: string; eventType: string };

/** A body sent with Transfer-Encoding: chunked (no Content-Length), so the server must count. */
export function chunkedRequest(baseUrl: string, request: RawRequest & { body: Buffer }): Promise<RawResponse> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, method: request.method, path: request.path, headers: request.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString() }));
    });
    req.on('error', (error: NodeJS.ErrnoException) => {
      // The server may answer 413 and close before the whole body is sent.
      if (error.code === 'EPIPE' || error.code === 'ECONNRESET') resolve({ status: 413, headers: {}, text: '' });
      else reject(error);
    });
    for (let at = 0; at < request.body.length; at += 64 * 1024) req.write(request.body.subarray(at, at + 64 * 1024));
    req.end();
  });
}

const list = (count: number, item: string) => `[${Array(count).fill(item).join(',')}]`;

/** One round of the battery: each request once. Every answer must be a 4xx. */
export function batteryRound(t: BatteryTargets): Array<{ what: string; chunked?: boolean } & RawRequest> {
  const json = { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' };
  const auth = { authorization: `Bearer ${t.key}` };
  const big = 'x'.repeat(1_150_000);
  const long = 'y'.repeat(900_000);
  const query = 'z'.repeat(7000);
  return [
    { what: '1.1 MB body', method: 'POST', path: '/v1/webhook-jobs', headers: json, body: `{"payload":{"a":"${big}"}}` },
    { what: '1.1 MB chunked body', chunked: true, method: 'POST', path: '/v1/webhook-jobs', headers: json, body: `{"payload":{"a":"${big}"}}` },
    { what: '50 MB gzip bomb', method: 'POST', path: '/v1/applications', headers: { ...json, 'content-encoding': 'gzip' }, body: gzipBomb(50 * 1024 * 1024) },
    { what: 'JSON nested 10,000 deep', method: 'POST', path: '/v1/webhook-jobs', headers: json, body: `{"payload":{"a":${nestedArrays(10_000)}}}` },
    { what: '100,000 bad scopes', method: 'POST', path: '/v1/api-keys', headers: json, body: `{"name":"x","scopes":${list(100_000, '"nope"')}}` },
    { what: '100,000 unknown event types', method: 'POST', path: '/v1/endpoints', headers: json,
      body: `{"application_id":"${t.applicationId}","url":"https://example.com/","event_types":${list(100_000, '"a.b"')}}` },
    { what: '100,000 payload items against a schema', method: 'POST', path: '/v1/webhook-jobs', headers: json,
      body: `{"application_id":"${t.applicationId}","event_type":"${t.eventType}","payload":{"items":${list(100_000, '"s"')}}}` },
    { what: '30,000 custom headers', method: 'POST', path: '/v1/webhook-jobs', headers: json,
      body: `{"application_id":"${t.applicationId}","event_type":"${t.eventType}","payload":{},"headers":{${Array.from({ length: 30_000 }, (_, i) => `"x-h${i}":"v"`).join(',')}}}` },
    { what: 'long strings in every field', method: 'POST', path: '/v1/applications', headers: json,
      body: `{"name":"${long.slice(0, 300_000)}","uid":"${long.slice(0, 300_000)}","metadata":{"m":"${long.slice(0, 300_000)}"}}` },
    { what: 'long unknown field names', method: 'POST', path: '/v1/applications', headers: json,
      body: `{${Array.from({ length: 80 }, (_, i) => `"${i}${long.slice(0, 10_000)}":1`).join(',')}}` },
    { what: 'long query values', method: 'GET', path: `/v1/webhook-jobs?application_id=${query}&event_type=${query}`, headers: auth },
  ];
}

export async function sendBattery(baseUrl: string, t: BatteryTargets, rounds: number): Promise<string[]> {
  const failures: string[] = [];
  const requests = batteryRound(t);
  for (let round = 0; round < rounds; round++) {
    for (const request of requests) {
      const body = Buffer.isBuffer(request.body) ? request.body : Buffer.from(request.body ?? '');
      const res = request.chunked
        ? await chunkedRequest(baseUrl, { ...request, body })
        : await rawRequest(baseUrl, { ...request, ...(request.body === undefined ? {} : { body }) });
      if (res.status < 400 || res.status >= 500) failures.push(`${request.what}: ${res.status} ${res.text.slice(0, 200)}`);
      if (res.text.length > 64 * 1024) failures.push(`${request.what}: a ${res.text.length}-byte error body`);
    }
  }
  return failures;
}
