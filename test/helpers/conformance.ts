// The OpenAPI document as a test oracle: every response a test receives through request() is
// checked against it (status documented for the operation, body matching its schema, required
// headers present and well-formed), so code and document cannot drift apart unnoticed.
// Validators are compiled with Ajv (2020-12, the dialect of OpenAPI 3.1) once per process, per
// operation and status.
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { openApiDocument } from '../../src/api/openapi/document.ts';

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

/**
 * Paths deliberately left out of the document, whose responses are not checked: /metrics is
 * for operators (Prometheus text, often on its own port), not part of the API; /docs is the
 * HTML page that renders the document.
 */
const UNDOCUMENTED = [/^\/metrics$/, /^\/docs(\/|$)/];

type Json = Record<string, any>;
type Route = { template: string; pattern: RegExp; item: Json };

let state: { ajv: Ajv2020; doc: Json; routes: Route[]; cache: Map<string, ValidateFunction> } | undefined;

function init() {
  if (state) return state;
  const doc = openApiDocument() as Json;
  // validateSchema: false: checking the whole document against the 2020-12 meta-schema cost each
  // test process about 90 ms of CPU and looked at none of its schemas (they sit under OpenAPI
  // keywords the meta-schema does not know); test/openapi.test.ts checks each of them once a run.
  const ajv = addFormats(new Ajv2020({ strict: false, allErrors: true, validateFormats: true, validateSchema: false }));
  ajv.addSchema(doc, 'openapi.json');
  // Literal segments win over parameters (/applications/by-uid/{uid} before /applications/{id}).
  const routes = Object.entries(doc.paths as Json).map(([template, item]) => ({
    template,
    item: item as Json,
    pattern: new RegExp(`^${template.replace(/[.]/g, '\\.').replace(/\{[^}]+\}/g, '[^/]+')}$`),
  })).sort((a, b) => (a.template.match(/\{/g)?.length ?? 0) - (b.template.match(/\{/g)?.length ?? 0));
  state = { ajv, doc, routes, cache: new Map() };
  return state;
}

const pointer = (...parts: string[]) => parts.map((p) => p.replaceAll('~', '~0').replaceAll('/', '~1')).join('/');

function validator(ref: string): ValidateFunction {
  const { ajv, cache } = init();
  let validate = cache.get(ref);
  if (!validate) {
    validate = ajv.compile({ $ref: `openapi.json#/${ref}` });
    cache.set(ref, validate);
  }
  return validate;
}

/** Follows a local `$ref` of the document (responses and headers are components). */
function resolve(node: Json): [Json, string | null] {
  if (typeof node.$ref !== 'string') return [node, null];
  const path = (node.$ref as string).replace(/^#\//, '');
  let target: any = init().doc;
  for (const part of path.split('/')) target = target[part.replaceAll('~1', '/').replaceAll('~0', '~')];
  return [target as Json, path];
}

export type Received = { method: string; path: string; status: number; headers: Headers; body: unknown; isJson: boolean };

/** Problems of one response against the document (empty when it conforms). */
export function conformanceProblems(res: Received): string[] {
  const { routes } = init();
  const path = res.path.split('?')[0] ?? '';
  if (UNDOCUMENTED.some((p) => p.test(path))) return [];
  const method = res.method.toLowerCase();
  const route = routes.find((r) => r.pattern.test(path));
  const operation = route?.item[method] as Json | undefined;
  if (!route || !operation) {
    // Not an operation of the document: it must be refused with the error body.
    if (res.status < 400 || res.status > 499) return [`undocumented route answered ${res.status} (only a 4xx error is expected)`];
    return bodyProblems(res, 'components/schemas/Error');
  }
  const name = `${operation.operationId as string} (${method.toUpperCase()} ${route.template})`;
  const documented = (operation.responses as Json)[String(res.status)] as Json | undefined;
  if (!documented) {
    return [`${name}: status ${res.status} is not documented (documented: ${Object.keys(operation.responses as Json).join(', ')})`];
  }
  const [response, componentPath] = resolve(documented);
  const base = componentPath ?? pointer('paths', route.template, method, 'responses', String(res.status));
  const problems: string[] = [];
  for (const [headerName, headerNode] of Object.entries((response.headers ?? {}) as Json)) {
    const [header, headerPath] = resolve(headerNode as Json);
    const value = res.headers.get(headerName);
    if (value === null) {
      if (header.required) problems.push(`header ${headerName} is missing`);
      continue;
    }
    const validate = validator(`${headerPath ?? `${base}/headers/${pointer(headerName)}`}/schema`);
    if (!validate(value)) problems.push(`header ${headerName}: ${JSON.stringify(value)} ${init().ajv.errorsText(validate.errors)}`);
  }
  const content = (response.content ?? {}) as Json;
  if (content['application/json']) {
    problems.push(...bodyProblems(res, `${base}/content/${pointer('application/json')}/schema`));
  } else if (res.body !== '' && res.body !== undefined) {
    problems.push('a body was sent where none is documented');
  }
  return problems.map((p) => `${name} answered ${res.status}: ${p}`);
}

function bodyProblems(res: Received, schemaRef: string): string[] {
  if (!res.isJson) return [`the body is not JSON: ${String(res.body).slice(0, 200)}`];
  const validate = validator(schemaRef);
  if (validate(res.body)) return [];
  return [`the body does not match its schema: ${init().ajv.errorsText(validate.errors, { dataVar: 'body', separator: '; ' })}`];
}

/** Throws, naming the operation, status and every problem, when the response does not conform. */
export function assertConforms(res: Received): void {
  const problems = conformanceProblems(res);
  if (problems.length > 0) {
    throw new Error(`Response does not conform to the OpenAPI document (${res.method} ${res.path}):\n  ${problems.join('\n  ')}`);
  }
}

/**
 * Problems of a request we delivered to a receiver against the document's `webhooks` section
 * (its header parameters, content type and body); empty when it conforms.
 */
export function webhookRequestProblems(headers: Record<string, string | string[] | undefined>, body: Buffer): string[] {
  const { doc, ajv } = init();
  const base = pointer('webhooks', 'webhook-job', 'post');
  const operation = doc.webhooks['webhook-job'].post as Json;
  const problems: string[] = [];
  (operation.parameters as Json[]).forEach((parameter, i) => {
    if (parameter.in !== 'header') return;
    const value = headers[(parameter.name as string).toLowerCase()];
    if (value === undefined) {
      if (parameter.required) problems.push(`header ${parameter.name as string} is missing`);
      return;
    }
    const validate = validator(`${base}/parameters/${i}/schema`);
    if (!validate(value)) problems.push(`header ${parameter.name as string}: ${JSON.stringify(value)} ${ajv.errorsText(validate.errors)}`);
  });
  const contentType = String(headers['content-type'] ?? '');
  const media = (operation.requestBody as Json).content[contentType] as Json | undefined;
  if (!media) return [...problems, `content-type ${contentType} is not documented`];
  const validate = validator(`${base}/requestBody/content/${pointer(contentType)}/schema`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return [...problems, 'the body is not JSON'];
  }
  if (!validate(parsed)) problems.push(`the body does not match its schema: ${ajv.errorsText(validate.errors, { dataVar: 'body' })}`);
  return problems;
}
