// Fuzzing generated from openapi.json: every operation gets hostile values in its path ids,
// query parameters and body fields (by JSON Schema type), hostile whole bodies and bodies whose
// Content-Encoding lies. No answer may be a 5xx (decisions section 3), and every 4xx carries
// the section-3 error body. The request count is bounded so the file runs in seconds.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import test from 'ava';
import { startTestApp } from './helpers/app.ts';
import {
  closeRawAgent, forgedCursors, forgedTimestamps, hostileBodies, hostileIds, hostileQueryValues, hostileValues,
  mismatchedEncodings, rawRequest, type RawRequest,
} from './helpers/hostile.ts';
import { ROOT } from './helpers/process.ts';

const app = startTestApp({
  RATE_LIMIT_API_KEYS_PER_HOUR: '1000000', RATE_LIMIT_JOBS_PER_SECOND: '1000000', RATE_LIMIT_ENDPOINT_TESTS_PER_MINUTE: '1000000',
});
test.after.always(closeRawAgent);

type Schema = { type?: string; anyOf?: Schema[]; properties?: Record<string, Schema>; required?: string[]; format?: string };
type Parameter = { name: string; in: 'path' | 'query'; schema: Schema };
type Operation = { parameters?: Parameter[]; requestBody?: { content: { 'application/json': { schema: Schema } } } };

const document = JSON.parse(readFileSync(path.join(ROOT, 'openapi.json'), 'utf8')) as { paths: Record<string, Record<string, Operation>> };

const typeOf = (schema: Schema): string | undefined =>
  schema.type ?? schema.anyOf?.map(typeOf).find((type) => type !== undefined && type !== 'null');

type Fixture = { key: string; ids: Record<string, string>; eventType: string };

/** A valid value for a required body property, so that one hostile field at a time gets deep. */
function validValue(operationPath: string, name: string, fixture: Fixture, serial: number): unknown {
  switch (name) {
    case 'application_id': return fixture.ids.app;
    case 'event_type': return fixture.eventType;
    case 'url': return 'https://example.com/hook';
    case 'payload': return {};
    case 'scopes': return ['*'];
    case 'event_types': return [];
    case 'name': return operationPath.includes('event-types') ? `fuzz.valid_${serial}` : `fuzz ${serial}`;
    default: return undefined;
  }
}

/** Which fixture id a path's `{id}` takes. */
function idFor(operationPath: string, fixture: Fixture): string {
  const family = operationPath.split('/')[2];
  const prefix = { 'api-keys': 'target', applications: 'app', endpoints: 'ep', 'event-types': 'evt', 'webhook-jobs': 'job' }[family ?? ''];
  return fixture.ids[prefix ?? ''] ?? 'missing';
}

function requestsFor(operationPath: string, method: string, operation: Operation, fixture: Fixture): Array<RawRequest & { what: string }> {
  const out: Array<RawRequest & { what: string }> = [];
  const auth = { authorization: `Bearer ${fixture.key}` };
  const json = { ...auth, 'content-type': 'application/json' };
  const params = operation.parameters ?? [];
  const pathParams = params.filter((p) => p.in === 'path');
  const queryParams = params.filter((p) => p.in === 'query');
  // DELETE with a valid id would remove what the other requests aim at: only hostile ids for it.
  const validPath = operationPath.replace(/\{(\w+)\}/g, (_, name: string) => (name === 'uid' ? 'fuzz-app' : idFor(operationPath, fixture)));
  const upper = method.toUpperCase();
  let serial = 0;

  for (const param of pathParams) {
    for (const id of hostileIds) {
      out.push({ what: `path ${param.name}=${id.slice(0, 20)}`, method: upper, path: operationPath.replace(`{${param.name}}`, id), headers: json, body: '{}' });
    }
  }
  if (upper === 'DELETE') return out;

  for (const param of queryParams) {
    // The list's required application_id, unless it is the parameter under test.
    const required = param.name !== 'application_id' && queryParams.some((p) => p.name === 'application_id') ? `&application_id=${fixture.ids.app}` : '';
    const values = [...hostileQueryValues];
    if (param.name === 'cursor') values.push(...forgedCursors(fixture.ids.cursorId ?? '').map(encodeURIComponent));
    if (param.schema.format === 'date-time') values.push(...forgedTimestamps.map((v) => v.replace('+', '%2B')));
    for (const value of values) {
      out.push({ what: `query ${param.name}=${value.slice(0, 30)}`, method: upper, path: `${validPath}?${param.name}=${value}${required}`, headers: auth });
    }
    out.push({ what: `query ${param.name} twice`, method: upper, path: `${validPath}?${param.name}=1&${param.name}=2`, headers: auth });
    out.push({ what: `query ${param.name}[x]`, method: upper, path: `${validPath}?${param.name}[x]=1&${param.name}[y][z]=%00`, headers: auth });
  }
  out.push({ what: 'unknown query parameter with NUL', method: upper, path: `${validPath}?z%00=%00`, headers: auth });

  const schema = operation.requestBody?.content['application/json'].schema;
  if (!schema) return out;
  const base = (): Record<string, unknown> => {
    const body: Record<string, unknown> = {};
    for (const name of schema.required ?? []) body[name] = validValue(operationPath, name, fixture, serial++);
    return body;
  };
  for (const [name, property] of Object.entries(schema.properties ?? {})) {
    for (const value of hostileValues(typeOf(property))) {
      const body = JSON.stringify({ ...base(), [name]: '\u0001PLACEHOLDER' }).replace('"\\u0001PLACEHOLDER"', value);
      out.push({ what: `body ${name}=${value.slice(0, 30)}`, method: upper, path: validPath, headers: json, body });
    }
  }
  for (const body of hostileBodies) {
    out.push({ what: `body ${body.slice(0, 30)}`, method: upper, path: validPath, headers: json, body });
  }
  for (const { encoding, body } of mismatchedEncodings(JSON.stringify(base()))) {
    out.push({ what: `content-encoding ${encoding}`, method: upper, path: validPath, headers: { ...json, 'content-encoding': encoding }, body });
  }
  for (const type of ['text/plain', 'application/json; charset=utf-16', 'application/json; charset=klingon', 'application/x-www-form-urlencoded']) {
    out.push({ what: `content-type ${type}`, method: upper, path: validPath, headers: { ...auth, 'content-type': type }, body: JSON.stringify(base()) });
  }
  return out;
}

async function makeFixture(): Promise<Fixture> {
  const { key } = await app.createOrg();
  const call = async (method: string, url: string, body?: unknown) => {
    const res = await app.request(method, url, { key, ...(body === undefined ? {} : { body }) });
    if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };
  const application = await call('POST', '/v1/applications', { name: 'fuzz', uid: 'fuzz-app' });
  const eventType = await call('POST', '/v1/event-types', { name: 'fuzz.happened', schema: { type: 'object' } });
  const endpoint = await call('POST', '/v1/endpoints', {
    application_id: application.id, url: 'https://example.com/hook', event_types: ['fuzz.happened'],
  });
  const job = await call('POST', '/v1/webhook-jobs', { application_id: application.id, event_type: 'fuzz.happened', payload: {} });
  const target = await call('POST', '/v1/api-keys', { name: 'target', scopes: ['applications:read'] });
  return {
    key, eventType: 'fuzz.happened',
    ids: { app: application.id, evt: eventType.id, ep: endpoint.id, job: job.id, target: target.id, cursorId: target.id },
  };
}

test('no hostile request generated from openapi.json gets a 5xx; every 4xx has the error body', async (t) => {
  t.timeout(180_000); // some 1,400 requests: seconds on a quiet machine, longer on a shared one
  const fixture = await makeFixture();
  const requests = Object.entries(document.paths).flatMap(([operationPath, operations]) =>
    Object.entries(operations).flatMap(([method, operation]) => requestsFor(operationPath, method, operation, fixture)));
  t.true(requests.length > 1000, `only ${requests.length} requests generated`);

  const failures: string[] = [];
  let next = 0;
  const worker = async () => {
    while (next < requests.length) {
      const request = requests[next++]!;
      const res = await rawRequest(app.baseUrl, request);
      const where = `${request.method} ${request.path.slice(0, 80)} (${request.what})`;
      if (res.status >= 500) {
        failures.push(`${where}: ${res.status} ${res.text.slice(0, 200)}`);
      } else if (res.status >= 400) {
        const body = res.headers['content-type']?.includes('application/json') ? JSON.parse(res.text) as { error?: { code?: unknown; message?: unknown } } : null;
        if (typeof body?.error?.code !== 'string' || typeof body.error.message !== 'string') failures.push(`${where}: ${res.status} without the error body`);
      }
    }
  };
  await Promise.all(Array.from({ length: 4 }, worker));
  t.log(`${requests.length} fuzz requests, ${failures.length} failures`);
  t.deepEqual(failures, []);
});
