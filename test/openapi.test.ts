// The OpenAPI document: the committed openapi.json is the generated one, GET /v1/openapi.json
// serves it without a key, it passes the Redocly linter, its operations are exactly the routes
// (with the scopes the server enforces), and the conformance check that request() runs on every
// response really catches a drift.
import { readFileSync } from 'node:fs';
import { createConfig, lintFromString, type NormalizedProblem } from '@redocly/openapi-core';
import test from 'ava';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { Router } from 'express';
import { makeApp } from '../src/api/app.ts';
import { openApiDocument, openApiText } from '../src/api/openapi/document.ts';
import { makeLogger } from '../src/logger.ts';
import { makeApiKeysRouter } from '../src/api/routes/api-keys.ts';
import { makeApplicationsRouter } from '../src/api/routes/applications.ts';
import { makeEndpointRecoverRouter } from '../src/api/routes/endpoint-recover.ts';
import { makeEndpointActivityRouter, makeStatsRouter } from '../src/api/routes/endpoint-activity.ts';
import { makeEndpointsRouter } from '../src/api/routes/endpoints.ts';
import { makeEventTypesRouter } from '../src/api/routes/event-types.ts';
import { makeHealthRouter } from '../src/api/routes/health.ts';
import { makeOpenApiRouter } from '../src/api/routes/openapi.ts';
import { makeOperationalWebhooksRouter } from '../src/api/routes/operational-webhooks.ts';
import { makeCredentialRouter } from '../src/api/routes/credential.ts';
import { makeSummaryRouter } from '../src/api/routes/summary.ts';
import { makeWebhookJobsRouter } from '../src/api/routes/webhook-jobs.ts';
import { startTestApp } from './helpers/app.ts';
import { assertConforms, conformanceProblems, webhookRequestProblems, type Received } from './helpers/conformance.ts';

const app = startTestApp();

type Json = Record<string, any>;
const doc = openApiDocument() as Json;
const METHODS = ['get', 'post', 'patch', 'put', 'delete'];

/** Every operation of the document: method, path template, operation object. */
const operations = Object.entries(doc.paths as Json).flatMap(([path, item]) =>
  Object.entries(item as Json).filter(([method]) => METHODS.includes(method)).map(([method, op]) => ({ method, path, op: op as Json })));

/** A concrete path for a template, from the examples of its path parameters. */
function concrete(path: string, op: Json): string {
  return path.replace(/\{(\w+)\}/g, (_, name: string) => {
    const parameter = (op.parameters as Json[]).find((p) => p.in === 'path' && p.name === name);
    return encodeURIComponent(String(parameter?.schema.examples[0]));
  });
}

/** Every JSON Schema of the document: the components' schemas and each `schema` of an operation, a parameter or a header. */
function schemasOf(document: Json): Array<[string, Json]> {
  const found: Array<[string, Json]> = Object.entries((document.components?.schemas ?? {}) as Json)
    .map(([name, schema]) => [`components/schemas/${name}`, schema as Json]);
  const walk = (node: unknown, where: string) => {
    if (!node || typeof node !== 'object') return;
    for (const [key, value] of Object.entries(node as Json)) {
      if (key === 'schema' && value && typeof value === 'object') found.push([`${where}/schema`, value as Json]);
      else walk(value, `${where}/${key}`);
    }
  };
  for (const part of ['paths', 'webhooks', 'components']) {
    if (part === 'components') walk({ ...(document.components as Json), schemas: undefined }, 'components');
    else walk(document[part], part);
  }
  return found;
}

function invalidSchemas(ajv: Ajv2020, document: Json): string[] {
  return schemasOf(document).flatMap(([where, schema]) => (ajv.validateSchema(schema) ? [] : [`${where}: ${ajv.errorsText(ajv.errors)}`]));
}

test('every schema of the document is valid JSON Schema 2020-12 (the conformance check compiles them without this check)', (t) => {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  t.true(schemasOf(doc).length > 50, `${schemasOf(doc).length} schemas found`);
  t.deepEqual(invalidSchemas(ajv, doc), []);
  // The check sees a broken schema in a component, and one in an operation's response.
  const broken = structuredClone(doc);
  const [name] = Object.keys(broken.components.schemas as Json);
  broken.components.schemas[name as string].type = 'strin';
  broken.paths['/v1/applications'].get.responses['200'].content['application/json'].schema = { type: 'objekt' };
  const problems = invalidSchemas(ajv, broken);
  t.true(problems.some((p) => p.startsWith(`components/schemas/${name as string}:`)), problems.join('\n'));
  t.true(problems.some((p) => p.startsWith('paths//v1/applications/get/responses/200/')), problems.join('\n'));
});

test('openapi.json at the repository root is the generated document (else run `npm run openapi`)', (t) => {
  let committed = '';
  try {
    committed = readFileSync(new URL('../openapi.json', import.meta.url), 'utf8');
  } catch {
    t.fail('openapi.json is missing: run `npm run openapi` and commit it');
    return;
  }
  const generated = openApiText();
  if (committed === generated) return t.pass();
  const a = committed.split('\n');
  const b = generated.split('\n');
  const line = a.findIndex((text, i) => text !== b[i]);
  t.fail(`openapi.json is stale: run \`npm run openapi\` and commit it. First difference at line ${line + 1}:\n`
    + `  committed: ${a[line] ?? '(end of file)'}\n  generated: ${b[line] ?? '(end of file)'}`);
});

test('GET /v1/openapi.json needs no key and serves the document', async (t) => {
  const res = await app.request('GET', '/v1/openapi.json');
  t.is(res.status, 200);
  t.deepEqual(res.body, doc);
  t.is(res.body.openapi, '3.1.0');
  t.is(res.headers.get('access-control-allow-origin'), '*');
  // A wrong key does not matter either: the document is public.
  t.is((await app.request('GET', '/v1/openapi.json', { key: 'sk_live_wrong' })).status, 200);
});

// Accepted findings, each with its reason; everything else the linter reports fails the test.
const ACCEPTED: Array<{ rule: string; pointer: string; reason: string }> = [
  {
    rule: 'no-ambiguous-paths',
    pointer: '#/paths/~1v1~1applications~1{id}~1portal-links',
    reason: 'the literal by-uid is never an application id (ids are app_ and a KSUID), so /v1/applications/by-uid/portal-links has one reading',
  },
];

test('the document passes the Redocly linter (recommended-strict, plus stricter rules), offline', async (t) => {
  const config = await createConfig({
    extends: ['recommended-strict'],
    rules: {
      'operation-description': 'error',
      'parameter-description': 'error',
      'operation-tag-defined': 'error',
      'operation-singular-tag': 'error',
      'component-name-unique': 'error',
      'path-params-defined': 'error',
    },
  });
  const problems = await lintFromString({ source: openApiText(), absoluteRef: 'openapi.json', config });
  const pointerOf = (p: NormalizedProblem) => p.location[0]?.pointer ?? '';
  const unexpected = problems.filter((p) => !ACCEPTED.some((a) => a.rule === p.ruleId && a.pointer === pointerOf(p)));
  t.deepEqual(unexpected.map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${pointerOf(p)}`), []);
  // Every accepted finding still occurs: an exception that no longer applies is removed.
  for (const accepted of ACCEPTED) {
    t.true(problems.some((p) => p.ruleId === accepted.rule && pointerOf(p) === accepted.pointer), `stale exception: ${accepted.rule} at ${accepted.pointer}`);
  }
});

test('the operations of the document are exactly the routes of the app', (t) => {
  const { pool, config, queue } = app;
  const mounts: Array<[string, Router]> = [
    ['', makeHealthRouter(pool)],
    ['', makeOpenApiRouter()],
    ['/v1/api-keys', makeApiKeysRouter(pool, config)],
    ['/v1/applications', makeApplicationsRouter(pool, config)],
    ['/v1/endpoints', makeEndpointsRouter(pool, config, queue)],
    ['/v1/endpoints', makeEndpointRecoverRouter(pool)],
    ['/v1/endpoints', makeEndpointActivityRouter(pool)],
    ['/v1/stats', makeStatsRouter(pool)],
    ['/v1/event-types', makeEventTypesRouter(pool)],
    ['/v1/webhook-jobs', makeWebhookJobsRouter(pool, queue, config)],
    // The app's own /v1 routes (job creation, mounted ahead of everything else), as the app has them;
    // its GET /metrics is not an API operation.
    ['', { stack: (makeApp({ pool, config, queue, logger: makeLogger('silent') }).router.stack as Json[]).filter((layer) => layer.route?.path.startsWith('/v1/')) } as unknown as Router],
    ['/v1/operational-webhooks', makeOperationalWebhooksRouter(pool, config)],
    ['/v1/summary', makeSummaryRouter(pool)],
    ['/v1/credential', makeCredentialRouter(pool)],
  ];
  const routed = mounts.flatMap(([mount, router]) => (router.stack as Json[]).filter((layer) => layer.route).flatMap((layer) => {
    const path = `${mount}${layer.route.path === '/' ? '' : layer.route.path}`.replace(/:(\w+)/g, '{$1}');
    return Object.keys(layer.route.methods as Json).map((method) => `${method.toUpperCase()} ${path}`);
  })).filter((operation) => !operation.startsWith('OPTIONS ')); // OPTIONS is not in the document (docs/api.md §3)
  const documented = operations.map(({ method, path }) => `${method.toUpperCase()} ${path}`);
  t.deepEqual([...routed].sort(), [...documented].sort());
});

test('every documented operation is served (not an unknown route), and answers the documented way', async (t) => {
  const { key } = await app.createOrg();
  for (const { method, path, op } of operations) {
    // request() checks each answer against the document; ids are the documented examples (404s).
    const res = await app.request(method.toUpperCase(), concrete(path, op), { key });
    const unknownRoute = res.status === 404 && String(res.body?.error?.message).startsWith('Route ');
    t.false(unknownRoute, `${method.toUpperCase()} ${path} is not routed`);
  }
});

test('each operation needs exactly the scope the document names', async (t) => {
  const authenticated = operations.filter(({ op }) => (op.security as Json[]).length > 0);
  const scoped = authenticated.filter(({ op }) => ((op.security as Json[])[0]!.apiKey as string[]).length > 0);
  t.true(scoped.length >= 20);
  const FAMILIES = ['api-keys', 'applications', 'endpoints', 'event-types', 'webhooks'];
  // An operation that names no scope (GET /v1/credential) takes any valid key, even one with one narrow scope.
  for (const { method, path, op } of authenticated.filter((o) => !scoped.includes(o))) {
    t.regex(op.description as string, /Any valid API key/, `${method} ${path} says it needs no scope`);
    for (const scope of FAMILIES.map((f) => `${f}:read`)) {
      const narrow = await app.createOrg({ scopes: [scope] });
      t.is((await app.request(method.toUpperCase(), concrete(path, op), { key: narrow.key })).status, 200, `${method} ${path} with only ${scope}`);
    }
  }
  for (const { method, path, op } of scoped) {
    const [scope] = (op.security as Json[])[0]!.apiKey as string[];
    const [family] = scope!.split(':');
    const name = `${method.toUpperCase()} ${path}`;
    t.regex(op.description as string, new RegExp(`\`${scope}\` scope`), `${name} says its scope in its description`);
    // Each API-key requirement is an alternative that grants the operation alone.
    const alternatives = (op.security as Json[]).flatMap((requirement) => (requirement.apiKey as string[] | undefined) ?? []);
    for (const alternative of alternatives) {
      const enough = await app.createOrg({ scopes: [alternative] });
      const allowed = await app.request(method.toUpperCase(), concrete(path, op), { key: enough.key });
      t.not(allowed.status, 403, `${name} with only ${alternative}: ${JSON.stringify(allowed.body)}`);
    }
    if (alternatives.length > 1) t.regex(op.description as string, new RegExp(`\`${alternatives[1]}\` scope`), `${name} names its other scope`);
    const other = FAMILIES.find((f) => !alternatives.some((a) => a.startsWith(`${f}:`)))!;
    const wrong = await app.createOrg({ scopes: [`${other}:write`] });
    const refused = await app.request(method.toUpperCase(), concrete(path, op), { key: wrong.key });
    t.is(refused.status, 403, `${name} with only ${other}:write`);
    if (scope!.endsWith(':write')) {
      const readOnly = await app.createOrg({ scopes: [`${family}:read`] });
      t.is((await app.request(method.toUpperCase(), concrete(path, op), { key: readOnly.key })).status, 403, `${name} with only ${family}:read`);
    }
  }
});

test('the conformance check catches a body, a status or a header that drifted from the document', async (t) => {
  const { key } = await app.createOrg();
  const created = await app.request('POST', '/v1/api-keys', { key, body: { name: 'drift' } });
  const real: Received = { method: 'POST', path: '/v1/api-keys', status: 201, headers: created.headers, body: created.body, isJson: true };
  t.deepEqual(conformanceProblems(real), [], 'the real response conforms');

  const problems = (change: Partial<Received>) => conformanceProblems({ ...real, ...change }).join('\n');
  const { key: _key, ...withoutKey } = created.body;
  t.regex(problems({ body: withoutKey }), /createApiKey \(POST \/v1\/api-keys\) answered 201: .*must have required property 'key'/);
  t.regex(problems({ body: { ...created.body, key_hash: 'abc' } }), /must NOT have additional properties/);
  t.regex(problems({ body: { ...created.body, created_at: 'yesterday' } }), /body\/created_at must match format "date-time"/);
  t.regex(problems({ body: { ...created.body, environment: 'staging' } }), /body\/environment must be equal to one of the allowed values/);
  t.regex(problems({ body: { ...created.body, id: 'app_3MRoiSEQHlSh21uw49EYrYZcUFW' } }), /body\/id must match pattern/);
  t.regex(problems({ status: 200 }), /status 200 is not documented/);
  t.regex(problems({ body: 'created', isJson: false }), /the body is not JSON/);
  const noLimitHeaders = new Headers(created.headers);
  noLimitHeaders.delete('x-ratelimit-remaining');
  t.regex(problems({ headers: noLimitHeaders }), /header X-RateLimit-Remaining is missing/);
  // An error with a body that is not the shared error body.
  t.regex(problems({ status: 401, body: { message: 'no key' } }), /answered 401: .*must have required property 'error'/);
  t.regex(problems({ status: 400, body: { error: { code: 'oops', message: 'x' } } }), /body\/error\/code must be equal to one of the allowed values/);
  t.regex(problems({ status: 401, body: { error: { code: 'forbidden', message: 'x' } } }), /body\/error\/code must be equal to constant/);
  // An undocumented route may only refuse, with the error body.
  t.regex(conformanceProblems({ ...real, path: '/v1/secret-admin', status: 200 }).join(), /undocumented route answered 200/);
  // What request() does with such a response: it throws, naming the operation, the status and Ajv's findings.
  const error = t.throws(() => assertConforms({ ...real, body: withoutKey }));
  t.regex(error?.message ?? '', /does not conform to the OpenAPI document \(POST \/v1\/api-keys\)[\s\S]*createApiKey[\s\S]*201[\s\S]*'key'/);
});

test('the webhooks section catches a delivery request that drifted from it', (t) => {
  const body = Buffer.from('{"invoice_id":"in_1"}');
  const headers = {
    'content-type': 'application/json',
    'user-agent': 'hookline/0.1.0',
    'webhook-id': 'job_3MRoiRC7lM63hufv2gelggih9ok',
    'webhook-timestamp': '1795341600',
    'webhook-signature': 'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4= v1,bm90IGEgcmVhbCBzaWduYXR1cmUgYXQgYWxsIQ==',
    'webhook-event-type': 'invoice.paid',
  };
  t.deepEqual(webhookRequestProblems(headers, body), []);
  t.regex(webhookRequestProblems({ ...headers, 'webhook-signature': 'sha256=abc' }, body).join(), /header webhook-signature/);
  t.regex(webhookRequestProblems({ ...headers, 'webhook-id': 'msg_1' }, body).join(), /header webhook-id/);
  t.regex(webhookRequestProblems({ ...headers, 'webhook-timestamp': undefined }, body).join(), /header webhook-timestamp is missing/);
  t.regex(webhookRequestProblems({ ...headers, 'webhook-event-type': undefined }, body).join(), /header webhook-event-type is missing/);
  t.regex(webhookRequestProblems({ ...headers, 'content-type': 'text/plain' }, body).join(), /content-type text\/plain is not documented/);
  t.regex(webhookRequestProblems(headers, Buffer.from('[1,2]')).join(), /body must be object/);
});
